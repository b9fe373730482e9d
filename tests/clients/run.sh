#!/usr/bin/env bash
# Runs the better-auth client suite against a fresh release server on a temporary data directory.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/better-auth ] || npm ci --no-audit --no-fund
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" --bin service-auth
WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/config.toml"
export ADMIN_EMAIL=admin@example.com ADMIN_PASSWORD='client suite admin password'
( cd "$WORK" && SERVICE_AUTH_LISTEN=127.0.0.1:0 SERVICE_AUTH_DATA_DIR="$WORK/data" SERVICE_AUTH_LOG=warn \
  SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL="$ADMIN_EMAIL" SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
  exec "$ROOT/target/release/service-auth" > "$WORK/out" 2> "$WORK/err" ) &
PID=$!
for _ in $(seq 100); do grep -q 'listening on' "$WORK/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$ADDR" ] || { cat "$WORK/err"; exit 1; }
SERVICE_AUTH_URL="http://$ADDR" node --test
