#!/usr/bin/env bash
# Relying parties of service-auth's identity provider (issue #46) against servers on fresh data directories:
# openid-client (OpenID Certified) through every flow and refusal (openid-client.test.mjs), back-channel logout as
# a relying party receives it (backchannel.test.mjs), and openid-client across two nodes
# sharing a PostgreSQL database (cluster.test.mjs: a real PostgreSQL in a temporary directory on a loopback port,
# as the `postgres` user when run as root, since initdb refuses root); @better-auth/oauth-provider's client plugin
# with better-auth's createAuthClient (oauth-provider-client.test.mjs); a page on another origin in headless
# Chromium (app.test.mjs, app/; CHROMIUM=/path overrides /usr/bin/chromium). Each test file starts its own servers
# (service.mjs). Extra arguments go to node --test (a file, say).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
[ -d node_modules/openid-client ] || npm ci --no-audit --no-fund
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
PGPORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA" start >/dev/null

SERVICE_AUTH_BIN="$BIN" PG_URL="postgres://postgres@127.0.0.1:$PGPORT/postgres" node --test "$@"
