#!/usr/bin/env bash
# Runs the better-auth client suite against a fresh release server on a temporary data directory.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/better-auth ] || npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")
WORK=$(mktemp -d)
SMTP_PID=
trap 'kill "$PID" $SMTP_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
# A real SMTP server (aiosmtpd from PyPI) receiving into a Maildir the suite reads the reset links from; ./test
# installs it into the repository's .venv.
[ -x "$ROOT/.venv/bin/python3" ] && PATH="$ROOT/.venv/bin:$PATH"
python3 -c 'import aiosmtpd' 2>/dev/null || { echo "aiosmtpd is missing: run ./test (it installs tests/requirements.txt into .venv)" >&2; exit 1; }
SMTP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m aiosmtpd -n -l "127.0.0.1:$SMTP_PORT" -c aiosmtpd.handlers.Mailbox "$WORK/mail" &
SMTP_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$SMTP_PORT") 2>/dev/null && break; sleep 0.1; done
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nmail_per_address = 0\nmail_per_email = 0\n[email]\nsmtp_url = "smtp://127.0.0.1:%s"\n[two_factor]\ncodes_by_mail = true\n' \
  "$SMTP_PORT" > "$WORK/config.toml"
export ADMIN_EMAIL=admin@example.com ADMIN_PASSWORD='client suite admin password'
( cd "$WORK" && SERVICE_AUTH_LISTEN=127.0.0.1:0 SERVICE_AUTH_DATA_DIR="$WORK/data" SERVICE_AUTH_LOG=warn \
  SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL="$ADMIN_EMAIL" SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
  exec "$BIN" > "$WORK/out" 2> "$WORK/err" ) &
PID=$!
for _ in $(seq 100); do grep -q 'listening on' "$WORK/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$ADDR" ] || { cat "$WORK/err"; exit 1; }
SERVICE_AUTH_URL="http://$ADDR" MAILDIR="$WORK/mail" node --test
