#!/usr/bin/env bash
# Relying parties of service-auth's identity provider (issue #46) against a server on a fresh data directory:
# openid-client (OpenID Certified) through every flow and refusal (openid-client.test.mjs); @better-auth/oauth-provider's
# client plugin with better-auth's createAuthClient (oauth-provider-client.test.mjs); a page on another origin in
# headless Chromium (app.test.mjs, app/; CHROMIUM=/path overrides /usr/bin/chromium). Each test file starts
# its own server (service.mjs).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/openid-client ] || npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")
SERVICE_AUTH_BIN="$BIN" node --test "$@"
