#!/usr/bin/env bash
# Compares server builds on the hot path, in one run: get-session with a valid cookie (16 and 64 connections)
# against each binary in turn, ROUNDS times, alternating so that the machine's noise hits all of them alike, and a
# bare hyper server answering the same body size as the yardstick. Prints every round, then the medians.
#
#   benches/compare.sh before=/path/to/old/service-auth after=target/release/service-auth
#   ROUNDS=5 DURATION=10 benches/compare.sh a=... b=...
#   PORT=4920 benches/compare.sh a=... b=...     # bare hyper on PORT, the builds on the ports after it
#   BARE=0 benches/compare.sh a=... b=...        # the builds against each other only (no release build of the
#                                                # bare hyper example: for builds made with other profiles)
#
# Two yardsticks: `bare` (multi-threaded tokio, as in every earlier figure) and `bare-loops` (one single-threaded
# runtime per core, the layout service-auth serves with), both on the same hyper; ratios are given to each.
#
# Build an older commit with: git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release).
# Only 127.0.0.1 is ever contacted. Needs wrk (installed from Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-8}"
PORT="${PORT:-3920}"
[ "$#" -ge 1 ] || { echo "usage: $0 NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
BARE="${BARE:-1}"
[ "$BARE" = 0 ] || cargo build --release --quiet --example bare_hyper
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

NAMES=() BINS=()
for arg in "$@"; do NAMES+=("${arg%%=*}"); BINS+=("${arg#*=}"); done

# One seeded store (written by the first binary), copied for each server: same users, sessions and tokens. The
# binaries run in $WORK, so no config.toml of this checkout (whose keys an older build may not know) is read.
SERVICE_AUTH_DATA_DIR="$WORK/seed" env -C "$WORK" "$(realpath "${BINS[0]}")" seed --users 10000 --sessions 10000 --orgs 10 \
  --tokens-out "$WORK/tokens.txt" >/dev/null 2>&1 </dev/null
TOKEN=$(head -1 "$WORK/tokens.txt")

wait_port() { until curl -s -o /dev/null "http://127.0.0.1:$1/"; do sleep 0.05; done; }
for i in "${!BINS[@]}"; do
  port=$((PORT + 1 + i))
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then echo "port $port is already in use" >&2; exit 1; fi
  cp -r "$WORK/seed" "$WORK/data-$i"
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$port" SERVICE_AUTH_DATA_DIR="$WORK/data-$i" \
    env -C "$WORK" "$(realpath "${BINS[$i]}")" serve > "$WORK/$i.out" 2> "$WORK/$i.err" </dev/null &
  PIDS+=($!)
  wait_port "$port"
  size=$(curl -s -b "service-auth.session_token=$TOKEN" "http://127.0.0.1:$port/api/auth/get-session" | wc -c)
  [ "$size" -gt 100 ] || { echo "${NAMES[$i]}: the seeded token opens no session" >&2; exit 1; }
done
LOOPS_PORT=$((PORT + 1 + ${#BINS[@]}))
if [ "$BARE" != 0 ]; then
  target/release/examples/bare_hyper "127.0.0.1:$PORT" "$size" > /dev/null 2>&1 &
  PIDS+=($!)
  target/release/examples/bare_hyper "127.0.0.1:$LOOPS_PORT" "$size" loops > /dev/null 2>&1 &
  PIDS+=($!)
  wait_port "$PORT"
  wait_port "$LOOPS_PORT"
fi

# rps and p99 of one wrk run (p99 always in ms, so that medians sort right)
measure() { # connections url [wrk args]
  local c=$1 url=$2; shift 2
  wrk -t2 -c"$c" -d"${DURATION}s" --latency "$@" "$url" > "$WORK/wrk.txt" 2>&1 || true
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {v = $2; m = 1; if (v ~ /us$/) m = 0.001; else if (v ~ /ms$/) m = 1; else if (v ~ /s$/) m = 1000; sub(/[um]?s$/, "", v); printf "%.2fms", v * m}' "$WORK/wrk.txt")"
}

: > "$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for c in 16 64; do
    if [ "$BARE" != 0 ]; then
      read -r rps p99 <<<"$(measure "$c" "http://127.0.0.1:$PORT/")"
      echo "round $round  $c conns  bare          $rps req/s  p99 $p99"
      echo "bare $c $rps $p99" >> "$WORK/results"
      read -r rps p99 <<<"$(measure "$c" "http://127.0.0.1:$LOOPS_PORT/")"
      echo "round $round  $c conns  bare-loops    $rps req/s  p99 $p99"
      echo "bare-loops $c $rps $p99" >> "$WORK/results"
    fi
    for i in "${!BINS[@]}"; do
      read -r rps p99 <<<"$(measure "$c" "http://127.0.0.1:$((PORT + 1 + i))/api/auth/get-session" \
        -H "Cookie: service-auth.session_token=$TOKEN")"
      printf 'round %s  %s conns  %-12s  %s req/s  p99 %s\n' "$round" "$c" "${NAMES[$i]}" "$rps" "$p99"
      echo "${NAMES[$i]} $c $rps $p99" >> "$WORK/results"
    done
  done
done

echo
echo "medians over $ROUNDS rounds of ${DURATION}s (get-session, valid cookie; ratios to each bare server's median):"
median() { awk -v n="$1" -v c="$2" -v f="$3" '$1==n && $2==c {print $f}' "$WORK/results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f%%", 100*a/b}'; }
if [ "$BARE" = 0 ]; then
  for c in 16 64; do
    for name in "${NAMES[@]}"; do
      printf '  %-12s %3s conns  %10s req/s  p99 %s\n' "$name" "$c" "$(median "$name" "$c" 3)" "$(median "$name" "$c" 4)"
    done
  done
  exit 0
fi
for c in 16 64; do
  bare=$(median bare "$c" 3)
  loops=$(median bare-loops "$c" 3)
  for name in bare bare-loops "${NAMES[@]}"; do
    rps=$(median "$name" "$c" 3)
    printf '  %-12s %3s conns  %10s req/s  (%s of bare, %s of bare-loops)  p99 %s\n' "$name" "$c" "$rps" \
      "$(ratio "$rps" "$bare")" "$(ratio "$rps" "$loops")" "$(median "$name" "$c" 4)"
  done
done
