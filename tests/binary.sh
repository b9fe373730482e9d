#!/usr/bin/env bash
# Builds the service-auth binary the suites run, and prints its path. SERVICE_AUTH_PROFILE names cargo's profile:
# release when a suite runs alone (the figures the console and load suites print are the release build's); ./test
# sets test, the binary `cargo test` has just built (nothing is compiled again; its dependencies are optimised, see
# Cargo.toml), which saves a second build of every dependency. `./test --release` runs the
# suites on the release build instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
profile=${SERVICE_AUTH_PROFILE:-release}
if [ "$profile" = test ]; then
  # Exactly what `cargo test` builds: the binary its integration test runs, with the features the dev-dependencies
  # add to shared dependencies (tokio's test-util, hyper's client, ...). A `cargo build --profile test` resolves
  # features without them and compiles every such dependency, and the crate, once more (two minutes, fresh).
  cargo test --no-run --quiet --locked --manifest-path "$ROOT/Cargo.toml" --test api >&2
else
  cargo build --quiet --locked --profile "$profile" --manifest-path "$ROOT/Cargo.toml" --bin service-auth >&2
fi
case $profile in dev | test) dir=debug ;; bench) dir=release ;; *) dir=$profile ;; esac
binary=$ROOT/target/$dir/service-auth
# What `cargo install` puts on a server is this build. The target is 25 MB (its debug information is dropped, see
# Cargo.toml's [profile.release]); SAML's XML signatures took it to 26.1 MB (README, BENCHMARKS.md "SAML and the
# 25 MB"), so the guard stands at 27 MB until that is won back: a dependency or a profile change that grows it
# further stops here.
if [ "$profile" = release ]; then
  size=$(wc -c <"$binary" | tr -d ' ')
  limit=27000000
  if [ "$size" -gt "$limit" ]; then
    echo "tests/binary.sh: the release binary is $size bytes, above the $limit this guard allows (Cargo.toml's [profile.release])" >&2
    exit 1
  fi
fi
echo "$binary"
