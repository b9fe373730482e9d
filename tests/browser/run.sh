#!/usr/bin/env bash
# A page on another origin, using the better-auth client, in headless Chromium against a release server: see
# browser.test.mjs; the service's own pages (reset form, e-mail verified, first-run setup): pages.test.mjs; the
# front page, sign-in, account and invitation pages: account.test.mjs, whose mail goes through aiosmtpd.
# Needs Debian's `chromium` (CHROMIUM=/path overrides /usr/bin/chromium), Node 20 and aiosmtpd (./test installs
# tests/requirements.txt into .venv).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/@better-auth/passkey ] || npm ci --no-audit --no-fund
[ -x "$ROOT/.venv/bin/python3" ] && PATH="$ROOT/.venv/bin:$PATH"
python3 -c 'import aiosmtpd' 2>/dev/null || { echo "aiosmtpd is missing: run ./test (it installs tests/requirements.txt into .venv)" >&2; exit 1; }
BIN=$("$ROOT/tests/binary.sh")
SERVICE_AUTH_BIN="$BIN" node --test
