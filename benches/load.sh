#!/usr/bin/env bash
# Load harness: the release server and a bare hyper server, side by side, over loopback, in one run.
#
#   benches/load.sh            # 10 s per scenario
#   DURATION=5 benches/load.sh
#   BASE=/tmp/base/target/release/service-auth benches/load.sh   # the durable writes on that build too
#   PARTS="random" benches/load.sh   # only some parts: basic flood overload writes random apikey (all by default)
#   IO_THREADS=4 benches/load.sh     # the server's [limits] io_threads (default 0: one event loop per core)
#
# Prints one line per scenario as it goes, then ONE summary table (scenario, connections, requests/s, p50, p99,
# ratio to the bare server where it applies, notes) in Markdown, which BENCHMARKS.md quotes. Scenarios: get-session
# against bare hyper, sign-in and sign-up (one argon2id each), the admin list, get-session during a sign-in flood,
# 1,000 sign-ins at once (examples/overload.rs: how fast the excess gets its 503, get-session meanwhile, the
# server's memory), and the durable writes at 64 connections (update-user, sign-out, session refresh: each a
# group commit with fsync; the notes give the commits' mean batch size from the metrics listener), and get-session
# with a random one of a million seeded sessions per request, alone and with 10 % writes, with its tail.
# Needs wrk (installed from Debian's packages when missing). Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet --bin service-auth --example bare_hyper --example overload --example hash_pool
BIN=target/release/service-auth
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# Rate limits off: every request comes from 127.0.0.1 (and the flood's 1,000 connections too).
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
printf '[limits]\nmax_connections_per_address = 4000\nio_threads = %s\n' "${IO_THREADS:-0}" >> "$WORK/c.toml"
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
  wrk -t"$((c < 2 ? 1 : 2))" -c"$c" -d"${DURATION}s" --latency "$@" "$url" > "$WORK/wrk.txt" 2>&1 || true
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.txt")
  echo "$rps $p50 $p99 ${non2xx:-0}"
}
ROWS=()  # "scenario|conns|req/s|p50|p99|vs bare|notes", printed as one table at the end
report() { # label connections "rps p50 p99 non2xx" [bare rps] [notes]
  read -r rps p50 p99 non2xx <<<"$3"
  local ratio="-" notes="${5:-}"
  [ -n "${4:-}" ] && ratio=$(awk -v a="$rps" -v b="$4" 'BEGIN {printf "%.0f%%", 100*a/b}')
  [ "${non2xx:-0}" != 0 ] && notes="${notes:+$notes; }non-2xx $non2xx"
  printf '%-40s %4s conns %10s req/s  p50 %8s  p99 %8s  vs bare %5s  %s\n' \
    "$1" "$2" "$rps" "$p50" "$p99" "$ratio" "$notes"
  ROWS+=("$1|$2|$rps|$p50|$p99|$ratio|$notes")
}

PARTS="${PARTS:-basic flood overload writes random apikey}"
pool() { # concurrency -> "verifies/s p50 p99" of the hashing pool alone, for DURATION seconds
  target/release/examples/hash_pool --concurrency "$1" --secs "$DURATION" | awk '/^POOL/ {print $2, $3, $4}'
}
want() { [[ " $PARTS " == *" $1 "* ]]; }

G=http://127.0.0.1:3911/api/auth/get-session
want basic && for c in 16 64; do
  bare=$(run bare "$c" http://127.0.0.1:3912/)
  report "bare hyper (same body size: $SIZE B)" "$c" "$bare"
  bare_rps=${bare%% *}
  report "get-session, valid cookie" "$c" "$(run gs "$c" "$G" -H "Cookie: service-auth.session_token=$TOKEN")" "$bare_rps"
  report "get-session, no cookie" "$c" "$(run gs0 "$c" "$G")" "$bare_rps"
  # Sign-in against the hashing pool alone (examples/hash_pool.rs: the same pool and parameters, no HTTP): the
  # ratio column compares the two; what sign-in loses is everything but the hash.
  si=$(run si "$c" http://127.0.0.1:3911 -s "$WORK/sign-in.lua")
  read -r prps pp50 pp99 < <(pool "$c")
  report "hashing pool alone (verify, no HTTP)" "$c" "$prps ${pp50}ms ${pp99}ms 0"
  report "sign-in (argon2id verify each)" "$c" "$si" "$prps" "ratio: to the hashing pool alone"
  report "sign-up (argon2id hash each)" "$c" "$(run su "$c" http://127.0.0.1:3911 -s "$WORK/sign-up.lua")"
  report "GET /api/admin/users (10,000+ users)" "$c" \
    "$(run au "$c" http://127.0.0.1:3911/api/admin/users -H "Cookie: service-auth.session_token=$ADMIN")"
done
# Sign-in's part that is not the hash: one sign-in at a time against one verify at a time, p50 against p50.
if want basic; then
  si1=$(run si1 1 http://127.0.0.1:3911 -s "$WORK/sign-in.lua")
  read -r _ sp50 _ _ <<<"$si1"
  read -r prps pp50 pp99 < <(pool 1)
  report "hashing pool alone, one at a time" 1 "$prps ${pp50}ms ${pp99}ms 0"
  rest=$(awk -v s="$sp50" -v p="$pp50" 'BEGIN {u = (s ~ /us$/) ? 0.001 : (s ~ /ms$/ ? 1 : 1000); sub(/[a-z]+$/, "", s);
    printf "%.2f ms", s * u - p}')
  report "sign-in, one at a time" 1 "$si1" "$prps" \
    "p50 minus the pool's p50: $rest (HTTP, lookup, session commit)"
fi

# get-session latency while sign-ins saturate the hashing pool.
if want flood; then
wrk -t1 -c32 -d"$((DURATION + 2))s" -s "$WORK/sign-in.lua" http://127.0.0.1:3911 > /dev/null 2>&1 &
FLOOD=$!
sleep 1
report "get-session during a sign-in flood (32 conns)" 16 "$(run mix 16 "$G" -H "Cookie: service-auth.session_token=$TOKEN")"
wait "$FLOOD"
fi

# 1,000 sign-ins at once, ten times what the pool can hash in the time a client waits, for DURATION seconds;
# refused clients wait Retry-After as asked. Then the same with clients that never back off.
want overload && for mode in "" --no-backoff; do
  target/release/examples/overload --url http://127.0.0.1:3911 --tokens "$WORK/tokens.txt" --sign-ins 1000 \
    --secs "$DURATION" --pid "${PIDS[0]}" --rows $mode > "$WORK/overload.txt"
  grep -v '^ROW|' "$WORK/overload.txt"
  while IFS='|' read -r _ label c rps p50 p99 notes; do
    ROWS+=("$label${mode:+ (no back-off)}|$c|$rps|$p50|$p99|-|$notes")
  done < <(grep '^ROW|' "$WORK/overload.txt")
done

# --- Durable writes: each answer waits for its commit (fsync). A server of their own per build, on a copy of one
# seeded store, with [session] update_age_secs = 1 so that every seeded session is old enough to be extended by
# get-session (a write), and the metrics listener on for the commits' batch sizes.
if want writes; then
printf '[session]\nupdate_age_secs = 1\n' >> "$WORK/c.toml"
SERVICE_AUTH_DATA_DIR="$WORK/w" $BIN --config "$WORK/c.toml" seed --users 10000 --sessions 90000 --orgs 10 \
  --tokens-out "$WORK/wtokens.txt" >/dev/null 2>&1
[ -n "${BASE:-}" ] && cp -a "$WORK/w" "$WORK/w-base"
sleep 1.5  # every seeded session is now older than update_age_secs
cat > "$WORK/writes.lua" <<'LUA'
-- MODE: update-user | sign-out | refresh. Each request takes the next token of lines FROM..TO of TOKENS, wrk's
-- threads interleaved, so no session is signed out twice and each is refreshed once.
local threads = 0
function setup(thread) thread:set("tid", threads); threads = threads + 1 end
function init(args)
  tokens = {}
  local i = 0
  for line in io.lines(os.getenv("TOKENS")) do
    i = i + 1
    if i >= tonumber(os.getenv("FROM")) and i <= tonumber(os.getenv("TO")) then tokens[#tokens + 1] = line end
  end
  n = tid; step = 2; mode = os.getenv("MODE")
end
request = function()
  local token = tokens[(n % #tokens) + 1]
  n = n + step
  local h = {["Cookie"] = "service-auth.session_token=" .. token}
  if mode == "update-user" then
    h["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/auth/update-user", h, string.format('{"name":"Renamed %d"}', n))
  elseif mode == "sign-out" then
    h["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/auth/sign-out", h, "{}")
  end
  return wrk.format("GET", "/api/auth/get-session", h)
end
LUA
batches() { # metrics address -> "commits requests"
  curl -s "http://$1/metrics" | awk '/^service_auth_store_commit_batch_requests_count/ {c=$2}
    /^service_auth_store_commit_batch_requests_sum/ {s=$2} END {print c+0, s+0}'
}
writes() { # build-label binary port metrics-port data-dir
  local label=$1 bin=$2 port=$3 mport=$4 dir=$5
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:$port SERVICE_AUTH_DATA_DIR="$dir" \
    SERVICE_AUTH_METRICS_LISTEN=127.0.0.1:$mport start "writes-$label" "$port" "$bin" --config "$WORK/c.toml"
  for spec in "update-user 1 30000" "sign-out 30001 60000" "refresh 60001 90000"; do
    read -r mode from to <<<"$spec"
    local b0 b1
    b0=$(batches 127.0.0.1:$mport)
    local out
    out=$(MODE=$mode TOKENS="$WORK/wtokens.txt" FROM=$from TO=$to run w 64 "http://127.0.0.1:$port" -s "$WORK/writes.lua")
    b1=$(batches 127.0.0.1:$mport)
    local note
    # The actors gather the writes waiting in their mailboxes into one store request, so the answers a commit
    # made durable (req/s over commits/s) say more than the store's own batch metric.
    note=$(awk -v a="$b0" -v b="$b1" -v d="$DURATION" -v rps="${out%% *}" 'BEGIN {split(a, x, " "); split(b, y, " ");
      c = (y[1] - x[1]) / d; printf "%d commits/s, %.1f answers a commit", c, (c ? rps / c : 0)}')
    report "$mode, $label (durable write)" 64 "$out" "" "$note"
  done
  kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'
}
[ -n "${BASE:-}" ] && writes base "$BASE" 3914 9914 "$WORK/w-base"
writes "this build" "$BIN" 3915 9915 "$WORK/w"
fi

# --- A million different sessions: every request carries a random one of RANDOM_SESSIONS seeded sessions (a real
# deployment checks many sessions, not one many times), the bare server driven by the same Lua script so that the
# script's own cost is on both sides; then the same with 10 % writes (update-user) mixed in. ROUNDS rounds each,
# so a stall shows as a bad round instead of being averaged away; the tail (p99.9, max) comes from wrk's own
# histogram through the script's done(). RANDOM_SESSIONS=0 skips this part.
RANDOM_SESSIONS="${RANDOM_SESSIONS:-1000000}"
ROUNDS="${ROUNDS:-3}"
if [ "$RANDOM_SESSIONS" -gt 0 ] && want random; then
  SERVICE_AUTH_DATA_DIR="$WORK/r" $BIN --config "$WORK/c.toml" seed --users "$RANDOM_SESSIONS" \
    --sessions "$RANDOM_SESSIONS" --orgs 100 --tokens-out "$WORK/rtokens.txt" >/dev/null 2>&1
  # The writes must not extend sessions (that would be a write on get-session too): back to the default age.
  grep -v update_age_secs "$WORK/c.toml" | grep -v '^\[session\]' > "$WORK/r.toml"
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN=127.0.0.1:3916 SERVICE_AUTH_DATA_DIR="$WORK/r" \
    start random 3916 $BIN --config "$WORK/r.toml"
  cat > "$WORK/random.lua" <<'LUA'
-- Each request: a random one of the seeded tokens; WRITES (a fraction) of them an update-user instead.
-- The tokens are kept as ONE string and cut out per request, not as a table of a million Lua strings: with that
-- table the generator itself stalled (the bare server driven so: p99.9 87-110 ms, max 110-150 ms; as one string
-- 30-54 ms and 40-75 ms; with 10,000 tokens 5-20 ms and 8-30 ms, so what remains is still wrk's, LuaJIT's
-- garbage of a new string per request). BENCHMARKS.md compares with a generator in Rust. Every token has the
-- same length, which is checked here.
local threads = {}
function setup(thread) thread:set("tid", #threads); table.insert(threads, thread) end
function init(args)
  local file = assert(io.open(os.getenv("TOKENS"), "rb"))
  all = file:read("*a")
  file:close()
  width = (all:find("\n", 1, true) or 0)
  count = #all / width
  assert(width > 1 and count == math.floor(count), "the tokens must all have the same length")
  for i = 1, count do assert(all:byte(i * width) == 10, "the tokens must all have the same length") end
  math.randomseed(os.time() * 1000 + tid)
  writes = tonumber(os.getenv("WRITES") or "0")
end
local function token()
  local start = (math.random(count) - 1) * width + 1
  return all:sub(start, start + width - 2)
end
request = function()
  local h = {["Cookie"] = "service-auth.session_token=" .. token()}
  if writes > 0 and math.random() < writes then
    h["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/auth/update-user", h, string.format('{"name":"Mixed %d"}', math.random(1000000)))
  end
  return wrk.format("GET", "/api/auth/get-session", h)
end
function done(summary, latency, requests)
  io.write(string.format("TAIL %.2fms %.2fms %.2fms\n", latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
LUA
  # tail <label> <connections> <url> [WRITES] -> report row with p99.9 and max in the notes
  tail_run() {
    local out tail
    out=$(TOKENS="$WORK/rtokens.txt" WRITES="${4:-0}" run "$1" "$2" "$3" -s "$WORK/random.lua")
    tail=$(awk '/^TAIL/ {print "p99.9 " $3 ", max " $4}' "$WORK/wrk.txt")
    echo "$out|$tail"
  }
  for c in 16 64; do
    for round in $(seq "$ROUNDS"); do
      IFS='|' read -r bare btail <<<"$(tail_run rb "$c" http://127.0.0.1:3912/)"
      report "bare hyper, random-session script (round $round)" "$c" "$bare" "" "$btail"
      IFS='|' read -r rs rtail <<<"$(tail_run rs "$c" http://127.0.0.1:3916)"
      report "get-session, random of $RANDOM_SESSIONS (round $round)" "$c" "$rs" "${bare%% *}" "$rtail"
      IFS='|' read -r mx mtail <<<"$(tail_run rm "$c" http://127.0.0.1:3916 0.1)"
      report "random, 10 % update-user (round $round)" "$c" "$mx" "${bare%% *}" "$mtail"
    done
  done
fi

# get-session through an API key (x-api-key: the key's session, issue 47) against a cookie's, alternating rounds in
# one run: the key is looked up from memory like a session. The key is the administrator's, made without a request
# window (an administrator may), so every request is answered.
if want apikey; then
  KEY=$(curl -s http://127.0.0.1:3911/api/auth/api-key/create -H "Cookie: service-auth.session_token=$ADMIN" \
    -H 'content-type: application/json' -d '{"name":"load","rateLimitEnabled":false}' |
    sed -n 's/.*"key":"\([A-Za-z]*\)".*/\1/p')
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $KEY" "$G")" = 200 ] ||
    { echo "the API key opens no session" >&2; exit 1; }
  for c in 16 64; do
    for round in 1 2 3; do
      gc=$(run gc "$c" "$G" -H "Cookie: service-auth.session_token=$TOKEN")
      report "get-session, valid cookie (round $round)" "$c" "$gc"
      report "get-session, x-api-key (round $round)" "$c" "$(run gk "$c" "$G" -H "x-api-key: $KEY")" "${gc%% *}" \
        "vs bare: to the cookie's, same round"
    done
  done
fi

# With SERVICE_AUTH_METRICS_LISTEN set (e.g. 127.0.0.1:9913), what a Prometheus scrape shows after the run: every
# sample but the histogram buckets and the zeros.
if [ -n "${SERVICE_AUTH_METRICS_LISTEN:-}" ]; then
  echo
  echo "Prometheus scrape after the run (http://$SERVICE_AUTH_METRICS_LISTEN/metrics; buckets and zeros left out):"
  curl -s "http://$SERVICE_AUTH_METRICS_LISTEN/metrics" | grep -v -e '^#' -e '_bucket{' | awk 'NF && $NF != 0'
fi

echo
echo "Summary (DURATION=${DURATION}s per scenario; vs bare: req/s against bare hyper in the same run):"
echo
echo "| scenario | conns | req/s | p50 | p99 | vs bare | notes |"
echo "|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do echo "| ${row//|/ | } |"; done
