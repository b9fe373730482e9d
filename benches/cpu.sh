#!/usr/bin/env bash
# CPU per request: what each server build spends on one get-session (valid cookie) in user and in system time, and
# how often its threads were preempted, read from /proc over DURATION seconds of wrk at CONNS connections. Builds
# run one at a time, alternating, ROUNDS times, each on a copy of the same seeded store, next to the bare hyper
# server (one loop per core) answering the same body size. Less noisy than requests per second on a shared
# machine: the figures of one build move by about ±0.15 µs between rounds.
#
#   benches/cpu.sh main=target/release/service-auth other=/tmp/other/service-auth
#   TOKENS=many benches/cpu.sh main=...     # each request another of the 10,000 seeded sessions, not the first
#   URL_PATH=/healthz benches/cpu.sh main=... # another path (the bare server answers it the same way)
#   BARE=0 benches/cpu.sh a=... b=...           # without the bare server (no release build of its example: for
#                                               # builds made with other profiles)
#
# Needs wrk (installed from Debian's packages when missing). Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-64}"
PORT="${PORT:-3990}"
URL_PATH="${URL_PATH:-/api/auth/get-session}"
TOKENS="${TOKENS:-one}"
[ "$#" -ge 1 ] || { echo "usage: $0 NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
BARE="${BARE:-1}"
[ "$BARE" = 0 ] || cargo build --release --quiet --example bare_hyper
WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

NAMES=() BINS=()
for arg in "$@"; do NAMES+=("${arg%%=*}"); BINS+=("$(realpath "${arg#*=}")"); done
SERVICE_AUTH_DATA_DIR="$WORK/seed" env -C "$WORK" "${BINS[0]}" seed --users 10000 --sessions 10000 --orgs 10 \
  --tokens-out "$WORK/tokens.txt" >/dev/null 2>&1 </dev/null || { echo "${NAMES[0]} could not seed a store" >&2; exit 1; }
[ "$TOKENS" = many ] || head -1 "$WORK/tokens.txt" > "$WORK/used.txt"
[ "$TOKENS" != many ] || cp "$WORK/tokens.txt" "$WORK/used.txt"
# Every request carries a cookie, the bare server's too, so that the client does the same work for each.
cat > "$WORK/cookies.lua" <<EOF
local tokens, i = {}, 0
for line in io.lines("$WORK/used.txt") do tokens[#tokens + 1] = line end
request = function()
  i = i % #tokens + 1
  return wrk.format("GET", "$URL_PATH", {["Cookie"] = "service-auth.session_token=" .. tokens[i]})
end
EOF

wait_port() { # ten seconds at most: a build that does not start stops the run
  for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && return; sleep 0.05; done
  echo "nothing answers on port $PORT" >&2; exit 1
}
# user and system time of a process, in clock ticks; preemptions of all its threads
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
preempted() { cat /proc/"$1"/task/*/status | awk '/^nonvoluntary_ctxt_switches/ {n += $2} END {print n}'; }
measure() { # name: the server on $PORT is $PID
  wrk -t2 -c"$CONNS" -d1s -s "$WORK/cookies.lua" "http://127.0.0.1:$PORT" >/dev/null 2>&1 # warm-up
  local u1 s1 u2 s2 p1 p2 requests
  read -r u1 s1 < <(ticks "$PID"); p1=$(preempted "$PID")
  wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$WORK/cookies.lua" "http://127.0.0.1:$PORT" > "$WORK/wrk.txt" 2>&1
  read -r u2 s2 < <(ticks "$PID"); p2=$(preempted "$PID")
  requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  awk -v n="$1" -v r="$requests" -v u=$((u2 - u1)) -v s=$((s2 - s1)) -v p=$((p2 - p1)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s %d %.2f %.2f %.0f\n", n, r, u * 1e6 / hz / r, s * 1e6 / hz / r, p * 1000 / r}' | tee -a "$WORK/results"
}

size=
for round in $(seq 1 "$ROUNDS"); do
  for i in "${!BINS[@]}"; do
    rm -rf "$WORK/data"; cp -r "$WORK/seed" "$WORK/data"
    SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$PORT" SERVICE_AUTH_DATA_DIR="$WORK/data" \
      env -C "$WORK" "${BINS[$i]}" serve >/dev/null 2>&1 </dev/null &
    PID=$!
    wait_port
    [ -n "$size" ] || size=$(curl -s -b "service-auth.session_token=$(head -1 "$WORK/tokens.txt")" \
      "http://127.0.0.1:$PORT$URL_PATH" | wc -c)
    measure "${NAMES[$i]}"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
  done
  [ "$BARE" != 0 ] || continue
  target/release/examples/bare_hyper "127.0.0.1:$PORT" "$size" loops >/dev/null 2>&1 &
  PID=$!
  wait_port
  measure bare-loops
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
done

echo
echo "medians over $ROUNDS rounds of ${DURATION}s at $CONNS connections, $URL_PATH ($TOKENS token):"
echo "name  requests  user µs/request  system µs/request  preemptions/1,000 requests"
SHOWN=("${NAMES[@]}")
[ "$BARE" = 0 ] || SHOWN+=(bare-loops)
for name in "${SHOWN[@]}"; do
  for f in 2 3 4 5; do
    awk -v n="$name" -v f="$f" '$1==n {print $f}' "$WORK/results" | sort -n | awk '{a[NR]=$1} END {printf "%s ", a[int((NR+1)/2)]}'
  done | awk -v n="$name" '{printf "  %-12s %9s  %5s  %5s  %5s\n", n, $1, $2, $3, $4}'
done
