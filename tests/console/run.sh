#!/usr/bin/env bash
# The administration console in headless Chromium against a release server holding 100,000 seeded users: see
# console.test.mjs. Needs Debian's `chromium` (CHROMIUM=/path overrides /usr/bin/chromium) and Node 20.
# SEED_USERS=5000 seeds fewer (a quicker run while working on the console; the timings printed are then not the
# documented ones). Screenshots go to docs/console/ (SCREENSHOTS=dir overrides, SCREENSHOTS= takes none); the
# users-page timings are printed at the end. A second small server (three seeded users, mail written to a
# directory) serves the organization admin's steps (ORG_URL, ORG_MAIL_DIR).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/puppeteer-core ] || npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")
WORK=$(mktemp -d)
PID=
ORG_PID=
trap '[ -z "$PID" ] || kill "$PID" 2>/dev/null || true; [ -z "$ORG_PID" ] || kill "$ORG_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
# Defaults, except the per-address sign-in limit: every browser and test request comes from 127.0.0.1.
# Three failures lock an e-mail out, so the overview's lock-out count is reached in a few steps; a webhook endpoint
# counts as failing after one second (not three days), so the overview's failing endpoint is reached in a few too.
printf '[rate_limit]\nsign_in_per_address = 0\nfailures_per_account = 3\n[webhooks]\nfailing_after_secs = 1\nallow_internal_targets = true\n' > "$WORK/config.toml"
export SERVICE_AUTH_CONFIG="$WORK/config.toml" SERVICE_AUTH_DATA_DIR="$WORK/data" SERVICE_AUTH_LOG=warn
export SEED_USERS="${SEED_USERS:-100000}"
# admin@seed.example (role admin) and user<N>@seed.example, all with the password seed-password-1.
"$BIN" seed --users "$SEED_USERS" --sessions 1000
( cd "$WORK" && SERVICE_AUTH_LISTEN=127.0.0.1:0 exec "$BIN" > "$WORK/out" 2> "$WORK/err" ) &
PID=$!
for _ in $(seq 300); do grep -q 'listening on' "$WORK/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$ADDR" ] || { cat "$WORK/err"; exit 1; }
# A second, small server whose mail goes to a directory, for the organization admin's steps (invitations are
# mailed; the first server has no mail transport, which its overview and users' pages assert).
mkdir -p "$WORK/orgs/mail"
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n[email]\ndirectory = "%s"\n[organizations]\nteams = true\n' "$WORK/orgs/mail" \
  > "$WORK/orgs/config.toml"
SERVICE_AUTH_CONFIG="$WORK/orgs/config.toml" SERVICE_AUTH_DATA_DIR="$WORK/orgs/data" \
  "$BIN" seed --users 3 > /dev/null
( cd "$WORK/orgs" && SERVICE_AUTH_CONFIG="$WORK/orgs/config.toml" SERVICE_AUTH_DATA_DIR="$WORK/orgs/data" \
  SERVICE_AUTH_LISTEN=127.0.0.1:0 exec "$BIN" > "$WORK/orgs/out" 2> "$WORK/orgs/err" ) &
ORG_PID=$!
for _ in $(seq 300); do grep -q 'listening on' "$WORK/orgs/out" 2>/dev/null && break; sleep 0.1; done
ORG_ADDR=$(sed -n 's/^listening on //p' "$WORK/orgs/out")
[ -n "$ORG_ADDR" ] || { cat "$WORK/orgs/err"; exit 1; }
ORG_URL="http://$ORG_ADDR" ORG_MAIL_DIR="$WORK/orgs/mail" SERVICE_AUTH_URL="http://$ADDR" SCREENSHOTS="${SCREENSHOTS-$ROOT/docs/console}" node --test --test-reporter=spec
