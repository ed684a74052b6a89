#!/usr/bin/env bash
# Where the time goes at c=64: perf samples of the whole machine (the caller, the engine's
# threads, the loopback upstream) while one binding runs only its Harness row at c=64, grouped
# by thread and library, then the hottest symbols. Prints a markdown section per binding and
# keeps perf's data under bench/results/<stamp>/profile/.
# Usage: bash bench/profile.sh [core] [python] [node] [jvm]   (default: all four)
# Needs perf (Debian's linux-perf) and the release builds `bash bench/run.sh --all` makes.
# Env: PROFILE_REQUESTS (default 100000), PROFILE_FREQ (samples/s per CPU, default 999).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
rel=target/x86_64-unknown-linux-gnu/release
n="${PROFILE_REQUESTS:-100000}"
freq="${PROFILE_FREQ:-999}"
out="bench/results/$(date -u +%Y%m%d-%H%M%S)/profile"
mkdir -p "$out"
# The report also goes to profile.md beside perf's data.
exec > >(tee "$out/profile.md")
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(core python node jvm)

record() { # NAME COMMAND...: perf samples every CPU while COMMAND runs
  local name="$1"; shift
  perf record -q -a -F "$freq" -o "$out/$name.data" -- "$@" >"$out/$name.out" 2>"$out/$name.err" || {
    echo "$name: the run failed (see $out/$name.err)" >&2; return 1; }
  echo "## $name at c=64 ($n requests)"
  echo
  echo "By thread and library (share of all samples; the rest is other processes and idle):"
  echo
  echo '```'
  perf report -i "$out/$name.data" --stdio --sort comm,dso --percent-limit 1.5 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
  echo '```'
  echo
  echo "Hottest symbols:"
  echo
  echo '```'
  perf report -i "$out/$name.data" --stdio --sort dso,sym --percent-limit 0.7 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
  echo '```'
  echo
}

for b in "${which[@]}"; do
  case "$b" in
    core) BENCH_ONLY=harness BENCH_CONCURRENCY=64 BENCH_HUGE=0 BENCH_ROUNDS=1 BENCH_OVERHEAD=0 BENCH_LOG=0 \
            BENCH_REQUESTS="$n" record core "$rel/harness-bench" ;;
    python) record python bench/.venv/bin/python bench/python_bench.py --only harness.AsyncClient@64 \
              --requests "$n" --rounds 1 --huge 0 ;;
    node) BENCH_ONLY=harness BENCH_CONCURRENCY=64 BENCH_HUGE=0 BENCH_ROUNDS=1 BENCH_REQUESTS="$n" \
            record node node bench/node_bench.mjs ;;
    jvm) (cd bench/jvm && mvn -B -ntp -q compile >/dev/null)
         BENCH_ONLY="harness (suspend)" BENCH_CONCURRENCY=64 BENCH_HUGE=0 BENCH_ROUNDS=1 BENCH_SCALE="$(python3 -c "print($n/30000)")" \
            record jvm bash -c 'cd bench/jvm && mvn -B -ntp -q exec:exec' ;;
    *) echo "unknown binding: $b (core, python, node, jvm)" >&2; exit 2 ;;
  esac
done
echo "perf data: $out"
