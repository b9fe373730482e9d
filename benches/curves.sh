#!/usr/bin/env bash
# Curves: how the cost grows with the work, measured in one run and drawn as SVG charts into docs/bench/.
#
#   benches/curves.sh                 # measure everything (about 6 minutes), write docs/bench/*.csv, draw the charts
#   PARTS="sessions" benches/curves.sh    # only some parts: sessions writes (both by default)
#   SIZES="1000 10000 100000 1000000 10000000" benches/curves.sh   # also ten million (about 6 GB resident: check
#                                     # `free -g` first; the seeding alone takes about 100 s)
#   DURATION=5 ROUNDS=3 CONNS=64 benches/curves.sh
#   BIN=/path/to/service-auth BARE=/path/to/bare_hyper LABEL="main at abc123" benches/curves.sh   # other builds
#                                     # (no cargo build); LABEL names the build in the CSV files
#   python3 benches/plot.py           # redraw the charts from the CSV files alone, no run
#
# Parts:
# - sessions: for each size N in SIZES, seed N users and N sessions, start the release server (one start not
#   measured first: the first start after seeding writes the memberships), then RUNS starts measured (time to the
#   `listening on` line, resident memory after the first answer, peak while loading), then ROUNDS rounds of wrk at
#   CONNS connections, each request a random one of the N sessions, alternating with the bare hyper server
#   (examples/bare_hyper.rs, same hyper, runtime and socket settings, answering the same body size) driven by the
#   same script. Medians into sessions.csv and startup.csv; the largest size's full latency distribution, ours
#   and bare's from the same round, into latency.csv.
# - writes: update-user (each answer waits for its fsync) against the number of connections, ROUNDS rounds each,
#   into writes.csv; with examples/group_commit.rs built (the anchor: one fdatasync shared by every write waiting,
#   same hyper settings), the anchor at the same connections beside it.
#
# Each CSV starts with comment lines (#) naming the run: commit, date, load average, parameters. wrk runs on the
# same two cores as the servers, so only the ratios between columns of one run mean much. Only 127.0.0.1 is ever
# contacted. Needs wrk (installed from Debian's packages when missing) and python3 (standard library only).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-64}"
SIZES="${SIZES:-1000 10000 100000 1000000}"
WRITE_CONNS="${WRITE_CONNS:-1 4 16 64 256}"
PARTS="${PARTS:-sessions writes}"
OUT="${OUT:-docs/bench}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin service-auth --example bare_hyper
  [ -f examples/group_commit.rs ] && cargo build --release --quiet --example group_commit
  BIN=target/release/service-auth
  BARE=target/release/examples/bare_hyper
  ANCHOR=target/release/examples/group_commit
fi
BIN=$(realpath "$BIN")
BARE=$(realpath "${BARE:-$(dirname "$BIN")/examples/bare_hyper}")
ANCHOR="${ANCHOR:-$(dirname "$BIN")/examples/group_commit}"
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
. benches/lib.sh
want() { [[ " $PARTS " == *" $1 "* ]]; }
header() { # file, columns: the run's provenance, then the column names
  {
    echo "# benches/curves.sh, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
    echo "# build: ${LABEL:-$BIN}${EXTRA_TOML:+; configuration added: ${EXTRA_TOML//$'\n'/ }}"
    echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); DURATION=${DURATION}s ROUNDS=$ROUNDS CONNS=$CONNS"
    echo "$2"
  } > "$1"
}

printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
printf '[limits]\nmax_connections_per_address = 4000\n' >> "$WORK/c.toml"
# More configuration for the servers (and the seed), e.g. EXTRA_TOML=$'[session]\nidle_timeout_secs = 0'.
printf '%s\n' "${EXTRA_TOML:-}" >> "$WORK/c.toml"

seed() { # dir, users and sessions, tokens file
  SERVICE_AUTH_DATA_DIR="$1" "$BIN" --config "$WORK/c.toml" seed --users "$2" --sessions "$2" --orgs 10 \
    --tokens-out "$3" > "$WORK/seed.log" 2>&1 </dev/null || { cat "$WORK/seed.log" >&2; exit 1; }
}

# Each request a random one of the tokens (kept as one string, cut out per request: a table of a million Lua
# strings stalls wrk itself, see load.sh); WRITES of them an update-user. done() prints the distribution.
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
    return wrk.format("POST", "/api/auth/update-user", h, string.format('{"name":"Curve %d"}', math.random(1000000)))
  end
  return wrk.format("GET", "/api/auth/get-session", h)
end
function done(summary, latency, requests)
  for _, p in ipairs({1, 5, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}) do
    io.write(string.format("PCT %s %.3f\n", p, latency:percentile(p) / 1000))
  end
  io.write(string.format("PCT 100 %.3f\n", latency.max / 1000))
end
LUA


if want sessions; then
  header "$OUT/sessions.csv" "sessions,ours_rps,ours_p50_ms,ours_p99_ms,bare_rps,bare_p50_ms,bare_p99_ms"
  header "$OUT/startup.csv" "accounts,listening_s,rss_mb,peak_mb,store_mb"
  largest=$(printf '%s\n' $SIZES | sort -n | tail -1)
  for n in $SIZES; do
    dir="$WORK/s$n"
    seed "$dir" "$n" "$WORK/t$n.txt"
    store_mb=$(du -sm "$dir" | cut -f1)
    # The first start after seeding writes the memberships seed leaves to it: not what a start costs later.
    SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3931 SERVICE_AUTH_DATA_DIR="$dir" \
      start 3931 "$BIN" --config "$WORK/c.toml"
    stop_last
    ready=() rss=() hwm=()
    for _ in $(seq "$RUNS"); do
      sync
      t0=$(date +%s.%N)
      SERVICE_AUTH_LOG=info SERVICE_AUTH_LISTEN=127.0.0.1:3931 SERVICE_AUTH_DATA_DIR="$dir" \
        "$BIN" --config "$WORK/c.toml" > "$WORK/start.out" 2>&1 </dev/null &
      PIDS+=($!)
      until grep -q 'listening on' "$WORK/start.out" 2>/dev/null; do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$WORK/start.out" >&2; exit 1; }
        sleep 0.01
      done
      ready+=("$(echo "$(date +%s.%N) $t0" | awk '{printf "%.3f", $1 - $2}')")
      curl -s -o /dev/null -b "service-auth.session_token=$(head -1 "$WORK/t$n.txt")" \
        http://127.0.0.1:3931/api/auth/get-session
      rss+=("$(awk '$1 == "VmRSS:" {print $2 / 1024}' "/proc/${PIDS[-1]}/status")")
      hwm+=("$(awk '$1 == "VmHWM:" {print $2 / 1024}' "/proc/${PIDS[-1]}/status")")
      stop_last
    done
    echo "$n,$(median "${ready[@]}"),$(median "${rss[@]}"),$(median "${hwm[@]}"),$store_mb" | tee -a "$OUT/startup.csv"

    SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3931 SERVICE_AUTH_DATA_DIR="$dir" \
      start 3931 "$BIN" --config "$WORK/c.toml"
    size=$(curl -s -b "service-auth.session_token=$(head -1 "$WORK/t$n.txt")" \
      http://127.0.0.1:3931/api/auth/get-session | wc -c)
    [ "$size" -gt 100 ] || { echo "the seeded token opens no session at $n" >&2; exit 1; }
    start 3932 "$BARE" 127.0.0.1:3932 "$size"
    rm -f "$WORK/rounds"
    for r in $(seq "$ROUNDS"); do
      b=$(TOKENS="$WORK/t$n.txt" run "$CONNS" http://127.0.0.1:3932/ -s "$WORK/random.lua")
      grep '^PCT' "$WORK/wrk.txt" > "$WORK/bare.pct.$r"
      o=$(TOKENS="$WORK/t$n.txt" run "$CONNS" http://127.0.0.1:3931/ -s "$WORK/random.lua")
      grep '^PCT' "$WORK/wrk.txt" > "$WORK/ours.pct.$r"
      [ "${o##* }" = 0 ] || { echo "get-session answered non-2xx at $n: $o" >&2; exit 1; }
      echo "$o $b" >> "$WORK/rounds"
      echo "  $n sessions, round $r: ours $o | bare $b (load $(cut -d' ' -f1 /proc/loadavg))"
    done
    row="$n"
    for f in 1 2 3 5 6 7; do row="$row,$(median $(awk -v f="$f" '{print $f}' "$WORK/rounds"))"; done
    echo "$row" | tee -a "$OUT/sessions.csv"
    if [ "$n" = "$largest" ]; then
      # The distribution of the median round by our throughput, bare's of the same round beside it.
      r=$(awk '{print NR, $1}' "$WORK/rounds" | sort -k2 -g | awk -v m="$(((ROUNDS + 1) / 2))" 'NR == m {print $1}')
      header "$OUT/latency.csv" "percentile,ours_ms,bare_ms"
      sed -i "/^# load average/s/\$/; $n sessions, the median round ($r of $ROUNDS)/" "$OUT/latency.csv"
      paste -d' ' "$WORK/ours.pct.$r" "$WORK/bare.pct.$r" | awk '{print $2 "," $3 "," $6}' >> "$OUT/latency.csv"
    fi
    stop_last; stop_last
    rm -rf "$dir"
  done
fi

if want writes; then
  header "$OUT/writes.csv" "connections,ours_rps,ours_p99_ms,anchor_rps,anchor_p99_ms"
  dir="$WORK/w"
  seed "$dir" 10000 "$WORK/wt.txt"
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3933 SERVICE_AUTH_DATA_DIR="$dir" \
    start 3933 "$BIN" --config "$WORK/c.toml"
  have_anchor=0
  if [ -x "$ANCHOR" ]; then
    mkdir -p "$WORK/anchor"
    # Every request here a write, answered as update-user answers ({"status":true}); the reads' size unused.
    start 3934 "$ANCHOR" 127.0.0.1:3934 "$WORK/anchor/log" 15
    have_anchor=1
  fi
  for c in $WRITE_CONNS; do
    rm -f "$WORK/rounds"
    for r in $(seq "$ROUNDS"); do
      o=$(TOKENS="$WORK/wt.txt" WRITES=1 run "$c" http://127.0.0.1:3933/ -s "$WORK/random.lua")
      [ "${o##* }" = 0 ] || { echo "update-user answered non-2xx at $c connections: $o" >&2; exit 1; }
      a="0 0 0 0"
      [ "$have_anchor" = 0 ] || a=$(TOKENS="$WORK/wt.txt" WRITES=1 run "$c" http://127.0.0.1:3934/ -s "$WORK/random.lua")
      echo "$o $a" >> "$WORK/rounds"
      echo "  update-user at $c connections, round $r: ours $o | anchor $a (load $(cut -d' ' -f1 /proc/loadavg))"
    done
    row="$c"
    for f in 1 3 5 7; do row="$row,$(median $(awk -v f="$f" '{print $f}' "$WORK/rounds"))"; done
    [ "$have_anchor" = 1 ] || row="${row%,*,*},,"
    echo "$row" | tee -a "$OUT/writes.csv"
  done
fi

python3 benches/plot.py "$OUT"
