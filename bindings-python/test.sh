#!/usr/bin/env bash
# Builds and installs the Python binding into bindings-python/.venv from the repo's own
# files, then runs its pytest suite (shared scenario vectors included) against the
# loopback upstream. Usage: bash bindings-python/test.sh [pytest args...]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# One target triple for every build in the workspace, so bindings share compiled dependencies.
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu

cargo build -p harness-upstream
# The typed-client tests generate a package from a spec of their own with `harness codegen`.
cargo build -p harness-cli
export HARNESS_UPSTREAM_BIN="${HARNESS_UPSTREAM_BIN:-$ROOT/target/$CARGO_BUILD_TARGET/debug/harness-upstream}"

PY="${PYTHON:-python3}"
VENV="$ROOT/bindings-python/.venv"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
# pip >= 21.3 builds a local directory in place, which maturin needs to find the workspace.
"$VENV/bin/python" -m pip install --quiet --upgrade 'pip>=23'
"$VENV/bin/python" -m pip install --quiet pytest -r bindings-python/tests/requirements.txt
# Tests use a debug build (faster to compile, shares the workspace's debug artifacts);
# a plain `pip install ./bindings-python` builds release, as the benchmark wants.
MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}" \
    "$VENV/bin/python" -m pip install --force-reinstall --no-deps ./bindings-python

cd "$ROOT/bindings-python"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
