#!/usr/bin/env bash
# get-session (valid cookie, 64 connections) and sign-in (one argon2id each) against several builds,
# alternating, ROUNDS rounds of DURATION seconds each; the same seeded store (10,000 users and sessions) copied for
# each. sign-in at 2 connections (the hashing pool of 2 cores). Prints each round and the medians.
#
#   benches/session_and_sign_in.sh before=BIN after=BIN      # ROUNDS=3 DURATION=5 by default; needs wrk
set -euo pipefail
ROUNDS="${ROUNDS:-3}"; DURATION="${DURATION:-5}"
WORK=$(mktemp -d); PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
NAMES=(); BINS=()
for a in "$@"; do NAMES+=("${a%%=*}"); BINS+=("$(realpath "${a#*=}")"); done
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
printf '[limits]\nmax_connections_per_address = 4000\n' >> "$WORK/c.toml"
SERVICE_AUTH_DATA_DIR="$WORK/seed" env -C "$WORK" "${BINS[0]}" --config "$WORK/c.toml" seed --users 10000 --sessions 10000 \
  --orgs 10 --tokens-out "$WORK/tokens.txt" >/dev/null 2>&1 </dev/null
TOKEN=$(head -1 "$WORK/tokens.txt")
cat > "$WORK/si.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"email":"user%d@seed.example","password":"seed-password-1"}', 1 + (n * 7919) % 9999)
  return wrk.format("POST", "/api/auth/sign-in/email", {["Content-Type"] = "application/json"}, body)
end
LUA
for i in "${!BINS[@]}"; do
  port=$((4711 + i)); cp -r "$WORK/seed" "$WORK/d$i"
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$port" SERVICE_AUTH_DATA_DIR="$WORK/d$i" \
    env -C "$WORK" "${BINS[$i]}" --config "$WORK/c.toml" serve > "$WORK/$i.out" 2>&1 </dev/null &
  PIDS+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.05; done
  size=$(curl -s -b "service-auth.session_token=$TOKEN" "http://127.0.0.1:$port/api/auth/get-session" | wc -c)
  [ "$size" -gt 100 ] || { echo "${NAMES[$i]}: no session" >&2; exit 1; }
done
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
# Successful answers a second (a full hashing pool answers 503 at once: those are not sign-ins).
ok_rps() { awk '/requests in/ {n = $1; t = $4; sub(/s,?$/, "", t)} /Non-2xx/ {bad = $5} END {printf "%.1f", (n - bad) / t}' "$1"; }
for r in $(seq "$ROUNDS"); do
  for i in "${!BINS[@]}"; do
    port=$((4711 + i))
    wrk -t2 -c64 -d"${DURATION}s" --latency -H "Cookie: service-auth.session_token=$TOKEN" \
      "http://127.0.0.1:$port/api/auth/get-session" > "$WORK/g" 2>&1 || true
    wrk -t1 -c2 -d"${DURATION}s" -s "$WORK/si.lua" "http://127.0.0.1:$port" > "$WORK/s" 2>&1 || true
    echo "round $r ${NAMES[$i]} get-session $(rps "$WORK/g") sign-in $(ok_rps "$WORK/s")" | tee -a "$WORK/all"
  done
done
for n in "${NAMES[@]}"; do
  g=$(awk -v n="$n" '$3 == n {print $5}' "$WORK/all" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  s=$(awk -v n="$n" '$3 == n {print $7}' "$WORK/all" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "median $n get-session $g sign-in $s"
done
