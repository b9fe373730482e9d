#!/usr/bin/env bash
# Moving from better-auth, end to end: builds the release binary, starts a real PostgreSQL in a temporary
# directory on a loopback port (as the `postgres` user when run as root: initdb refuses root), and runs the suite,
# which drives a real better-auth server on SQLite and on that PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
# better-sqlite3 is built from source (its prebuilt download is not reachable everywhere) against the installed
# Node's headers.
[ -d node_modules/better-auth ] || npm_config_nodedir=/usr npm ci --no-audit --no-fund
BIN=$("$ROOT/tests/binary.sh")

PGBIN=$(../pg_bindir.sh)
PGDATA=$(mktemp -d)
AS=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$PGDATA"
  AS=(runuser -u postgres --)
fi
stop_pg() { "${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$PGDATA"; }
trap stop_pg EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$PGDATA" -A trust -U postgres >/dev/null
PGPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA" start >/dev/null

SERVICE_AUTH_BIN="$BIN" PG_URL="postgres://postgres@127.0.0.1:$PGPORT/postgres" \
  node --test
