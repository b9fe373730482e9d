#!/usr/bin/env bash
# Kill -9 loop: N random kills of a real server under concurrent writes (default 1,000), release build.
# Prints: "crash: N kills, W acknowledged writes (...), lost 0, in T". Any loss fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
CRASH_ITERATIONS="${1:-1000}" cargo test --release --test api crash::kill_9 -- --nocapture 2>&1 | grep -E '^crash:|test result|panicked'
