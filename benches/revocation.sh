#!/usr/bin/env bash
# Revocation against better-auth (benches/revocation.mjs says what is measured): builds the release binary, starts
# Debian's PostgreSQL in a temporary directory for the two-node setup, and runs the script with the better-auth
# server of the migration suite (tests/migration's node_modules, installed when missing). Needs wrk.
#
#   benches/revocation.sh                 # ROUNDS=5 DURATION=8 CAP_SECS=330
#   CAP_SECS=20 benches/revocation.sh     # quicker: the cookie cache's wait is cut at 20 s (shown as "> 20 s")
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
[ -d tests/migration/node_modules/better-auth ] || (cd tests/migration && npm_config_nodedir=/usr npm ci --no-audit --no-fund)
cargo build --release --quiet --bin service-auth

PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PGDATA=$(mktemp -d)
AS=()
if [ "$(id -u)" = 0 ]; then chown postgres "$PGDATA"; AS=(runuser -u postgres --); fi
stop_pg() { "${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$PGDATA"; }
trap stop_pg EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$PGDATA" -A trust -U postgres >/dev/null
PGPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA" start >/dev/null

SERVICE_AUTH_BIN="$PWD/target/release/service-auth" PG_URL="postgres://postgres@127.0.0.1:$PGPORT/postgres" \
  node benches/revocation.mjs
