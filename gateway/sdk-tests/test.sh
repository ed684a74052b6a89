#!/usr/bin/env bash
# The official OpenAI SDKs (Python `openai`, Node `openai`) and Anthropic's Python SDK
# (`anthropic`, through /v1/messages) pointed at `harness serve`, against
# the loopback upstream's simulated providers. Installs everything from this folder's own pins:
# requirements.txt into .venv, package.json/package-lock.json into node_modules.
# Usage: bash gateway/sdk-tests/test.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
cargo build -p harness-cli -p harness-upstream
export HARNESS_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness"
export HARNESS_UPSTREAM_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness-upstream"

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"

cd "$here"
npm install --no-audit --no-fund

echo "== the OpenAI Python SDK through the gateway"
"$venv/bin/python" -m pytest -q -p no:cacheprovider test_openai_python.py
echo "== the Anthropic Python SDK through the gateway (/v1/messages)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider test_anthropic_python.py
echo "== the OpenAI Node SDK through the gateway"
node --test --test-concurrency=1 openai_node.test.mjs
