#!/usr/bin/env bash
# Runs every test: the Rust core (unit tests and the shared scenario vectors),
# then each language binding's suite against the same vectors and upstream.
# Each binding's test.sh installs what it needs from the project's own files.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
export CARGO_TERM_COLOR=never

echo "== Rust: core, upstream, cli"
cargo test --workspace --exclude harness-python --exclude harness-node --exclude uniffi-bindgen --exclude harness-bench
cargo build -p harness-upstream

for binding in python node kotlin; do
  echo "== ${binding} binding"
  bash "bindings-${binding}/test.sh"
done
echo "== all test suites passed"
