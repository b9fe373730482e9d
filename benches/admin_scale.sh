#!/usr/bin/env bash
# Administration at scale: 1,000,000 users and 1,000,000 sessions (plus 20 accounts with 1,000 sessions each),
# the admin lists and searches under wrk, and bans of busy accounts timed one by one.
#
#   benches/admin_scale.sh                 # USERS=1000000 DURATION=10 CONNS=4
#
# Prints one line per scenario: requests/s, p50, p99 (wrk's latency distribution), then the bans' times.
# Needs wrk (installed from Debian's packages when missing). Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
USERS="${USERS:-1000000}"
DURATION="${DURATION:-10}"
CONNS="${CONNS:-4}"
BUSY=20
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet --bin service-auth
BIN=target/release/service-auth
WORK=$(mktemp -d)
PID=
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT

printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/c.toml"
export SERVICE_AUTH_DATA_DIR="$WORK/d" SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3921
$BIN --config "$WORK/c.toml" seed --users "$USERS" --sessions "$USERS" --orgs 100 --busy-users $BUSY

started=$(date +%s.%N)
$BIN --config "$WORK/c.toml" > "$WORK/out" 2> "$WORK/err" &
PID=$!
until grep -q 'listening on' "$WORK/out" 2>/dev/null; do sleep 0.05; done
ready=$(date +%s.%N)
B=http://127.0.0.1:3921
ADMIN=$(curl -s -D - -o /dev/null $B/api/auth/sign-in/email -H 'content-type: application/json' \
  -d '{"email":"admin@seed.example","password":"seed-password-1"}' | sed -n 's/.*session_token=\([^;]*\);.*/\1/p')
[ -n "$ADMIN" ] || { echo "admin sign-in failed" >&2; cat "$WORK/err" >&2; exit 1; }
printf 'ready after %.2f s; resident %s MB\n' "$(echo "$ready - $started" | bc)" \
  "$(( $(awk '/VmRSS/ {print $2}' /proc/$PID/status) / 1024 ))"

printf '%-72s %10s %9s %9s\n' scenario req/s p50 p99
run() { # label, path
  local out
  out=$(wrk -t 2 -c "$CONNS" -d "${DURATION}s" --latency -H "Cookie: service-auth.session_token=$ADMIN" "$B$2")
  if ! grep -q 'Non-2xx' <<<"$out"; then :; else echo "$1: non-2xx answers" >&2; grep Non-2xx <<<"$out" >&2; fi
  printf '%-72s %10s %9s %9s\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")"
}
run "GET /api/admin/users?limit=100 (first page)" "/api/admin/users?limit=100"
CURSOR=$(curl -s -b "service-auth.session_token=$ADMIN" "$B/api/admin/users?limit=1000" | sed -n 's/.*"next_cursor":"\([^"]*\)".*/\1/p')
run "GET /api/admin/users?limit=100&cursor= (a later page)" "/api/admin/users?limit=100&cursor=$CURSOR"
run "GET /api/admin/users?limit=100&q=user12345&match=prefix (the index)" "/api/admin/users?limit=100&q=user12345&match=prefix"
run "GET /api/admin/users?limit=100&q=user12345 (contains: a pass)" "/api/admin/users?limit=100&q=user12345"
run "list-users?limit=100 (with total)" "/api/auth/admin/list-users?limit=100"
run "list-users e-mail starts_with user12345 (with total)" \
  "/api/auth/admin/list-users?searchValue=user12345&searchField=email&searchOperator=starts_with&limit=100"
run "list-users e-mail contains user12345 (with total: a pass)" \
  "/api/auth/admin/list-users?searchValue=user12345&searchField=email&limit=100"

# A search wrk gave up on still runs to its end on a blocking thread (up to half a second at this size): let those
# finish, or the first ban would be timed against them.
sleep 2
# Bans of accounts with 1,000 sessions each, among all the others: one at a time, each durable before its answer.
times=()
for i in $(seq 1 $BUSY); do
  id=$(curl -s -b "service-auth.session_token=$ADMIN" \
    "$B/api/auth/admin/list-users?searchValue=user$i@seed.example&searchOperator=starts_with" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -1)
  t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -X PATCH "$B/api/admin/users" \
    -b "service-auth.session_token=$ADMIN" -H 'content-type: application/json' -d "{\"userId\":\"$id\",\"banned\":true}")
  [ "${t%% *}" = 200 ] || { echo "ban of user$i answered ${t%% *}" >&2; exit 1; }
  times+=("${t#* }")
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n=$BUSY '{ t[NR] = $1 * 1000 } END {
  printf "ban of an account with 1,000 sessions (%d bans): median %.1f ms, 19th %.1f ms, max %.1f ms\n",
    n, t[int((n + 1) / 2)], t[n - 1], t[n] }'
printf 'in the order made (ms):'; printf ' %.1f' $(printf '%s\n' "${times[@]}" | awk '{ print $1 * 1000 }'); echo
