#!/usr/bin/env bash
# Builds the service-auth binary the suites run, and prints its path. SERVICE_AUTH_PROFILE names cargo's profile:
# release when a suite runs alone (the figures the console and load suites print are the release build's); ./test
# sets test, the binary `cargo test` has just built (nothing is compiled again; its dependencies are optimised, see
# Cargo.toml), which saves a second build of every dependency. `./test --release` runs the
# suites on the release build instead. CARGO_TARGET_DIR, when set, is where it builds (`./test --size` builds the
# release binary in target/size/, beside the suites' cargo commands).
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
binary=${CARGO_TARGET_DIR:-$ROOT/target}/$dir/service-auth
# What `cargo install` puts on a server is this build, and the README promises at most 25 MB (its debug
# information is dropped, see Cargo.toml's [profile.release]; BENCHMARKS.md, "The 25 MB won back"): a dependency or
# a profile change that grows it beyond stops here. CI builds it (`./test --size`).
if [ "$profile" = release ]; then
  size=$(wc -c <"$binary" | tr -d ' ')
  limit=25000000
  if [ "$size" -gt "$limit" ]; then
    echo "tests/binary.sh: the release binary is $size bytes, above the $limit this guard allows (Cargo.toml's [profile.release])" >&2
    exit 1
  fi
  echo "tests/binary.sh: the release binary is $size bytes, within the $limit this guard allows" >&2
fi
echo "$binary"
