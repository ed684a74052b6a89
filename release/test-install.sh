#!/usr/bin/env bash
# Proves that the artifacts in dist/ (release/build.sh) install and work with no Rust toolchain:
# cargo and rustc are taken off PATH (every PATH entry holding either is dropped) and
# CARGO_HOME / RUSTUP_HOME point at empty folders. Then, each against the loopback test upstream:
#   - the wheel goes into a fresh venv (pip --no-index: no build, no download) and runs the
#     Python quickstart;
#   - the two npm tarballs go into a fresh folder (npm --offline: no registry) and the Node
#     quickstart runs as CommonJS and as ESM, importing 'harness-sdk';
#   - the jar, POM, sources and javadoc are installed into the local Maven repository and a
#     tiny Maven project (release/smoke/jvm) that depends on dev.harness:harness-sdk runs;
#   - when dist/ holds the x86_64 musl artifacts (the full matrix of release/build.sh): in a root
#     filesystem with no glibc in it (release/musl-root.sh: musl 1.2.5, CPython built for musl,
#     Bun's musl build as the N-API runtime), the musllinux wheel goes into a venv with pip and
#     runs the Python quickstart, and @harness-sdk/linux-x64-musl with harness-sdk runs the Node
#     quickstart (CommonJS and ESM) under Bun.
# The upstream binary is built first (a program of the test kit, not part of what is installed);
# for the musl root, a static musl build of it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
version="$(python3 release/version.py)"
[ -f "dist/harness-sdk-$version.tgz" ] || { echo "no artifacts in dist/: run bash release/build.sh first" >&2; exit 1; }
cargo build -q -p harness-upstream
export HARNESS_UPSTREAM_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness-upstream"
musl_wheel="dist/harness_sdk-$version-cp39-abi3-musllinux_1_2_x86_64.whl"
musl_npm="dist/harness-sdk-linux-x64-musl-$version.tgz"
musl_root=""
if [ -f "$musl_wheel" ] && [ -f "$musl_npm" ]; then
  [ "$(id -u)" = 0 ] || { echo "the musl check runs in a chroot: run as root" >&2; exit 1; }
  musl_root="$(bash release/musl-root.sh | tail -1)"
  # A static build of the test upstream: it runs in any root filesystem.
  PATH="$root/target/release-tools/bin:$PATH" CARGO_TARGET_DIR="$root/target/dist" \
    cargo zigbuild -q -p harness-upstream --target x86_64-unknown-linux-musl
  static_upstream="$root/target/dist/x86_64-unknown-linux-musl/debug/harness-upstream"
fi

work="$(mktemp -d)"
cleanup() {
  for m in "$work/musl/proc" "$work/musl/dev"; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT

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
"$work/venv/bin/pip" install -q --no-index "dist/harness_sdk-$version-cp39-abi3-manylinux2014_x86_64.whl"
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
if [ -n "$musl_root" ]; then
  echo "== musl (x86_64): the musllinux wheel and @harness-sdk/linux-x64-musl in a root with no glibc"
  m="$work/musl"
  cp -a "$musl_root" "$m"
  mount --bind /dev "$m/dev"
  mount -t proc proc "$m/proc"
  cp "$static_upstream" "$m/usr/local/bin/harness-upstream"
  # The CA bundle every Alpine image carries (ca-certificates-bundle), at Alpine's path: the
  # HTTP client loads the system's roots when it is built, even for plain-HTTP upstreams.
  mkdir -p "$m/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$m/etc/ssl/certs/"
  cp "$musl_wheel" "$m/tmp/"
  # (where the repository has it: the quickstart finds its default upstream from its own path)
  mkdir -p "$m/tmp/examples/python" && cp examples/python/quickstart.py "$m/tmp/examples/python/"
  in_musl() { HARNESS_UPSTREAM_BIN=/usr/local/bin/harness-upstream HOME=/tmp chroot "$m" "$@"; }
  in_musl /usr/local/bin/python3 -m venv --without-pip /tmp/venv
  pip_wheel="$(cd "$m/tmp" && ls pip-*.whl)"
  in_musl /tmp/venv/bin/python "/tmp/$pip_wheel/pip" install -q --no-index --disable-pip-version-check "/tmp/$(basename "$musl_wheel")"
  in_musl /tmp/venv/bin/python -c 'import harness, sys; print("harness", harness.__version__, "on", sys.implementation.name, "from", harness.__file__)'
  in_musl /tmp/venv/bin/python /tmp/examples/python/quickstart.py
  # The root has no npm: npm installs here for musl (--libc=musl; --force, since npm checks a
  # tarball named on the command line against this glibc machine), and Bun runs the result.
  mkdir -p "$m/tmp/node"
  (cd "$m/tmp/node" && npm init -y >/dev/null &&
    npm install --offline --no-audit --no-fund --force --os=linux --cpu=x64 --libc=musl "$root/$musl_npm" "$root/dist/harness-sdk-$version.tgz" >/dev/null)
  [ -e "$m/tmp/node/node_modules/@harness-sdk/linux-x64-musl/harness-sdk.linux-x64-musl.node" ] || { echo "npm did not install @harness-sdk/linux-x64-musl" >&2; exit 1; }
  cp "$work/node/quickstart.cjs" "$work/node/quickstart.mjs" "$m/tmp/node/"
  in_musl /usr/local/bin/bun /tmp/node/quickstart.cjs
  in_musl /usr/local/bin/bun /tmp/node/quickstart.mjs
  umount "$m/proc" "$m/dev"
fi
echo "== the release artifacts installed and worked without Rust"
