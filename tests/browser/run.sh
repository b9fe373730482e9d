#!/usr/bin/env bash
# A page on another origin, using the better-auth client, in headless Chromium against a release server: see
# browser.test.mjs; and the service's own pages (reset form, e-mail verified, first-run setup): pages.test.mjs.
# Needs Debian's `chromium` (CHROMIUM=/path overrides /usr/bin/chromium) and Node 20.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/@better-auth/passkey ] || npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")
SERVICE_AUTH_BIN="$BIN" node --test
