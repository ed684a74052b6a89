#!/usr/bin/env bash
# Before vs after a refactor, in one run: Harness at BASE_REV against this working tree, per binding.
#
#   bash bench/compare.sh 9b4a466   # builds: ~35 min with cold target dirs on 2 cores; measuring: ~5 min
#   BENCH_SCALE=0.2 BENCH_ROUNDS=2 bash bench/compare.sh 9b4a466   # a quick look
#
# 1. Checks BASE_REV out into a temporary worktree (/tmp/harness-base-XXXX, removed at exit) and
#    builds, in release and one build at a time, for the base and for this tree: the core's bench
#    binary (bench/src/main.rs; the base gets this tree's bench/ sources, so both run the same
#    benchmark code), the Python wheel (one venv each), the Node native module with a copy of the
#    JS package, and the JVM jar (one Maven repository each) with bench/jvm compiled against it.
#    Everything lands in BENCH_COMPARE_DIR/{base,current}; nothing is written into either tree
#    except the base worktree and bench/results/.
# 2. bench/compare.py starts one loopback upstream and runs, per binding, the existing benchmark
#    programs (harness rows only, one round per process) for base and current alternately,
#    BENCH_ROUNDS times: base first in odd rounds, current first in even ones.
# 3. Prints one table (req/s medians, the median current/base ratio of the paired rounds with its
#    range, CPU ms per 1,000 requests, PASS when the median ratio >= 0.97) and writes
#    bench/results/<stamp>/compare.json (every round) and compare.log (the benches' output).
#    Exits 1 when a row fails or could not be measured.
#
# Rows: core c=64; Python AsyncClient c=64 and Client (sync) c=1; Node c=64 and c=1;
# JVM suspend c=64, CompletableFuture c=64 and suspend c=1.
#
# Env: BENCH_ROUNDS (5), BENCH_SCALE (1: requests per cell, e.g. 100,000 for the core at c=64,
# 50,000 for Python's AsyncClient; compare.py lists them),
# CARGO_TARGET_DIR (the current tree's cargo target dir, default target/),
# BENCH_BASE_TARGET (the base's, default /tmp/harness-base-target),
# BENCH_COMPARE_DIR (the builds, default /tmp/harness-compare),
# BENCH_COMPARE_ONLY (comma list of core,python,node,jvm), BENCH_SKIP_BUILD=1 (measure the builds
# of the previous run again). Needs cargo, python3, node, a JDK 17 and mvn on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base_rev="${1:-9b4a466}"
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
triple="$CARGO_BUILD_TARGET"
cur_target="${CARGO_TARGET_DIR:-$root/target}"
base_target="${BENCH_BASE_TARGET:-/tmp/harness-base-target}"
work="${BENCH_COMPARE_DIR:-/tmp/harness-compare}"
only="${BENCH_COMPARE_ONLY:-core,python,node,jvm}"
unset CARGO_TARGET_DIR
want() { [[ ",$only," == *",$1,"* ]]; }
say() { echo "== $*" >&2; }
t_start=$SECONDS

# Each build_* makes one binding of one tree: $side (base or current), $tree, $target (its cargo
# target dir), $out ($work/$side) and $rel (its release dir) are set by build().
build_core() {
  say "[$side] core bench (cargo build --release -p harness-bench)"
  local pkgs=(-p harness-bench --bin harness-bench)
  [ "$side" = current ] && pkgs+=(-p harness-upstream --bin harness-upstream)
  if ! (cd "$tree" && CARGO_TARGET_DIR="$target" cargo build -q --release "${pkgs[@]}"); then
    [ "$side" = base ] || return 1
    say "[base] this tree's bench/src does not build against the base; using the base's own (it starts its own upstream)"
    git -C "$tree" checkout -q -- bench
    (cd "$tree" && CARGO_TARGET_DIR="$target" cargo build -q --release "${pkgs[@]}")
  fi
  cp "$rel/harness-bench" "$out/harness-bench"
  if [ "$side" = current ]; then cp "$rel/harness-upstream" "$work/harness-upstream"; fi
}

build_python() {
  say "[$side] Python wheel (pip wheel ./bindings-python, release) into $out/venv"
  [ -x "$out/venv/bin/python" ] || python3 -m venv "$out/venv"
  rm -rf "$out/wheel"
  (cd "$tree" && CARGO_TARGET_DIR="$target" "$out/venv/bin/pip" wheel -q --no-deps --no-cache-dir -w "$out/wheel" ./bindings-python)
  "$out/venv/bin/pip" install -q --no-deps --force-reinstall "$out"/wheel/*.whl
}

build_node() {
  # What bindings-node/scripts/build.js does, with the module put next to a copy of the JS
  # package instead of into the tree.
  say "[$side] Node native module (cargo build --release -p harness-node) into $out/node"
  (cd "$tree/bindings-node" && CARGO_TARGET_DIR="$target" cargo build -q --release -p harness-node --lib)
  rm -rf "$out/node" && mkdir -p "$out/node"
  tar -C "$tree/bindings-node" --exclude=./node_modules --exclude=./src --exclude=./test --exclude=./target \
    --exclude='*.node' -cf - . | tar -C "$out/node" -xf -
  cp "$rel/libharness_node.so" "$out/node/harness-sdk.node"
}

build_jvm() {
  # The tree's pom, run from a copy so that Maven's target/ is ours; its own Maven repository
  # (seeded from ~/.m2 without any harness-sdk) so the two jars never overwrite each other.
  say "[$side] JVM jar (mvn install -Dmaven.test.skip) into $out/m2, bench/jvm into $out/jvm-bench"
  if [ ! -d "$out/m2" ]; then
    mkdir -p "$out/m2"
    if [ -d "$HOME/.m2/repository" ]; then cp -r "$HOME/.m2/repository/." "$out/m2/"; fi
    rm -rf "$out/m2/dev/harness"
  fi
  rm -rf "$out/kotlin" "$out/jvm-bench" && mkdir -p "$out/kotlin/src"
  cp "$tree/bindings-kotlin/pom.xml" "$out/kotlin/"
  cp -r "$tree/bindings-kotlin/src/main" "$out/kotlin/src/"
  CARGO_TARGET_DIR="$target" mvn -B -ntp -q -f "$out/kotlin/pom.xml" -Dmaven.repo.local="$out/m2" \
    -Dharness.root="$tree" -Dharness.target.dir="$rel" -Dmaven.test.skip=true install >&2
  mvn -B -ntp -q -f "$root/bench/jvm/pom.xml" -Dmaven.repo.local="$out/m2" -Dbench.build.dir="$out/jvm-bench" compile \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath -Dmdep.outputFile="$out/jvm-bench/classpath.txt" >&2
}

# Builds tree $2 into $work/$1 with cargo target dir $3, one binding after the other. A binding
# that fails to build is marked (FAILED-<binding>) and left out of the measurement; the others go on.
build() {
  local side="$1" tree="$2" target="$3" out="$work/$1"
  local rel="$target/$triple/release" b rc
  mkdir -p "$out"
  for b in core python node jvm; do
    rm -f "$out/FAILED-$b"
    # The current core build also makes the shared upstream.
    want "$b" || { [ "$b" = core ] && [ "$side" = current ]; } || continue
    set +e
    (set -e; "build_$b")
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
      echo "the $side tree's $b build failed (exit $rc)" >"$out/FAILED-$b"
      say "[$side] $b: build FAILED (exit $rc); its rows will show ERROR"
    fi
  done
}

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  base_sha="$(git -C "$root" rev-parse --verify "$base_rev^{commit}")"
  wt="$(mktemp -u /tmp/harness-base-XXXX)"
  say "base: $base_rev ($base_sha) in $wt"
  git -C "$root" worktree add -q --detach "$wt" "$base_sha"
  trap 'git -C "$root" worktree remove --force "$wt" 2>/dev/null || true' EXIT
  mkdir -p "$work/base" "$work/current"
  if [[ "$base_sha" == "$base_rev"* ]]; then echo "$base_rev"; else echo "$base_rev (${base_sha:0:7})"; fi >"$work/base/REV"
  cur="$(git -C "$root" rev-parse --short HEAD)"
  [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ] && cur="$cur + working tree"
  echo "$cur" >"$work/current/REV"
  # The same benchmark code on both sides: this tree's bench/ sources in the base worktree.
  rm -rf "$wt/bench/src" && cp -r "$root/bench/src" "$root/bench/Cargo.toml" -t "$wt/bench/"
  build current "$root" "$cur_target"
  [ -x "$work/harness-upstream" ] && [ ! -e "$work/current/FAILED-core" ] || { say "no upstream: the current core does not build"; exit 1; }
  build base "$wt" "$base_target"
  say "built both trees in $(( (SECONDS - t_start) / 60 )) min"
fi

results="$root/bench/results/$(date -u +%Y%m%d-%H%M%S)"
t_measure=$SECONDS
status=0
python3 "$root/bench/compare.py" --work "$work" --upstream-bin "$work/harness-upstream" --out "$results" \
  --rounds "${BENCH_ROUNDS:-5}" --scale "${BENCH_SCALE:-1}" --only "$only" || status=$?
say "measured in $(( (SECONDS - t_measure) / 60 )) min $(( (SECONDS - t_measure) % 60 )) s; total $(( (SECONDS - t_start) / 60 )) min"
exit "$status"
