#!/usr/bin/env bash
# Prints the benchmark tables: the Rust core vs plain reqwest; with --all, then the
# Python, Node and JVM rows (each binding built in release, as a user would install it).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
cargo build -q --release -p harness-bench -p harness-upstream -p harness-cli
# Log lines go to stderr; the table goes to stdout.
target/x86_64-unknown-linux-gnu/release/harness-bench 2>/dev/null
echo
# Shared state: local and Redis rate-limit checks (starts redis-server if installed).
target/x86_64-unknown-linux-gnu/release/harness-state-bench 2>/dev/null
echo; target/x86_64-unknown-linux-gnu/release/harness-gateway-bench 2>/dev/null

if [ "${1:-}" = "--all" ]; then
  echo; echo "== Python"
  [ -x bench/.venv/bin/python ] || python3 -m venv bench/.venv
  bench/.venv/bin/pip install -q ./bindings-python httpx aiohttp requests
  bench/.venv/bin/python bench/python_bench.py
  echo; echo "== Node"
  node bindings-node/scripts/build.js >/dev/null
  (cd bench && npm install --no-audit --no-fund >/dev/null)
  node bench/node_bench.mjs 2>/dev/null
  echo; echo "== JVM"
  bash bench/jvm/run.sh
fi
