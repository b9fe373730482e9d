#!/usr/bin/env bash
# Runs the better-auth client suite against a fresh release server on a temporary data directory.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/@better-auth/sso ] || npm ci --no-audit --no-fund
# sso.test.mjs follows a SAML sign-in through tests/saml's identity provider (samlify).
[ -d ../saml/node_modules/samlify ] || (cd ../saml && npm ci --no-audit --no-fund)
BIN=$("$ROOT/tests/binary.sh")
WORK=$(mktemp -d)
SMTP_PID=
PID= BARE_PID=
trap 'kill $PID $BARE_PID $SMTP_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
# A real SMTP server (aiosmtpd from PyPI) receiving into a Maildir the suite reads the links and codes from; ./test
# installs it into the repository's .venv.
[ -x "$ROOT/.venv/bin/python3" ] && PATH="$ROOT/.venv/bin:$PATH"
python3 -c 'import aiosmtpd' 2>/dev/null || { echo "aiosmtpd is missing: run ./test (it installs tests/requirements.txt into .venv)" >&2; exit 1; }
SMTP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m aiosmtpd -n -l "127.0.0.1:$SMTP_PORT" -c aiosmtpd.handlers.Mailbox "$WORK/mail" &
SMTP_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$SMTP_PORT") 2>/dev/null && break; sleep 0.1; done
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nmail_per_address = 0\nmail_per_email = 0\n[email]\nsmtp_url = "smtp://127.0.0.1:%s"\n[two_factor]\ncodes_by_mail = true\n[magic_link]\nenabled = true\n[email_otp]\nenabled = true\n[organizations]\nteams = true\n[username]\nenabled = true\n' \
  "$SMTP_PORT" > "$WORK/config.toml"
export ADMIN_EMAIL=admin@example.com ADMIN_PASSWORD='client suite admin password'
# Starts a server in $1 (its config.toml there, if any) and prints its address.
serve() {
  ( cd "$1" && SERVICE_AUTH_LISTEN=127.0.0.1:0 SERVICE_AUTH_DATA_DIR="$1/data" SERVICE_AUTH_LOG=warn \
    SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL="$ADMIN_EMAIL" SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
    exec "$BIN" > "$1/out" 2> "$1/err" ) &
}
serve "$WORK"
PID=$!
# A second server as it comes without a mail transport (only the per-address limits off): the organization
# calls must work on it as on better-auth without sendInvitationEmail.
mkdir -p "$WORK/bare"
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/bare/config.toml"
serve "$WORK/bare"
BARE_PID=$!
address() {
  for _ in $(seq 100); do grep -q 'listening on' "$1/out" 2>/dev/null && break; sleep 0.1; done
  sed -n 's/^listening on //p' "$1/out"
}
ADDR=$(address "$WORK")
[ -n "$ADDR" ] || { cat "$WORK/err"; exit 1; }
BARE_ADDR=$(address "$WORK/bare")
[ -n "$BARE_ADDR" ] || { cat "$WORK/bare/err"; exit 1; }
SERVICE_AUTH_URL="http://$ADDR" SERVICE_AUTH_URL_WITHOUT_MAIL="http://$BARE_ADDR" MAILDIR="$WORK/mail" node --test
