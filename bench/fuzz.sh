#!/usr/bin/env bash
# Runs every property-based fuzz target (core/src/fuzz.rs) for FUZZ_SECONDS each (default
# 600), in release, one after the other, and prints each target's case count. A failure
# prints the minimal input; make it a regression test before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
export FUZZ_SECONDS="${FUZZ_SECONDS:-600}"
echo "fuzzing each target for ${FUZZ_SECONDS} s"
cargo test -q --release -p harness-core --lib fuzz:: -- --nocapture --test-threads 1 2>&1 | grep -oE "fuzz [a-z_]+: [0-9]+ cases|panicked.*|minimal input.*|test result.*" || true
