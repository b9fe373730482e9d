#!/usr/bin/env bash
# Two nodes on one PostgreSQL (docs/cluster.md), measured: get-session per node against the embedded store on the
# same machine, sign-in across both nodes, the cross-node revocation delay (a ban acknowledged on node A, then
# checked on node B), and writes across both nodes (sign-ups and administrator writes) with that revocation delay
# measured again while they run. Starts Debian's PostgreSQL in a temporary directory and the release binary three times
# (two nodes, and one embedded node for comparison); only 127.0.0.1 is contacted. Needs wrk (installed from
# Debian's packages when missing).
#
#   benches/cluster.sh                      # ROUNDS=3 DURATION=8 ROUNDS_REVOKE=200 by default
#   WRITE_SECS=20 SIGN_UP_CLIENTS=4 ADMIN_CLIENTS=8 benches/cluster.sh   # the write load's defaults
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-8}"
ROUNDS_REVOKE="${ROUNDS_REVOKE:-200}"
WRITE_SECS="${WRITE_SECS:-20}"
SIGN_UP_CLIENTS="${SIGN_UP_CLIENTS:-4}"
ADMIN_CLIENTS="${ADMIN_CLIENTS:-8}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet --bin service-auth --example cluster_bench
BIN="$PWD/target/release/service-auth"
BENCH="$PWD/target/release/examples/cluster_bench"

WORK=$(mktemp -d)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
AS=()
if [ "$(id -u)" = 0 ]; then chown postgres "$WORK"; AS=(runuser -u postgres --); fi
mkdir -p "$WORK/pg"; [ "${#AS[@]}" = 0 ] || chown postgres "$WORK/pg"
PIDS=()
cleanup() {
  kill "${PIDS[@]}" 2>/dev/null || true
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$WORK/pg" -A trust -U postgres >/dev/null
PGPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/log" -w -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $WORK/pg" start >/dev/null
URL="postgres://postgres@127.0.0.1:$PGPORT/postgres"

ADMIN=admin@example.com ADMIN_PW='bench admin password'
start() { # name port backend [url]
  mkdir -p "$WORK/$1"
  # Every request comes from 127.0.0.1: the per-address limits would measure themselves.
  printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/$1/config.toml"
  env -C "$WORK/$1" SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$2" SERVICE_AUTH_DATA_DIR="$WORK/$1/data" \
    SERVICE_AUTH_STORE_BACKEND="$3" ${4:+SERVICE_AUTH_STORE_URL="$4"} \
    SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL="$ADMIN" SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD="$ADMIN_PW" \
    "$BIN" serve > "$WORK/$1/out" 2> "$WORK/$1/err" </dev/null &
  PIDS+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$2/readyz"; do sleep 0.05; done
}
start a 3931 postgres "$URL"
start b 3932 postgres "$URL"
start e 3933 embedded

token() { # port
  curl -s -D - -o /dev/null "http://127.0.0.1:$1/api/auth/sign-up/email" -H 'Content-Type: application/json' \
    -d "{\"name\":\"Bench\",\"email\":\"bench-$1@example.com\",\"password\":\"bench password 1234\"}" |
    sed -n 's/^set-cookie: service-auth.session_token=\([^;]*\);.*/\1/Ip' | head -1
}
TOKEN_PG=$(token 3931)
TOKEN_E=$(token 3933)
sleep 0.5
rate() { # port token
  wrk -t2 -c64 -d"${DURATION}s" -H "Cookie: service-auth.session_token=$2" "http://127.0.0.1:$1/api/auth/get-session" |
    awk '/Requests\/sec/ {print int($2)}'
}
echo "get-session, valid cookie, 64 connections, req/s (wrk -t2 -c64 -d${DURATION}s), $ROUNDS rounds:"
for r in $(seq "$ROUNDS"); do
  echo "  round $r: node A (postgres) $(rate 3931 "$TOKEN_PG"), node B (postgres) $(rate 3932 "$TOKEN_PG"), embedded $(rate 3933 "$TOKEN_E")"
done
"$BENCH" sign-in http://127.0.0.1:3931 http://127.0.0.1:3932 50 400 16
echo "(the same against the embedded node alone, for comparison)"
"$BENCH" sign-in http://127.0.0.1:3933 http://127.0.0.1:3933 50 400 16
"$BENCH" revocation http://127.0.0.1:3931 http://127.0.0.1:3932 "$ADMIN" "$ADMIN_PW" "$ROUNDS_REVOKE"
# Sign-ups and administrator writes over both nodes for WRITE_SECS, with ROUNDS_REVOKE bans timed under them (issue #33).
"$BENCH" writes http://127.0.0.1:3931 http://127.0.0.1:3932 "$ADMIN" "$ADMIN_PW" \
  "$WRITE_SECS" "$SIGN_UP_CLIENTS" "$ADMIN_CLIENTS" "$ROUNDS_REVOKE"
