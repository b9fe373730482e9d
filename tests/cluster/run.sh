#!/usr/bin/env bash
# Several nodes on PostgreSQL (docs/cluster.md): starts a real PostgreSQL (Debian's `postgresql`) in a
# temporary directory on a loopback port (as the `postgres` user when run as root: initdb refuses root), then runs
# every HTTP integration test against two nodes sharing one database per test, requests alternating between
# the nodes (tests/api/harness.rs, SERVICE_AUTH_TEST_POSTGRES). The cross-node races and the outage
# (tests/api/cluster.rs) start PostgreSQL servers of their own and run in the plain `cargo test` too.
# Extra arguments (a filter, say) go to one cargo test run instead of the two below.
set -euo pipefail
cd "$(dirname "$0")/../.."

PGBIN=$(tests/pg_bindir.sh)
# Every test creates a database of its own (about 7 MB of catalogs, copied through the WAL): some 2 GB and 60,000
# files by the end, whose writing and removal took minutes of a slow disk. In memory (/dev/shm, when it has room)
# that is free. What this suite checks is the nodes' behaviour over a real PostgreSQL, not PostgreSQL's own
# durability; the outage tests in tests/api/cluster.rs start servers of their own on disk.
PGDATA=
if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')" -gt $((4 * 1024 * 1024)) ] 2>/dev/null; then
  PGDATA=$(mktemp -d -p /dev/shm service-auth-cluster.XXXXXX)
fi
[ -n "$PGDATA" ] || PGDATA=$(mktemp -d)
AS=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$PGDATA"
  AS=(runuser -u postgres --)
fi
stop_pg() { "${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$PGDATA"; }
trap stop_pg EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$PGDATA" -A trust -U postgres >/dev/null
PGPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Each test gets its own database and two nodes with a handful of connections each: room for the parallel tests.
"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA -c max_connections=400 -c fsync=on" start >/dev/null

export SERVICE_AUTH_TEST_POSTGRES="postgres://postgres@127.0.0.1:$PGPORT/postgres"
if [ $# -gt 0 ]; then cargo test --test api -- "$@"; exit; fi
# Left out: the modules whose tests never start the harness's TestServer, so they run here exactly as in the cargo
# suite (which runs them): tests/api/cluster.rs starts PostgreSQL servers of its own; the others run the binary as
# a child process on its embedded store, or as a reader of the guides does (docs, whose one in-process test reads
# the reference). Checked below, so that a TestServer test added to one of them is not left out unseen.
ELSEWHERE="cluster docs crash first_run refused_origins reload setup test_command upgrade"
SKIPS=()
for m in $ELSEWHERE; do
  case $m in
    cluster | docs) ;;
    *) if grep -q 'TestServer::' "tests/api/$m.rs"; then
         echo "tests/cluster/run.sh: tests/api/$m.rs starts a TestServer now: take it out of ELSEWHERE" >&2; exit 2
       fi ;;
  esac
  SKIPS+=(--skip "api::$m::")
done
# Eight tests at a time (they mostly wait); the timing tests (*same_time*) afterwards, one at a time.
status=0
RUST_TEST_THREADS=${RUST_TEST_THREADS:-8} cargo test --test api -- --skip same_time "${SKIPS[@]}" || status=1
cargo test --test api same_time -- --test-threads=1 || status=1
exit $status
