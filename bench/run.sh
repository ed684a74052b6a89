#!/usr/bin/env bash
# Prints the benchmark tables: the Rust core vs plain reqwest; with --all, then the
# Python, Node and JVM rows (each binding built in release, as a user would install it),
# and one summary table of every binding against its peer and the core, also written as
# JSON under bench/results/<stamp>/ (summary.json and each language's rounds).
# Env: BENCH_ROUNDS (default 5), BENCH_HUGE (the in-flight row, default 10000; 0 = skip),
# BENCH_README=1 to regenerate the README's summary section from this run; BENCH_SUMMARY_ONLY=1
# (with BENCH_OVERHEAD=0) runs only what the summary needs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
cargo build -q --release -p harness-bench -p harness-upstream -p harness-cli
# 10,000 in flight needs 10,000 sockets on each side (client and upstream).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
results="bench/results/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
export BENCH_RESULTS="$results"
# Log lines go to stderr; the table goes to stdout.
# The core's row runs with the log line off, as every binding's does.
BENCH_LOG="${BENCH_LOG:-0}" BENCH_JSON="$results/core.json" target/x86_64-unknown-linux-gnu/release/harness-bench 2>/dev/null
if [ "${BENCH_SUMMARY_ONLY:-0}" != 1 ]; then
  echo
  # Shared state: local and Redis rate-limit checks (starts redis-server if installed).
  target/x86_64-unknown-linux-gnu/release/harness-state-bench 2>/dev/null
  echo; target/x86_64-unknown-linux-gnu/release/harness-semantic-bench 2>/dev/null
  echo; target/x86_64-unknown-linux-gnu/release/harness-gateway-bench 2>/dev/null
fi

if [ "${1:-}" = "--all" ]; then
  echo; echo "== Python"
  [ -x bench/.venv/bin/python ] || python3 -m venv bench/.venv
  bench/.venv/bin/pip install -q ./bindings-python httpx aiohttp requests
  bench/.venv/bin/python bench/python_bench.py --json "$results/python.json"
  echo; echo "== Node"
  node bindings-node/scripts/build.js >/dev/null
  (cd bench && npm install --no-audit --no-fund >/dev/null)
  BENCH_JSON="$results/node.json" node bench/node_bench.mjs 2>/dev/null
  echo; echo "== JVM"
  BENCH_JSON="$PWD/$results/jvm.json" bash bench/jvm/run.sh
  echo; echo "== Summary"
  python3 bench/summary.py "$results" ${BENCH_README:+--readme README.md}
fi
