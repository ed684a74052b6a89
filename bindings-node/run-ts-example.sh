#!/usr/bin/env bash
# Typechecks and runs examples/node/quickstart.ts: tsc (from this package's devDependencies), then node.
# Needs `npm install` in bindings-node and `cargo build -p harness-upstream` first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/.ts-out"
rm -rf "$out"
trap 'rm -rf "$out"' EXIT
# .ts-out sits two levels below the repo root, as examples/node does, so the example's
# relative import of ../../bindings-node resolves the same way after compilation.
(cd "$here" && ./node_modules/.bin/tsc --strict --target es2022 --module commonjs --moduleResolution node10 \
  --esModuleInterop --skipLibCheck --types node --outDir "$out" ../examples/node/quickstart.ts)
node "$out/quickstart.js"
