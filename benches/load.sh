#!/usr/bin/env bash
# Load harness: the release server and a bare hyper server, side by side, over loopback, in one run.
#
#   benches/load.sh            # 10 s per scenario
#   DURATION=5 benches/load.sh
#
# Prints one line per scenario and connection count: requests/s, p50, p99, and the ratio to the bare server.
# Needs wrk (installed from Debian's packages when missing). Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet --bin service-auth --example bare_hyper
BIN=target/release/service-auth
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# Rate limits off: every request comes from 127.0.0.1.
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
SERVICE_AUTH_DATA_DIR="$WORK/d" $BIN --config "$WORK/c.toml" seed --users 10000 --sessions 10000 --orgs 10 \
  --tokens-out "$WORK/tokens.txt" >/dev/null 2>&1

start() { # name, port, command...
  local port=$2; shift 2
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then echo "port $port is already in use" >&2; exit 1; fi
  "$@" > "$WORK/$port.out" 2> "$WORK/$port.err" &
  PIDS+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.05; done
}
SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3911 SERVICE_AUTH_DATA_DIR="$WORK/d" \
  start auth 3911 $BIN --config "$WORK/c.toml"
TOKEN=$(head -1 "$WORK/tokens.txt")
SIZE=$(curl -s -b "service-auth.session_token=$TOKEN" http://127.0.0.1:3911/api/auth/get-session | wc -c)
# A seeded token must open a session; if not, something else answers on the port and the figures would lie.
[ "$SIZE" -gt 100 ] || { echo "the seeded token opens no session: is another server on 127.0.0.1:3911?" >&2; exit 1; }
start bare 3912 target/release/examples/bare_hyper 127.0.0.1:3912 "$SIZE"
ADMIN=$(curl -s -D - -o /dev/null http://127.0.0.1:3911/api/auth/sign-in/email -H 'content-type: application/json' \
  -d '{"email":"admin@seed.example","password":"seed-password-1"}' | sed -n 's/.*session_token=\([^;]*\);.*/\1/p')

cat > "$WORK/sign-in.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"email":"user%d@seed.example","password":"seed-password-1"}', 1 + (n * 7919) % 9999)
  return wrk.format("POST", "/api/auth/sign-in/email", {["Content-Type"] = "application/json"}, body)
end
LUA
cat > "$WORK/sign-up.lua" <<'LUA'
-- Unique e-mails across wrk's threads and runs: a thread number from setup, the clock, a counter.
local threads = 0
function setup(thread) thread:set("tid", threads); threads = threads + 1 end
function init(args) tag = tostring(tid) .. "-" .. tostring(os.time()) end
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"name":"Load","email":"load-%s-%d@example.com","password":"load-password-1"}', tag, n)
  return wrk.format("POST", "/api/auth/sign-up/email", {["Content-Type"] = "application/json"}, body)
end
LUA

# run <label> <connections> <url> [wrk args...] -> "rps p50 p99"
run() {
  local c=$2 url=$3; shift 3
  wrk -t2 -c"$c" -d"${DURATION}s" --latency "$@" "$url" > "$WORK/wrk.txt" 2>&1 || true
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.txt")
  echo "$rps $p50 $p99 ${non2xx:-0}"
}
report() { # label connections "rps p50 p99" [bare rps]
  read -r rps p50 p99 non2xx <<<"$3"
  local ratio="-"
  [ -n "${4:-}" ] && ratio=$(awk -v a="$rps" -v b="$4" 'BEGIN {printf "%.0f%%", 100*a/b}')
  printf '%-40s %3s conns %10s req/s  p50 %8s  p99 %8s  vs bare %5s  non-2xx %s\n' \
    "$1" "$2" "$rps" "$p50" "$p99" "$ratio" "$non2xx"
}

G=http://127.0.0.1:3911/api/auth/get-session
for c in 16 64; do
  bare=$(run bare "$c" http://127.0.0.1:3912/)
  report "bare hyper (same body size: $SIZE B)" "$c" "$bare"
  bare_rps=${bare%% *}
  report "get-session, valid cookie" "$c" "$(run gs "$c" "$G" -H "Cookie: service-auth.session_token=$TOKEN")" "$bare_rps"
  report "get-session, no cookie" "$c" "$(run gs0 "$c" "$G")" "$bare_rps"
  report "sign-in (argon2id verify each)" "$c" "$(run si "$c" http://127.0.0.1:3911 -s "$WORK/sign-in.lua")"
  report "sign-up (argon2id hash each)" "$c" "$(run su "$c" http://127.0.0.1:3911 -s "$WORK/sign-up.lua")"
  report "GET /api/admin/users (10,000+ users)" "$c" \
    "$(run au "$c" http://127.0.0.1:3911/api/admin/users -H "Cookie: service-auth.session_token=$ADMIN")"
done
# get-session latency while sign-ins saturate the hashing pool.
wrk -t1 -c32 -d"$((DURATION + 2))s" -s "$WORK/sign-in.lua" http://127.0.0.1:3911 > /dev/null 2>&1 &
FLOOD=$!
sleep 1
report "get-session during a sign-in flood" 16 "$(run mix 16 "$G" -H "Cookie: service-auth.session_token=$TOKEN")"
wait "$FLOOD"

# With SERVICE_AUTH_METRICS_LISTEN set (e.g. 127.0.0.1:9913), what a Prometheus scrape shows after the run: every
# sample but the histogram buckets and the zeros.
if [ -n "${SERVICE_AUTH_METRICS_LISTEN:-}" ]; then
  echo
  echo "Prometheus scrape after the run (http://$SERVICE_AUTH_METRICS_LISTEN/metrics; buckets and zeros left out):"
  curl -s "http://$SERVICE_AUTH_METRICS_LISTEN/metrics" | grep -v -e '^#' -e '_bucket{' | awk 'NF && $NF != 0'
fi
