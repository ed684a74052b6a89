#!/usr/bin/env bash
# Builds the release artifacts of every binding into dist/, in release mode, for this platform
# (linux x86-64, glibc), and checks them:
#   dist/harness_sdk-V-cp39-abi3-manylinux_*_x86_64.whl   one wheel for CPython 3.9+ (auditwheel show)
#   dist/harness_sdk-V.tar.gz                              the sdist (built once from source here)
#   dist/harness-sdk-V.tgz                                 npm: the JS package, no install script
#   dist/harness-sdk-linux-x64-gnu-V.tgz                   npm: @harness-sdk/linux-x64-gnu, the prebuilt .node
#   dist/maven/dev/harness/harness-sdk/V/                  a Maven repository: jar (native library
#                                                          inside, under JNA's linux-x86-64/), POM,
#                                                          -sources.jar, -javadoc.jar (Dokka)
#   dist/debug/                                            the native libraries' debug info, split off
# and prints each artifact's name, size and SHA-256. Every shipped native library is stripped;
# its debug info is kept in dist/debug/ (linked by .gnu_debuglink).
# Env: RELEASE_SDIST_CHECK=0 skips building the sdist from source (it takes minutes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
rel="$root/target/$CARGO_BUILD_TARGET/release"

version="$(python3 release/version.py)"
echo "== harness $version: building the release artifacts into dist/"
rm -rf dist
mkdir -p dist/debug
stage="$root/target/release-stage"
rm -rf "$stage"
mkdir -p "$stage"

# split_debug IN OUT NAME: OUT is IN stripped, NAME.debug (in dist/debug) its debug info.
split_debug() {
  objcopy --only-keep-debug "$1" "dist/debug/$3.debug"
  objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="dist/debug/$3.debug" "$1" "$2"
}

# Tools for the Python artifacts, in their own venv (maturin, auditwheel, wheel).
tools="$root/target/release-tools"
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/pip" install -q 'maturin>=1.9.4,<2' auditwheel wheel

echo "== Python: abi3 wheel and sdist"
(cd bindings-python && "$tools/bin/maturin" build --release --out "$stage/wheel" --quiet)
raw="$(ls "$stage"/wheel/harness_sdk-"$version"-*.whl)"
"$tools/bin/python" -m wheel unpack "$raw" -d "$stage/unpacked" >/dev/null
so="$(ls "$stage"/unpacked/harness_sdk-"$version"/harness/_native*.so)"
split_debug "$so" "$so.stripped" harness_python_native.so
mv "$so.stripped" "$so"
"$tools/bin/python" -m wheel pack "$stage/unpacked/harness_sdk-$version" -d dist >/dev/null
wheel="$(ls dist/harness_sdk-"$version"-*.whl)"
"$tools/bin/auditwheel" show "$wheel" | tee "$stage/auditwheel.txt"
grep -q 'platform tag: "manylinux_' "$stage/auditwheel.txt" || {
  echo "auditwheel: $wheel is not manylinux-consistent" >&2
  exit 1
}
# (cargo's "manifest has no documentation, homepage or repository" notes are not errors)
(cd bindings-python && "$tools/bin/maturin" sdist --out "$root/dist" 2>&1 | { grep -v 'no documentation, homepage or repository\|= note: see https://doc.rust-lang.org\|^  |$' || true; })
if [ "${RELEASE_SDIST_CHECK:-1}" != 0 ]; then
  echo "== Python: the sdist builds from source"
  # The shared target dir keeps the dependencies compiled once.
  PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$root/target" "$tools/bin/pip" wheel -q --no-deps --no-build-isolation dist/harness_sdk-"$version".tar.gz -w "$stage/sdist-wheel" 2>&1 | tail -5 ||
    { echo "the sdist did not build" >&2; exit 1; }
  ls "$stage"/sdist-wheel/harness_sdk-"$version"-*.whl >/dev/null
fi

echo "== Node: the JS package and @harness-sdk/linux-x64-gnu"
cargo build -q --release -p harness-node --lib
platform=linux-x64-gnu
pdir="$stage/npm/$platform"
mdir="$stage/npm/harness-sdk"
mkdir -p "$pdir" "$mdir"
split_debug "$rel/libharness_node.so" "$pdir/harness-sdk.$platform.node" "harness-sdk.$platform.node"
node release/npm-packages.js "$version" "$platform" "$pdir" "$mdir"
(cd "$pdir" && npm pack --quiet --pack-destination "$root/dist" >/dev/null)
(cd "$mdir" && npm pack --quiet --pack-destination "$root/dist" >/dev/null)

echo "== JVM: jar, POM, sources and javadoc, as a Maven repository"
cargo build -q --release -p harness-kotlin -p uniffi-bindgen
mkdir -p "$stage/jvm-native"
split_debug "$rel/libharness_kotlin.so" "$stage/jvm-native/libharness_kotlin.so" libharness_kotlin.so
(cd bindings-kotlin && mvn -B -ntp -q -Prelease package -DskipTests "-Dharness.native.dir=$stage/jvm-native")
repo="dist/maven/dev/harness/harness-sdk/$version"
mkdir -p "$repo"
for f in "harness-sdk-$version.jar" "harness-sdk-$version-sources.jar" "harness-sdk-$version-javadoc.jar"; do
  cp "bindings-kotlin/target/$f" "$repo/$f"
done
cp bindings-kotlin/pom.xml "$repo/harness-sdk-$version.pom"
(cd "$repo" && for f in *; do sha1sum "$f" | cut -d' ' -f1 >"$f.sha1"; done)

echo "== checks"
python3 release/check_artifacts.py "$version"
