#!/usr/bin/env bash
# Builds and tests the Node binding from a fresh checkout: npm install (which compiles the
# native module with cargo), the shared test upstream, then `node --test` and the examples.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# One target dir for every binding (see .cargo/config.toml and shared TOOLCHAIN notes).
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu

cargo build -p harness-upstream
# The typed-client tests generate a client from test/fixtures/hostile.yaml with the CLI.
cargo build -p harness-cli
export HARNESS_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness"
# The binding's own unit tests (the view conversion, input rules); CI's workspace run excludes it.
cargo test -q -p harness-node --lib
export HARNESS_UPSTREAM_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness-upstream"

cd "$root/bindings-node"
# `npm install` runs the package's install script (scripts/build.js: cargo build + copy).
# Tests use a debug build; a user's `npm install ./bindings-node` builds release.
HARNESS_NODE_PROFILE="${HARNESS_NODE_PROFILE:-debug}" npm install --no-audit --no-fund

# The examples, against the embedded upstream (the TS one is typechecked with tsc first).
node "$root/examples/node/quickstart.mjs"
node "$root/examples/node/quickstart.cjs"
bash "$root/bindings-node/run-ts-example.sh"

# Last, so the runner's summary closes the output.
node --test --test-concurrency=1 test/
