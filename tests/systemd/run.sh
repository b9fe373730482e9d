#!/usr/bin/env bash
# The systemd unit of docs/deployment.md: systemd-analyze verify (works without systemd as PID 1). verify wants the
# ExecStart binary to exist, so a copy points at the release build; it only warns (exit 0) about unknown keys, so
# any output fails the check.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(tests/binary.sh)
UNIT_DIR=$(mktemp -d)
trap 'rm -rf "$UNIT_DIR"' EXIT
sed "s|/usr/local/bin/service-auth|$BIN|" docs/service-auth.service > "$UNIT_DIR/service-auth.service"
UNIT_CHECK=$(systemd-analyze verify "$UNIT_DIR/service-auth.service" 2>&1) || { echo "$UNIT_CHECK"; exit 1; }
[ -z "$UNIT_CHECK" ] || { echo "systemd-analyze verify docs/service-auth.service: $UNIT_CHECK"; exit 1; }
echo "systemd-analyze verify docs/service-auth.service: no warning"
