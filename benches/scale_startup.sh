#!/usr/bin/env bash
# Start-up and memory at scale: seeds USERS users, SESSIONS sessions and ORGS organizations (timed), then starts
# the release server RUNS times on that data directory and prints, per start, the time from exec to its
# `listening on` line, to the first answered get-session, the CPU time it took by then (user + system, all threads:
# what a start costs whatever else the machine is doing), and the resident memory (VmRSS after that answer, VmHWM:
# the peak while loading), then the medians.
#
#   benches/scale_startup.sh                      # USERS=1000000 SESSIONS=$USERS ORGS=100 RUNS=3
#   USERS=1000000 SESSIONS=0 benches/scale_startup.sh     # users only: with the run above, bytes per session
#   KEEP=/tmp/scale benches/scale_startup.sh      # seeds into /tmp/scale once and reuses it on later runs
#   BIN=/path/to/service-auth benches/scale_startup.sh    # another build (no cargo build)
#
# Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
USERS="${USERS:-1000000}"
SESSIONS="${SESSIONS:-$USERS}"
ORGS="${ORGS:-100}"
RUNS="${RUNS:-3}"
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin service-auth
  BIN=target/release/service-auth
fi
WORK=$(mktemp -d)
PID=
trap 'if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi; rm -rf "$WORK"' EXIT

DATA="${KEEP:-$WORK/d}"
export SERVICE_AUTH_DATA_DIR="$DATA" SERVICE_AUTH_LOG=info SERVICE_AUTH_LISTEN=127.0.0.1:3923
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/c.toml"
if [ -s "$DATA.tokens" ]; then
  echo "reusing $DATA ($(du -sh "$DATA" | cut -f1))"
else
  t0=$(date +%s.%N)
  $BIN --config "$WORK/c.toml" seed --users "$USERS" --sessions "$SESSIONS" --orgs "$ORGS" --force \
    --tokens-out "$DATA.tokens" 2>&1 | tail -1
  printf 'seed: %.2f s, store file %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$(du -sh "$DATA" | cut -f1)"
  # An empty tokens file (SESSIONS=0) still marks the directory as seeded.
  [ -s "$DATA.tokens" ] || echo none > "$DATA.tokens"
fi
TOKEN=$(head -1 "$DATA.tokens")

kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$PID/status"; }
TICK=$(getconf CLK_TCK)
ready=() answered=() cpu=() rss=() hwm=()
for run in $(seq 1 "$RUNS"); do
  sync
  rm -f "$WORK/out"
  started=$(date +%s.%N)
  $BIN --config "$WORK/c.toml" > "$WORK/out" 2> "$WORK/err" &
  PID=$!
  until grep -q 'listening on' "$WORK/out" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
    sleep 0.01
  done
  listening=$(date +%s.%N)
  status=$(curl -s -o "$WORK/body" -w '%{http_code}' -b "service-auth.session_token=$TOKEN" \
    http://127.0.0.1:3923/api/auth/get-session)
  first=$(date +%s.%N)
  [ "$status" = 200 ] || { echo "get-session answered $status" >&2; exit 1; }
  if [ "$SESSIONS" -gt 0 ] && ! grep -q '"session"' "$WORK/body"; then echo "seeded token not found" >&2; exit 1; fi
  ready+=("$(echo "$listening - $started" | bc)")
  answered+=("$(echo "$first - $started" | bc)")
  rss+=("$(kb VmRSS)") hwm+=("$(kb VmHWM)")
  # The command name is one word (no spaces), so fields 14 and 15 are utime and stime.
  cpu+=("$(awk -v t="$TICK" '{ print ($14 + $15) / t }' "/proc/$PID/stat")")
  printf 'run %d: listening after %.2f s, first get-session answered after %.2f s, CPU %.2f s, VmRSS %d MB, VmHWM %d MB\n' \
    "$run" "${ready[-1]}" "${answered[-1]}" "${cpu[-1]}" "$((rss[-1] / 1024))" "$((hwm[-1] / 1024))"
  grep -o 'state loaded.*' "$WORK/err" | sed 's/^/  /' || true
  kill -TERM "$PID"
  wait "$PID" || true
  PID=
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf 'median of %d: listening after %.2f s, answered after %.2f s, CPU %.2f s, VmRSS %.1f MB, VmHWM %.1f MB (%d users, %d sessions)\n' \
  "$RUNS" "$(median "${ready[@]}")" "$(median "${answered[@]}")" "$(median "${cpu[@]}")" "$(echo "$(median "${rss[@]}") / 1024" | bc -l)" \
  "$(echo "$(median "${hwm[@]}") / 1024" | bc -l)" "$USERS" "$SESSIONS"
