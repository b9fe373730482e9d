#!/usr/bin/env bash
# The identity provider (#46): introspection at scale against get-session, and the token endpoint's grants.
#
#   benches/provider.sh                   # N=1000000: about 5 minutes after the build, ~5 GB resident at the peak
#   N=100000 DURATION=5 ROUNDS=3 benches/provider.sh
#   PARTS=introspect benches/provider.sh  # only some parts: introspect refresh code (all by default)
#   BIN=target/profiling/service-auth benches/provider.sh   # another build (no cargo build; e.g. to profile)
#
# `service-auth seed` writes N users, N sessions and a grant of each session to one confidential client, with its
# refresh token and an access token signed as the token endpoint signs it (`--access-tokens`; they are valid for a
# quarter of an hour, so the introspection rounds come first). Then, against the release server:
# - introspect: ROUNDS rounds, each get-session of a random one of the N sessions (cookie) and then
#   `POST /api/auth/oauth2/introspect` of a random one of the N access tokens (the client's Basic credentials),
#   wrk at CONNS connections for DURATION seconds each; the ratio of the two in each round, and the medians; and
#   the server's CPU per request of each (from /proc), whose ratio the host's other work disturbs far less.
# - refresh: examples/grants.rs, `refresh` at each of GRANT_CONNS: each client refreshes grants it owns, each time
#   with the refresh token the previous answer gave (every grant is a durable write: a rotation).
# - code: examples/grants.rs, `code`: `oauth2/authorize` with a seeded session's cookie and PKCE, then the code
#   redeemed at the token endpoint (three durable writes: the code, its take, the grant).
# Prints one line per round as it goes, then one Markdown table (BENCHMARKS.md, "The identity provider (#46)").
# wrk and the driver run on the same two cores as the server. Only 127.0.0.1 is contacted. Needs wrk (installed from
# Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-1000000}"
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-64}"
GRANT_CONNS="${GRANT_CONNS:-16 64}"
PARTS="${PARTS:-introspect refresh code}"
PORT="${PORT:-3951}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --locked --bin service-auth --example grants
  BIN=target/release/service-auth
fi
BIN=$(realpath "$BIN")
DRIVER="${DRIVER:-target/release/examples/grants}"
[ -x "$DRIVER" ] || cargo build --release --quiet --locked --example grants
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
. benches/lib.sh
want() { [[ " $PARTS " == *" $1 "* ]]; }

printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n' > "$WORK/c.toml"
printf '[limits]\nmax_connections_per_address = 4000\n' >> "$WORK/c.toml"
URL="http://127.0.0.1:$PORT"
t0=$(date +%s)
SERVICE_AUTH_DATA_DIR="$WORK/d" "$BIN" --config "$WORK/c.toml" seed --users "$N" --sessions "$N" --orgs 10 \
  --access-tokens "$N" --issuer "$URL/api/auth" --tokens-out "$WORK/sessions.txt" --grants-out "$WORK/grants.txt" \
  --client-out "$WORK/client.txt" > "$WORK/seed.log" 2>&1 </dev/null || { cat "$WORK/seed.log" >&2; exit 1; }
seeded=$(date +%s)
echo "seeded $N users, sessions and grants in $((seeded - t0)) s"
SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$PORT" SERVICE_AUTH_DATA_DIR="$WORK/d" \
  start "$PORT" "$BIN" --config "$WORK/c.toml"
SERVER=${PIDS[-1]}
echo "listening $(($(date +%s) - seeded)) s later; resident: $(awk '$1 == "VmRSS:" {print int($2 / 1024)}' "/proc/$SERVER/status") MB"
# The server's CPU (user and system, clock ticks) and, from two readings around a wrk run, its CPU per request in
# microseconds: what each request costs the server, which a host shared with other work disturbs far less than the
# requests per second (wrk and the other work take the cores, not the server's instructions).
ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
per_request() { # ticks before, ticks after, req/s
  awk -v a="$1" -v b="$2" -v r="$3" -v d="$DURATION" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", (b - a) * 1e6 / hz / (r * d)}'
}
read -r CLIENT_ID CLIENT_SECRET < "$WORK/client.txt"
BASIC="Basic $(printf '%s:%s' "$CLIENT_ID" "$CLIENT_SECRET" | base64 -w0)"
cut -d' ' -f1 "$WORK/grants.txt" > "$WORK/access.txt"
first=$(head -1 "$WORK/access.txt")
# A seeded token must introspect active, and a seeded cookie open a session: else the figures measure refusals.
curl -s -H "authorization: $BASIC" --data-urlencode "token=$first" "$URL/api/auth/oauth2/introspect" |
  grep -q '"active":true' || { echo "the first seeded access token is not active" >&2; exit 1; }
[ "$(curl -s -b "service-auth.session_token=$(head -1 "$WORK/sessions.txt")" "$URL/api/auth/get-session" | wc -c)" -gt 100 ] ||
  { echo "the first seeded session does not open" >&2; exit 1; }

# Each request a random one of the N tokens, both sides alike: every request is built once in init (wrk.format once,
# as a template the tokens go into: they all have the same length, so the same Content-Length) and request() only
# picks one, so the ratio compares the servers, not the scripts (built per request, an introspection cost wrk's Lua
# about 4.5 us and a get-session 1.7 us, on the same two cores as the server; picked, 0.02 us each). No string is
# made per request and the collector is stopped after init, so the table of N strings is never walked again (a
# collection over such a table is what stalled load.sh's generator). Init takes seconds at a million (0.4 s per
# thread at 200,000 introspections), and wrk runs the first thread while it inits the second and counts those
# requests, not that time: each thread waits (asleep) in its first request until every thread is ready (one file
# each in WRK_READY, WRK_THREADS of them: run() in lib.sh). KIND: session (get-session by cookie) or introspect.
cat > "$WORK/random.lua" <<'LUA'
local ffi = require("ffi")
ffi.cdef("int usleep(unsigned int usec);")
local threads, checked = {}, true
function setup(thread) thread:set("tid", #threads); table.insert(threads, thread) end
function init(args)
  local file = assert(io.open(os.getenv("TOKENS"), "rb"))
  local all = file:read("*a")
  file:close()
  local width = (all:find("\n", 1, true) or 0)
  count = #all / width
  assert(width > 1 and count == math.floor(count), "the tokens must all have the same length")
  local mark = string.rep("\1", width - 1)
  local template
  if os.getenv("KIND") == "introspect" then
    local h = {["Authorization"] = os.getenv("BASIC"), ["Content-Type"] = "application/x-www-form-urlencoded"}
    template = wrk.format("POST", "/api/auth/oauth2/introspect", h, "token=" .. mark)
  else
    template = wrk.format("GET", "/api/auth/get-session", {["Cookie"] = "service-auth.session_token=" .. mark})
  end
  local at = assert(template:find(mark, 1, true))
  local before, after = template:sub(1, at - 1), template:sub(at + #mark)
  ready = {}
  for k = 1, count do
    local start = (k - 1) * width + 1
    ready[k] = before .. all:sub(start, start + width - 2) .. after
  end
  all = nil
  math.randomseed(os.time() * 1000 + tid)
  -- wrk calls the first thread's request() once from its main thread, to check it, before it starts any thread.
  checked = tid ~= 0
  collectgarbage("collect")
  collectgarbage("stop")
  assert(io.open(os.getenv("WRK_READY") .. "/" .. tid, "w")):close()
end
local function pick() return ready[math.random(count)] end
local function exists(path) local f = io.open(path) if f then f:close() end return f ~= nil end
function request()
  if not checked then checked = true; return pick() end
  local deadline = os.time() + 300
  for t = 0, tonumber(os.getenv("WRK_THREADS")) - 1 do
    while not exists(os.getenv("WRK_READY") .. "/" .. t) do
      assert(os.time() < deadline, "a thread never got ready")
      ffi.C.usleep(1000)
    end
  end
  request = pick
  return pick()
end
LUA

ROWS=()
if want introspect; then
  rm -f "$WORK/rounds"
  for r in $(seq "$ROUNDS"); do
    left=$((seeded + 900 - $(date +%s)))
    [ "$left" -gt $((2 * DURATION + 5)) ] || { echo "the seeded access tokens expire in $left s: stopping the rounds" >&2; break; }
    t0=$(ticks)
    g=$(TOKENS="$WORK/sessions.txt" KIND=session run "$CONNS" "$URL" -s "$WORK/random.lua")
    t1=$(ticks)
    i=$(TOKENS="$WORK/access.txt" KIND=introspect BASIC="$BASIC" run "$CONNS" "$URL" -s "$WORK/random.lua")
    t2=$(ticks)
    [ "${g##* }" = 0 ] && [ "${i##* }" = 0 ] || { echo "non-2xx answers: get-session $g, introspect $i" >&2; exit 1; }
    gc=$(per_request "$t0" "$t1" "${g%% *}")
    ic=$(per_request "$t1" "$t2" "${i%% *}")
    # Fields: get-session 1-4, introspection 5-8, their ratio 9, the server's CPU per request of each 10-11, and
    # the ratio that CPU gives (get-session's over introspection's: the throughput ratio on cores of its own) 12.
    echo "$g $i $(ratio "${i%% *}" "${g%% *}") $gc $ic $(ratio "$gc" "$ic")" >> "$WORK/rounds"
    echo "  round $r: get-session $g | introspect $i | ratio $(ratio "${i%% *}" "${g%% *}") | server CPU per" \
      "request: get-session $gc us, introspect $ic us, ratio $(ratio "$gc" "$ic") (load $(load))"
  done
  # Every answer must have been `active: true` to count: one request after the rounds checks a random token.
  tok=$(shuf -n1 "$WORK/access.txt")
  curl -s -H "authorization: $BASIC" --data-urlencode "token=$tok" "$URL/api/auth/oauth2/introspect" |
    grep -q '"active":true' || { echo "a seeded access token no longer introspects active" >&2; exit 1; }
  col() { median $(awk -v f="$1" '{print $f}' "$WORK/rounds"); }
  ROWS+=("| get-session, random one of $N sessions | $CONNS | $(col 1) | $(col 2) | $(col 3) | server CPU $(col 10) us a request |")
  ROWS+=("| introspection, random one of $N access tokens | $CONNS | $(col 5) | $(col 6) | $(col 7) | **$(col 9)** of get-session, per-round ratios: $(awk '{printf "%s ", $9}' "$WORK/rounds"); server CPU $(col 11) us a request, **$(col 12)** of get-session's, per round: $(awk '{printf "%s ", $12}' "$WORK/rounds")|")
fi

grants() { # mode, connections, driver args...: ROUNDS rounds, one line each, then the median row
  local mode=$1 c=$2; shift 2
  rm -f "$WORK/g"
  for r in $(seq "$ROUNDS"); do
    out=$("$DRIVER" "$mode" --url "$URL" --client "$WORK/client.txt" --conns "$c" --secs "$DURATION" "$@")
    echo "$out" >> "$WORK/g"
    echo "  $mode, $c connections, round $r: grants/s p50 p99 failures: $out (load $(load))"
  done
  col() { median $(awk -v f="$1" '{print $f}' "$WORK/g"); }
  ROWS+=("| $mode grants/s | $c | $(col 1) | $(col 2) | $(col 3) | failures $(awk '{s += $4} END {print s}' "$WORK/g"); rounds: $(awk '{printf "%s ", $1}' "$WORK/g")|")
}
if want refresh; then
  for c in $GRANT_CONNS; do grants refresh "$c" --grants "$WORK/grants.txt"; done
fi
if want code; then
  for c in $GRANT_CONNS; do grants code "$c" --sessions "$WORK/sessions.txt" --users "$N"; done
fi

echo
echo "| scenario | conns | req/s (median) | p50 ms | p99 ms | notes |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
