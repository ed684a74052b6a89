#!/usr/bin/env bash
# Proves that the artifacts in dist/ (release/build.sh) install and work with no Rust toolchain:
# cargo and rustc are taken off PATH (every PATH entry holding either is dropped) and
# CARGO_HOME / RUSTUP_HOME point at empty folders. Then, each against the loopback test upstream:
#   - the wheel goes into a fresh venv (pip --no-index: no build, no download) and runs the
#     Python quickstart;
#   - the two npm tarballs go into a fresh folder (npm --offline: no registry) and the Node
#     quickstart runs as CommonJS and as ESM, importing 'harness-sdk';
#   - the jar, POM, sources and javadoc are installed into the local Maven repository and a
#     tiny Maven project (release/smoke/jvm) that depends on dev.harness:harness-sdk runs.
# The upstream binary is built first (a program of the test kit, not part of what is installed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
version="$(python3 release/version.py)"
[ -f "dist/harness-sdk-$version.tgz" ] || { echo "no artifacts in dist/: run bash release/build.sh first" >&2; exit 1; }
cargo build -q -p harness-upstream
export HARNESS_UPSTREAM_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness-upstream"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# No Rust from here on.
clean_path=""
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -z "$d" ] && continue
  if [ -e "$d/cargo" ] || [ -e "$d/rustc" ] || [ -e "$d/rustup" ]; then continue; fi
  clean_path="${clean_path:+$clean_path:}$d"
done
export PATH="$clean_path"
export CARGO_HOME="$work/empty-cargo" RUSTUP_HOME="$work/empty-rustup"
mkdir -p "$CARGO_HOME" "$RUSTUP_HOME"
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  echo "cargo or rustc is still reachable: $(command -v cargo rustc)" >&2
  exit 1
fi
echo "== no Rust toolchain on PATH (cargo, rustc: not found)"

echo "== Python: the wheel in a fresh venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index "dist/harness_sdk-$version"-*.whl
"$work/venv/bin/python" -c 'import harness; print("harness", harness.__version__, "from", harness.__file__)'
(cd "$work" && "$work/venv/bin/python" "$root/examples/python/quickstart.py")
# The checked-in typed clients (harness codegen) import their runtime from the installed wheel.
(cd "$root/examples/openapi/python" && "$work/venv/bin/python" -c 'import orders, payments, users; print("typed clients:", orders.OrdersClient.__name__, payments.PaymentsClient.__name__, users.UsersClient.__name__)')

echo "== Node: the npm tarballs in a fresh folder (offline)"
mkdir -p "$work/node"
cd "$work/node"
npm init -y >/dev/null
npm install --offline --no-audit --no-fund "$root/dist/harness-sdk-linux-x64-gnu-$version.tgz" "$root/dist/harness-sdk-$version.tgz"
[ -e node_modules/harness-sdk/harness-sdk.node ] && { echo "the JS package built a native module at install" >&2; exit 1; }
# The repository's quickstarts, importing the package as an application would.
sed "s|'../../bindings-node'|'harness-sdk'|" "$root/examples/node/quickstart.cjs" >quickstart.cjs
sed "s|'../../bindings-node/index.mjs'|'harness-sdk'|" "$root/examples/node/quickstart.mjs" >quickstart.mjs
grep -q "require('harness-sdk')" quickstart.cjs && grep -q "from 'harness-sdk'" quickstart.mjs
node quickstart.cjs
node quickstart.mjs
# The checked-in TypeScript clients (harness codegen) require their runtime, harness-sdk/openapi, from the installed package.
cp -r "$root/examples/openapi/typescript/orders" "$root/examples/openapi/typescript/users" "$root/examples/openapi/typescript/payments" .
node -e "const o = require('./orders'); import('./orders/index.mjs').then((e) => { if (e.OrdersClient !== o.OrdersClient) process.exit(1); console.log('typed clients:', o.OrdersClient.name, require('./users').UsersClient.name, require('./payments').PaymentsClient.name) })"
cd "$root"

echo "== JVM: the jar from dist/ in the local Maven repository, used by a Maven project"
repo="dist/maven/dev/harness/harness-sdk/$version"
mvn -B -ntp -q install:install-file -Dfile="$repo/harness-sdk-$version.jar" -DpomFile="$repo/harness-sdk-$version.pom" \
  -Dsources="$repo/harness-sdk-$version-sources.jar" -Djavadoc="$repo/harness-sdk-$version-javadoc.jar"
installed="$HOME/.m2/repository/dev/harness/harness-sdk/$version/harness-sdk-$version.jar"
[ "$(sha256sum <"$installed")" = "$(sha256sum <"$repo/harness-sdk-$version.jar")" ] || { echo "the installed jar is not dist's" >&2; exit 1; }
mvn -B -ntp -q -f release/smoke/jvm/pom.xml compile exec:exec
echo "== the release artifacts installed and worked without Rust"
