#!/usr/bin/env bash
# Runs every test: the Rust core (unit tests and the shared scenario vectors),
# then each language binding's suite against the same vectors and upstream.
# Each binding's test.sh installs what it needs from the project's own files.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
export CARGO_TERM_COLOR=never
# One-shot builds gain nothing from incremental caches, which take gigabytes of disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
df -h . | tail -1 | awk '{print "== disk: " $4 " free of " $2}'

# The credential tests share tokens through a real redis-server on a loopback port.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing redis-server (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is needed by the tests: install it (e.g. apt-get install -y redis-server)" >&2
    exit 1
  fi
fi

echo "== Rust: core, upstream, cli"
cargo test --workspace --exclude harness-python --exclude harness-node --exclude uniffi-bindgen --exclude harness-bench
cargo build -p harness-upstream

echo "== generated host types match the core's schema (harness types --check); no import cycles in any crate"
cargo run -q -p harness-cli -- types --check
python3 tests/imports.py --self-test --check

echo "== shipped alert rules and dashboard queries (promtool)"
bash tests/check_observability.sh

for binding in python node kotlin; do
  echo "== ${binding} binding"
  bash "bindings-${binding}/test.sh"
done
echo "== typed clients from the public OpenAPI corpus (harness codegen, mypy --strict, pyright --strict)"
bindings-python/.venv/bin/python tests/openapi_corpus.py
# --lang kotlin: the corpus's clients are compiled by OpenApiCorpusTest in the kotlin binding's suite above.
echo "== typed clients from the public OpenAPI corpus (harness codegen --lang typescript, tsc --strict)"
python3 tests/openapi_corpus_ts.py
echo "== gateway through the OpenAI and Anthropic SDKs"
bash gateway/sdk-tests/test.sh
echo "== the admin console in Debian's Chromium (gateway/ui-tests: Selenium against harness serve)"
bash gateway/ui-tests/test.sh
echo "== fault drill: harness chaos on examples/chaos.yaml (the CLI, embedded upstream)"
cargo build -q -p harness-cli
drill="$(target/$CARGO_BUILD_TARGET/debug/harness chaos --config examples/chaos.yaml --requests 1000 --seed 42)"
echo "$drill"
grep -q "^| success |" <<<"$drill"
grep -q "^| faults injected: " <<<"$drill"

echo "== the fleet's config across languages: 3 Python clients, 2 Node clients and a gateway on one redis-server (tests/fleet_mixed.py)"
bindings-python/.venv/bin/python tests/fleet_mixed.py

echo "== chaos soak, short form (bench/soak.py through the Python binding)"
HARNESS_UPSTREAM_BIN="$PWD/target/$CARGO_BUILD_TARGET/debug/harness-upstream" \
  bindings-python/.venv/bin/python bench/soak.py --requests "${SOAK_REQUESTS:-50000}"
df -h . | tail -1 | awk '{print "== disk: " $4 " free of " $2}'
echo "== release artifacts for x86_64 glibc 2.17: wheel, sdist, npm tarballs, Maven jar (release/build.sh), installed and run without Rust (release/test-install.sh)"
# CI builds the x86_64 gnu target only (the step stays under 15 minutes); the full matrix
# (aarch64, musl) is `bash release/build.sh` with release/test-install.sh and release/test-arm64.sh.
RELEASE_TARGETS="${RELEASE_TARGETS:-x86_64-gnu}" bash release/build.sh
bash release/test-install.sh
echo "== all test suites passed"
