#!/usr/bin/env bash
# The real better-auth client's signIn.social, signIn.oauth2, linkSocial, listAccounts and unlinkAccount against a
# release server and a real OpenID Connect provider (oidc-provider) on loopback; client.test.mjs starts both.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/oidc-provider ] || npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")
SERVICE_AUTH_BIN="$BIN" node --test client.test.mjs
