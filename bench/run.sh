#!/usr/bin/env bash
# Prints the benchmark tables: the Rust core vs plain reqwest, then each binding's rows when built.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p harness-bench
# Log lines go to stderr; the table goes to stdout.
target/x86_64-unknown-linux-gnu/release/harness-bench 2>/dev/null
