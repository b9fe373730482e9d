#!/usr/bin/env bash
# Durable writes against their anchor, in one run: update-user alone and a mix of get-session with WRITES of the
# requests an update-user, each against service-auth and against examples/group_commit.rs (the anchor: a bare
# hyper server, bare_hyper.rs's settings, that makes each write durable with one fdatasync shared by every write
# waiting and looks nothing up; its reads are bare_hyper's answer of the same size).
#
#   benches/durable_writes.sh                          # release builds of both (cargo build --release), then the run
#   BIN=/path/to/service-auth ANCHOR=/path/to/group_commit benches/durable_writes.sh   # builds already made
#   ROUNDS=5 DURATION=10 CONNS=64 SESSIONS=1000000 WRITES=0.1 ANCHOR_MODE=loops benches/durable_writes.sh
#
# Both servers run at once, on the same disk (the anchor's file sits beside the store), and are driven by the same
# wrk script: each request carries a random one of SESSIONS seeded sessions; with WRITES=1 every request is an
# update-user (a new name), else that fraction of them. ROUNDS rounds, the order of the two servers alternating
# from one round to the next, so that a change of load on this shared machine falls on both. Per round: requests/s,
# p50, p99, and the syncs: for service-auth the commits/s and mean commit time (redb's commit with its fsync)
# from its metrics listener, for the anchor the same from its `GET /syncs`, the writes each sync made durable, and
# the KB each process sent to the disk a sync (/proc/PID/io's write_bytes: what the sync had to flush). Then one
# Markdown table of the medians and the median of the rounds' ratios (ours / anchor), which BENCHMARKS.md quotes.
# ANCHOR_MODE=loops (default) serves the anchor the way service-auth serves, one event loop per core; "threads"
# serves it on tokio's multi-threaded runtime, bare_hyper's default. Needs wrk (installed from Debian's packages
# when missing). Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-5}"
CONNS="${CONNS:-64}"
SESSIONS="${SESSIONS:-1000000}"
WRITES="${WRITES:-0.1}"
ANCHOR_MODE="${ANCHOR_MODE:-loops}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin service-auth --example group_commit
  BIN=target/release/service-auth
fi
BIN=$(realpath "$BIN")
ANCHOR=$(realpath "${ANCHOR:-$(dirname "$BIN")/examples/group_commit}")
# Beside the repository (the disk the store would be on), not in a tmpfs.
WORK=$(mktemp -d -p "${WORK_DIR:-$PWD/target}" durable.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
. benches/lib.sh

printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
printf '[limits]\nmax_connections_per_address = 4000\n' >> "$WORK/c.toml"
SERVICE_AUTH_DATA_DIR="$WORK/d" "$BIN" --config "$WORK/c.toml" seed --users "$SESSIONS" --sessions "$SESSIONS" \
  --orgs 10 --tokens-out "$WORK/tokens.txt" > "$WORK/seed.log" 2>&1 </dev/null || { cat "$WORK/seed.log" >&2; exit 1; }

SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3941 SERVICE_AUTH_DATA_DIR="$WORK/d" \
  SERVICE_AUTH_METRICS_LISTEN=127.0.0.1:9941 start 3941 "$BIN" --config "$WORK/c.toml"
SIZE=$(curl -s -b "service-auth.session_token=$(head -1 "$WORK/tokens.txt")" \
  http://127.0.0.1:3941/api/auth/get-session | wc -c)
[ "$SIZE" -gt 100 ] || { echo "the seeded token opens no session: is another server on 127.0.0.1:3941?" >&2; exit 1; }
mode=()
[ "$ANCHOR_MODE" = loops ] && mode=(loops)
start 3942 "$ANCHOR" 127.0.0.1:3942 "$WORK/anchor.log" "$SIZE" "${mode[@]}"

# Each request a random one of the tokens, kept as one string and cut out per request (a table of a million Lua
# strings stalls wrk itself: load.sh); WRITES of them an update-user.
cat > "$WORK/random.lua" <<'LUA'
local threads = {}
function setup(thread) thread:set("tid", #threads); table.insert(threads, thread) end
function init(args)
  local file = assert(io.open(os.getenv("TOKENS"), "rb"))
  all = file:read("*a")
  file:close()
  width = (all:find("\n", 1, true) or 0)
  count = #all / width
  assert(width > 1 and count == math.floor(count), "the tokens must all have the same length")
  math.randomseed(os.time() * 1000 + tid)
  writes = tonumber(os.getenv("WRITES") or "0")
end
request = function()
  local start = (math.random(count) - 1) * width + 1
  local h = {["Cookie"] = "service-auth.session_token=" .. all:sub(start, start + width - 2)}
  if writes > 0 and math.random() < writes then
    h["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/auth/update-user", h, string.format('{"name":"Durable %d"}', math.random(1000000)))
  end
  return wrk.format("GET", "/api/auth/get-session", h)
end
LUA

# What the syncs did so far: "syncs writes µs". Ours from the metrics (commits, requests in them, seconds).
syncs_ours() {
  curl -s http://127.0.0.1:9941/metrics | awk '/^service_auth_store_commit_batch_requests_count/ {c = $2}
    /^service_auth_store_commit_batch_requests_sum/ {w = $2} /^service_auth_store_commit_duration_seconds_sum/ {s = $2}
    END {printf "%d %d %d\n", c, w, s * 1e6}'
}
syncs_anchor() { curl -s http://127.0.0.1:3942/syncs; }
# Bytes the process has sent to the disk so far (pages it dirtied: the kernel counts a page, not the bytes in it).
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
run() { # server(ours|anchor) writes -> "rps p50_ms p99_ms syncs/s writes_per_sync ms_per_sync kb_per_sync"
  local who=$1 port=3941 pid=${PIDS[0]} before after b0 b1
  [ "$who" = anchor ] && port=3942 pid=${PIDS[1]}
  before=$("syncs_$who")
  b0=$(written "$pid")
  TOKENS="$WORK/tokens.txt" WRITES="$2" wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$WORK/random.lua" \
    "http://127.0.0.1:$port/" > "$WORK/wrk.txt" 2>&1 || true
  after=$("syncs_$who")
  b1=$(written "$pid")
  local rps p50 p99 bad requests
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(ms "$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")")
  p99=$(ms "$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")")
  bad=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.txt")
  [ "${bad:-0}" = 0 ] || { echo "$who answered $bad non-2xx:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  # The writes a sync made durable: the anchor counts them; ours counts store requests, and its users actor
  # gathers every update-user waiting into one, so they are the script's writes (requests x WRITES) instead.
  echo "${rps:-0} $p50 $p99 $(awk -v a="$before" -v b="$after" -v d="$DURATION" -v who="$who" \
    -v writes="$(awk -v n="${requests:-0}" -v w="$2" 'BEGIN {print n * w}')" -v kb="$(((b1 - b0) / 1024))" 'BEGIN {split(a, x, " ");
    split(b, y, " "); n = y[1] - x[1]; if (who == "anchor") writes = y[2] - x[2];
    printf "%d %.1f %.3f %.0f", n / d, n ? writes / n : 0, n ? (y[3] - x[3]) / n / 1000 : 0, n ? kb / n : 0}')"
}

echo "# benches/durable_writes.sh, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
echo "# ours: $BIN; anchor: $ANCHOR ($ANCHOR_MODE); $SESSIONS sessions; ${DURATION}s x $ROUNDS rounds; $CONNS connections"
start_load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# load average at the start: $start_load"
declare -A rows
for r in $(seq "$ROUNDS"); do
  order=(ours anchor)
  [ $((r % 2)) = 0 ] && order=(anchor ours)
  for scenario in update-user mix; do
    w=1
    [ "$scenario" = mix ] && w=$WRITES
    for who in "${order[@]}"; do
      out=$(run "$who" "$w")
      rows[$scenario.$who.$r]=$out
      echo "round $r, $scenario, $who: req/s p50 p99 syncs/s writes/sync ms/sync KB/sync = $out (load $(load))"
    done
  done
done
end_load=$(cut -d' ' -f1-3 /proc/loadavg)

field() { # scenario who column -> the column's values over the rounds
  for r in $(seq "$ROUNDS"); do echo "${rows[$1.$2.$r]}" | awk -v f="$3" '{print $f}'; done
}
echo
echo "Medians of $ROUNDS rounds (load average at the start $start_load, at the end $end_load):"
echo
echo "| $CONNS connections | ours req/s | anchor req/s | ours / anchor (median of the rounds' ratios; each round) | p99 ours / anchor | writes a sync, ours / anchor | ms a sync (commit, fsync included), ours / anchor | KB written a sync, ours / anchor |"
echo "|---|---|---|---|---|---|---|---|"
for scenario in update-user mix; do
  ratios=()
  for r in $(seq "$ROUNDS"); do
    ratios+=("$(awk -v a="${rows[$scenario.ours.$r]%% *}" -v b="${rows[$scenario.anchor.$r]%% *}" \
      'BEGIN {printf "%.2f", b ? a / b : 0}')")
  done
  label="update-user"
  [ "$scenario" = mix ] && label="get-session, $(awk -v w="$WRITES" 'BEGIN {printf "%g", w * 100}') % update-user"
  echo "| $label | $(median $(field "$scenario" ours 1)) | $(median $(field "$scenario" anchor 1)) |" \
    "**$(median "${ratios[@]}")** (${ratios[*]}) | $(median $(field "$scenario" ours 3)) / $(median $(field "$scenario" anchor 3)) ms |" \
    "$(median $(field "$scenario" ours 5)) / $(median $(field "$scenario" anchor 5)) |" \
    "$(median $(field "$scenario" ours 6)) / $(median $(field "$scenario" anchor 6)) |" \
    "$(median $(field "$scenario" ours 7)) / $(median $(field "$scenario" anchor 7)) |"
done
