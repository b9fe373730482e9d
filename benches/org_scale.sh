#!/usr/bin/env bash
# Organizations at scale (#29), one server, over loopback:
#   - GET /api/auth/organization/list-members at 10,000 members: the first page and the last (offset 9,900), 100
#     members a page, at 1 and 16 connections (p50 and p99);
#   - GET /api/auth/get-session for two members of that organization, one with it as the session's active
#     organization and one without, alternating in the same run, at 64 connections.
#
#   benches/org_scale.sh                 # 3 rounds, 10 s per measurement
#   ROUNDS=1 DURATION=5 benches/org_scale.sh
#   BIN=/tmp/before benches/org_scale.sh # that binary, not built here (two builds compared in the same conditions)
#
# Seeds 20,000 users and sessions with `seed --members-in-org 10000` (the organization seed-members: the
# administrator its owner, user1 … user9999 its members). Prints one Markdown table per round; BENCHMARKS.md quotes
# the medians. Needs wrk (installed from Debian's packages when missing). Only 127.0.0.1 is contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
PORT="${PORT:-3921}"
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
SERVICE_AUTH_DATA_DIR="$WORK/d" $BIN --config "$WORK/c.toml" seed --users 20000 --sessions 20000 \
  --members-in-org 10000 --tokens-out "$WORK/tokens.txt"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then echo "port $PORT is already in use" >&2; exit 1; fi
SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$PORT" SERVICE_AUTH_DATA_DIR="$WORK/d" \
  $BIN --config "$WORK/c.toml" > "$WORK/out" 2> "$WORK/err" &
PID=$!
until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do sleep 0.05; done
B="http://127.0.0.1:$PORT"
# Session i of the seed belongs to account i: line 1 the administrator, lines 3 and 4 user2 and user3 (members).
token() { sed -n "${1}p" "$WORK/tokens.txt"; }
ACTIVE=$(token 3) PLAIN=$(token 4)
cookie() { echo "Cookie: service-auth.session_token=$1"; }
ORG=$(curl -sf "$B/api/auth/organization/list" -H "$(cookie "$ACTIVE")" | sed -n 's/.*"id":"\([^"]*\)".*"slug":"seed-members".*/\1/p')
[ -n "$ORG" ] || { echo "user2 is in no organization seed-members: is another server on $B?" >&2; exit 1; }
curl -sf "$B/api/auth/organization/set-active" -H "$(cookie "$ACTIVE")" -H 'Content-Type: application/json' \
  -d "{\"organizationId\":\"$ORG\"}" > /dev/null
# Both answers must be what they claim: one names the organization, the other none; the pages hold 100 members.
curl -sf "$B/api/auth/get-session" -H "$(cookie "$ACTIVE")" | grep -q "\"activeOrganizationId\":\"$ORG\""
curl -sf "$B/api/auth/get-session" -H "$(cookie "$PLAIN")" | grep -q '"activeOrganizationId":null'
FIRST="$B/api/auth/organization/list-members?organizationId=$ORG&limit=100"
LAST="$FIRST&offset=9900"
for url in "$FIRST" "$LAST"; do
  curl -sf "$url" -H "$(cookie "$PLAIN")" | grep -q '"total":10000' || { echo "list-members is not 10,000 members" >&2; exit 1; }
  [ "$(curl -sf "$url" -H "$(cookie "$PLAIN")" | grep -o '"organizationId"' | wc -l)" = 100 ]
done
echo "list-members page: $(curl -sf "$FIRST" -H "$(cookie "$PLAIN")" | wc -c) bytes"

# run <connections> <url> <cookie token> -> "rps p50 p99 non2xx"
run() {
  wrk -t"$(( $1 < 2 ? 1 : 2 ))" -c"$1" -d"${DURATION}s" --latency -H "$(cookie "$3")" "$2" > "$WORK/wrk.txt" 2>&1 || true
  awk '/Requests\/sec/ {rps=$2} $1=="50%" {p50=$2} $1=="99%" {p99=$2} /Non-2xx/ {bad=$5}
       END {printf "%s %s %s %s\n", rps, p50, p99, bad ? bad : 0}' "$WORK/wrk.txt"
}
row() { # label conns "rps p50 p99 non2xx" [notes]
  read -r rps p50 p99 bad <<<"$3"
  local notes="${4:-}"
  [ "$bad" != 0 ] && notes="${notes:+$notes; }non-2xx $bad"
  echo "| $1 | $2 | $rps | $p50 | $p99 | $notes |"
}
for round in $(seq "$ROUNDS"); do
  echo
  echo "Round $round"
  echo
  echo "| scenario | conns | req/s | p50 | p99 | notes |"
  echo "|---|---|---|---|---|---|"
  for c in 1 16; do
    row "list-members, 10,000 members, first page (100)" "$c" "$(run "$c" "$FIRST" "$PLAIN")"
    row "list-members, 10,000 members, last page (offset 9,900)" "$c" "$(run "$c" "$LAST" "$PLAIN")"
  done
  # Alternating, and which goes first alternates too, so the machine's drift falls on both alike.
  if [ $((round % 2)) = 1 ]; then
    without=$(run 64 "$B/api/auth/get-session" "$PLAIN")
    with=$(run 64 "$B/api/auth/get-session" "$ACTIVE")
  else
    with=$(run 64 "$B/api/auth/get-session" "$ACTIVE")
    without=$(run 64 "$B/api/auth/get-session" "$PLAIN")
  fi
  ratio=$(awk -v a="${with%% *}" -v b="${without%% *}" 'BEGIN {printf "%.0f%%", 100*a/b}')
  row "get-session, no active organization" 64 "$without"
  row "get-session, active organization (10,000 members)" 64 "$with" "$ratio of the one without"
done
