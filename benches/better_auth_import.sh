#!/usr/bin/env bash
# Times `service-auth import-better-auth --sqlite` on a generated better-auth database of N users (default
# 100,000): the schema better-auth's SQLite migrations create, every user with a credential account holding a
# real better-auth scrypt hash (one hash, reused: the import checks its format and never runs scrypt), a role, a
# tenth of them banned, a thousand organizations with one member row each for half the users. Three runs, each
# into a fresh data directory; prints each time and the median.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000}
RUNS=${RUNS:-3}
cargo build --release --quiet --bin service-auth
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK/ba.db" "$N" "$(cat tests/migration/fixtures/better-auth-hash.txt)" <<'PY'
import sqlite3, sys
path, n, hash_ = sys.argv[1], int(sys.argv[2]), sys.argv[3]
db = sqlite3.connect(path)
db.executescript('''
CREATE TABLE "user" ("id" text NOT NULL PRIMARY KEY, "name" text NOT NULL, "email" text NOT NULL UNIQUE,
  "emailVerified" integer NOT NULL, "image" text, "createdAt" date NOT NULL, "updatedAt" date NOT NULL,
  "role" text, "banned" integer, "banReason" text, "banExpires" date);
CREATE TABLE "account" ("id" text NOT NULL PRIMARY KEY, "accountId" text NOT NULL, "providerId" text NOT NULL,
  "userId" text NOT NULL, "accessToken" text, "refreshToken" text, "idToken" text, "accessTokenExpiresAt" date,
  "refreshTokenExpiresAt" date, "scope" text, "password" text, "createdAt" date NOT NULL, "updatedAt" date NOT NULL);
CREATE TABLE "session" ("id" text NOT NULL PRIMARY KEY, "expiresAt" date NOT NULL, "token" text NOT NULL UNIQUE,
  "createdAt" date NOT NULL, "updatedAt" date NOT NULL, "ipAddress" text, "userAgent" text, "userId" text NOT NULL);
CREATE TABLE "organization" ("id" text NOT NULL PRIMARY KEY, "name" text NOT NULL, "slug" text NOT NULL UNIQUE,
  "logo" text, "createdAt" date NOT NULL, "metadata" text);
CREATE TABLE "member" ("id" text NOT NULL PRIMARY KEY, "organizationId" text NOT NULL, "userId" text NOT NULL,
  "role" text NOT NULL, "createdAt" date NOT NULL);
''')
at = "2026-01-02T03:04:05.678Z"
ident = lambda p, i: f"{p}{i:030d}"
db.executemany('INSERT INTO "organization" VALUES (?, ?, ?, NULL, ?, NULL)',
               ((ident("o", i), f"Organization {i}", f"org-{i}", at) for i in range(1000)))
db.executemany('INSERT INTO "user" VALUES (?, ?, ?, 1, NULL, ?, ?, ?, ?, ?, NULL)',
               ((ident("u", i), f"User {i}", f"user{i}@example.com", at, at, "admin" if i == 0 else "user",
                 int(i % 10 == 1), "spam" if i % 10 == 1 else None) for i in range(n)))
db.executemany('INSERT INTO "account" ("id", "accountId", "providerId", "userId", "password", "createdAt", "updatedAt") '
               'VALUES (?, ?, \'credential\', ?, ?, ?, ?)',
               ((ident("a", i), ident("u", i), ident("u", i), hash_, at, at) for i in range(n)))
db.executemany('INSERT INTO "member" VALUES (?, ?, ?, \'member\', ?)',
               ((ident("m", i), ident("o", i % 1000), ident("u", i), at) for i in range(0, n, 2)))
db.commit()
PY
times=()
for run in $(seq "$RUNS"); do
  rm -rf "$WORK/data"
  start=$(date +%s.%N)
  SERVICE_AUTH_DATA_DIR="$WORK/data" SERVICE_AUTH_CONFIG=/dev/null target/release/service-auth \
    import-better-auth --sqlite "$WORK/ba.db" --mapping-out "$WORK/map.jsonl" 2> "$WORK/report" || { cat "$WORK/report"; exit 1; }
  end=$(date +%s.%N)
  t=$(python3 -c "print(f'{$end - $start:.2f}')")
  times+=("$t")
  echo "run $run: $t s ($(head -n 2 "$WORK/report" | tail -n 1 | cut -c1-60)…)"
done
echo "median of ${#times[@]}: $(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (${#times[@]} + 1) / 2 ))p") s for $N users"
echo "data file: $(du -h "$WORK/data/service-auth.redb" | cut -f1), source: $(du -h "$WORK/ba.db" | cut -f1)"

# --- What a password check costs while imported hashes remain, and without them ------------------------------
# A wrong password answers 401 after the full verification: 25 sequential wrong sign-ins each, the median time.
printf '[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nfailures_per_account = 100000\n' > "$WORK/config.toml"
# Interleaved (one of each in turn), so that noise on the shared machine falls on every kind alike.
time_wrong() { # base-url email...
  local base=$1; shift
  for _ in $(seq 25); do
    for email in "$@"; do
      curl -s -o /dev/null -w "$email %{time_total}\n" "$base/api/auth/sign-in/email" \
        -H 'Content-Type: application/json' -d "{\"email\": \"$email\", \"password\": \"a wrong password\"}"
    done
  done | python3 -c '
import sys, statistics
by = {}
for line in sys.stdin:
    email, t = line.split()
    by.setdefault(email, []).append(float(t) * 1000)
print(", ".join(f"{e}: {statistics.median(v):.1f} ms" for e, v in by.items()))'
}
serve() { # data-dir
  SERVICE_AUTH_CONFIG="$WORK/config.toml" SERVICE_AUTH_DATA_DIR="$1" SERVICE_AUTH_LISTEN=127.0.0.1:0 \
    SERVICE_AUTH_LOG=warn target/release/service-auth > "$WORK/out" 2>/dev/null &
  PID=$!
  for _ in $(seq 300); do grep -q 'listening on' "$WORK/out" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  BASE="http://$(sed -n 's/^listening on //p' "$WORK/out")"
}
serve "$WORK/data"
curl -s -o /dev/null "$BASE/api/auth/sign-up/email" -H 'Content-Type: application/json' \
  -d '{"name": "New", "email": "new@example.com", "password": "a new long password"}'
echo "with imported hashes, median of 25 wrong sign-ins (imported account, argon2id account, unknown e-mail):"
echo "  $(time_wrong "$BASE" user5@example.com new@example.com ghost@example.com)"
kill "$PID"; wait "$PID" 2>/dev/null || true
serve "$WORK/fresh"
curl -s -o /dev/null "$BASE/api/auth/sign-up/email" -H 'Content-Type: application/json' \
  -d '{"name": "New", "email": "new@example.com", "password": "a new long password"}'
echo "without imported hashes (argon2id account, unknown e-mail):"
echo "  $(time_wrong "$BASE" new@example.com ghost@example.com)"
kill "$PID"; wait "$PID" 2>/dev/null || true
