#!/usr/bin/env bash
# The second step of a sign-in with an authenticator (#28): its server time, as the server's own request histogram
# measures it (from the request's arrival to its answer, no network), for `two-factor/verify-totp` with the
# two-factor cookie. The step checks the code (no password hash), uses its time step up, ends the challenge and
# starts the session in one durable commit (fsync), like any sign-in.
#
#   benches/two_factor_step.sh                 # 3 runs of 100 accounts each
#   RUNS=5 ACCOUNTS=200 benches/two_factor_step.sh
#
# Each run: a fresh release server (metrics on 127.0.0.1), ACCOUNTS accounts enrolled (sign-up, enable, a first
# code), each signed in with its password (the cookie), then the measured phase: one verify-totp per account, each
# with a code of its own authenticator (a step's code is accepted once per account). Prints each run's mean server
# time of the measured phase (the histogram's sum and count before and after it) and the mean time of the store's
# commits meanwhile (the durable part), then the median of the runs.
# Only 127.0.0.1 is contacted; needs python3 (standard library only) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
ACCOUNTS="${ACCOUNTS:-100}"
# BIN=path measures that build instead of this checkout's (a before/after comparison).
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin service-auth
  BIN=target/release/service-auth
fi
WORK=$(mktemp -d)
PID=
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
MEANS=()
for run in $(seq "$RUNS"); do
  PORT=$(free_port); METRICS=$(free_port)
  rm -rf "$WORK/d"
  printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 1000000\n' > "$WORK/c.toml"
  printf '[metrics]\nlisten = "127.0.0.1:%s"\n' "$METRICS" >> "$WORK/c.toml"
  SERVICE_AUTH_LOG=warn SERVICE_AUTH_LISTEN="127.0.0.1:$PORT" SERVICE_AUTH_DATA_DIR="$WORK/d" \
    $BIN --config "$WORK/c.toml" serve > "$WORK/out" 2> "$WORK/err" &
  PID=$!
  until curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"; do sleep 0.05; done
  MEAN=$(python3 - "$PORT" "$METRICS" "$ACCOUNTS" <<'PY'
import base64, hmac, http.cookiejar, json, struct, sys, time, urllib.request
port, metrics, accounts = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = f"http://127.0.0.1:{port}/api/auth"

def client():
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

def post(opener, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with opener.open(req) as r:
        return json.load(r)

def totp(key, step):
    mac = hmac.new(key, struct.pack(">Q", step), "sha1").digest()
    o = mac[19] & 15
    return "%06d" % ((struct.unpack(">I", mac[o:o + 4])[0] & 0x7fffffff) % 1000000)

def settled_step():
    left = 30 - int(time.time()) % 30
    if left <= 3:
        time.sleep(left + 1)
    return int(time.time()) // 30

def histogram():
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics").read().decode()
    route = 'route="/api/auth/two-factor/verify-totp"'
    get = lambda name: sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + "{") and route in l)
    plain = lambda name: sum(float(l.split()[-1]) for l in text.splitlines() if l.split(" ")[0] == name)
    return (get("service_auth_http_request_duration_seconds_sum"),
            get("service_auth_http_request_duration_seconds_count"),
            plain("service_auth_store_commit_duration_seconds_sum"),
            plain("service_auth_store_commit_duration_seconds_count"))

password = "correct horse battery staple"
pending = []
for n in range(accounts):
    c = client()
    email = f"tfa{n}@example.com"
    post(c, "/sign-up/email", {"name": "T", "email": email, "password": password})
    uri = post(c, "/two-factor/enable", {"password": password})["totpURI"]
    secret = uri.split("secret=")[1].split("&")[0]
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    post(c, "/two-factor/verify-totp", {"code": totp(key, settled_step())})
    signing_in = client()
    assert post(signing_in, "/sign-in/email", {"email": email, "password": password})["twoFactorRedirect"]
    pending.append((signing_in, key))
before = histogram()
step = settled_step()
for signing_in, key in pending:
    assert post(signing_in, "/two-factor/verify-totp", {"code": totp(key, step + 1)})["token"]
after = histogram()
count = after[1] - before[1]
assert count == accounts, (before, after)
commits = after[3] - before[3]
print("%.1f %.1f %d" % ((after[0] - before[0]) / count * 1e6, (after[2] - before[2]) / max(commits, 1) * 1e6, commits))
PY
)
  kill $PID; wait $PID 2>/dev/null || true; PID=
  read -r STEP COMMIT COMMITS <<< "$MEAN"
  echo "run $run: verify-totp (sign-in step) mean server time ${STEP} µs over $ACCOUNTS steps; meanwhile $COMMITS commits of ${COMMIT} µs on average (fsync)"
  MEANS+=("$STEP")
done
printf '%s\n' "${MEANS[@]}" | sort -n | awk '{a[NR]=$1} END {print "median of the runs: " a[int((NR+1)/2)] " µs"}'
