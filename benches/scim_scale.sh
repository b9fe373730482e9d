#!/usr/bin/env bash
# SCIM at scale (#48), one server, over loopback: the target is "SCIM list with a filter at 100,000 users in an
# organization p99 <= 20 ms". Measures, at 1 and 16 connections (p50 and p99, wrk):
#   - GET /Users?filter=userName eq "…" (the lookup Okta and Entra ID send before each create), one match;
#   - GET /Users?filter=externalId eq "…", one match;
#   - GET /Users (no filter: the first page of 100).
#
#   benches/scim_scale.sh                  # 3 rounds, 10 s per measurement, 100,000 Users
#   ROUNDS=1 DURATION=5 USERS=10000 benches/scim_scale.sh
#   BIN=/tmp/before benches/scim_scale.sh  # that binary, not built here (two builds compared in the same conditions)
#
# Seeds USERS accounts with `seed --members-in-org USERS --scim` (the organization seed-members: every account a
# member and a User of its SCIM directory, as POST /Users would make it), then makes a SCIM token as the
# administrator. Prints one Markdown table per round; BENCHMARKS.md quotes the medians. Needs wrk (installed from
# Debian's packages when missing). Only 127.0.0.1 is contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
USERS="${USERS:-100000}"
PORT="${PORT:-3923}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin service-auth
  BIN=target/release/service-auth
fi
WORK=$(mktemp -d)
PID=
trap '[ -z "$PID" ] || kill "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT

printf '[rate_limit]\nsign_in_per_address = 0\nfailures_per_account = 1000000\n[limits]\nmax_connections_per_address = 4000\n' \
  > "$WORK/c.toml"
SERVICE_AUTH_DATA_DIR="$WORK/d" $BIN --config "$WORK/c.toml" seed --users "$USERS" --sessions 1 \
  --members-in-org "$USERS" --scim --tokens-out "$WORK/tokens.txt"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then echo "port $PORT is already in use" >&2; exit 1; fi
SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$PORT" SERVICE_AUTH_DATA_DIR="$WORK/d" \
  $BIN --config "$WORK/c.toml" > "$WORK/out" 2> "$WORK/err" &
PID=$!
until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do sleep 0.05; done
B="http://127.0.0.1:$PORT"
# The seed's one session is the administrator's, the owner of seed-members.
ADMIN="Cookie: service-auth.session_token=$(sed -n 1p "$WORK/tokens.txt")"
ORG=$(curl -sf "$B/api/auth/organization/list" -H "$ADMIN" | sed -n 's/.*"id":"\([^"]*\)".*"slug":"seed-members".*/\1/p')
[ -n "$ORG" ] || { echo "no organization seed-members: is another server on $B?" >&2; exit 1; }
TOKEN=$(curl -sf "$B/api/admin/organizations/$ORG/scim-tokens" -H "$ADMIN" -H 'Content-Type: application/json' -d '{}' \
  | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
AUTH="Authorization: Bearer $TOKEN"
MIDDLE=$((USERS / 2))
BY_NAME="$B/api/auth/scim/v2/Users?filter=userName%20eq%20%22user$MIDDLE%40seed.example%22"
BY_EXTERNAL="$B/api/auth/scim/v2/Users?filter=externalId%20eq%20%22seed-$MIDDLE%22"
FIRST="$B/api/auth/scim/v2/Users?count=100"
# Each answer must be what it claims: one match for each filter, the whole directory counted without one.
for url in "$BY_NAME" "$BY_EXTERNAL"; do
  curl -sf "$url" -H "$AUTH" | grep -Eq '"totalResults":1[,}]' || { echo "$url: not one match" >&2; exit 1; }
done
curl -sf "$FIRST" -H "$AUTH" | grep -Eq "\"totalResults\":$USERS[,}]" || { echo "the directory is not $USERS Users" >&2; exit 1; }

# run <connections> <url> -> "rps p50 p99 non2xx"
run() {
  wrk -t"$(( $1 < 2 ? 1 : 2 ))" -c"$1" -d"${DURATION}s" --latency -H "$AUTH" "$2" > "$WORK/wrk.txt" 2>&1 || true
  awk '/Requests\/sec/ {rps=$2} $1=="50%" {p50=$2} $1=="99%" {p99=$2} /Non-2xx/ {bad=$5}
       END {printf "%s %s %s %s\n", rps, p50, p99, bad ? bad : 0}' "$WORK/wrk.txt"
}
row() { # label conns "rps p50 p99 non2xx"
  read -r rps p50 p99 bad <<<"$3"
  local notes=""
  [ "$bad" != 0 ] && notes="non-2xx $bad"
  echo "| $1 | $2 | $rps | $p50 | $p99 | $notes |"
}
for round in $(seq "$ROUNDS"); do
  echo
  echo "Round $round ($USERS Users in one organization)"
  echo
  echo "| scenario | conns | req/s | p50 | p99 | notes |"
  echo "|---|---|---|---|---|---|"
  for c in 1 16; do
    row "SCIM list, filter userName eq (one match)" "$c" "$(run "$c" "$BY_NAME")"
    row "SCIM list, filter externalId eq (one match)" "$c" "$(run "$c" "$BY_EXTERNAL")"
    row "SCIM list, no filter, first 100" "$c" "$(run "$c" "$FIRST")"
  done
done
