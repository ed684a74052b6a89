#!/usr/bin/env bash
# Runs the arm64 (aarch64, glibc) release artifacts of dist/ under qemu-user, in an arm64 Debian 12
# root filesystem made with debootstrap from Debian's packages (python3, nodejs 18, OpenJDK 17):
#   - the manylinux2014_aarch64 wheel into a venv with pip (--no-index), then the Python quickstart;
#   - harness-sdk with @harness-sdk/linux-arm64-gnu (npm --cpu=arm64, offline), then the Node
#     quickstart as CommonJS and ESM;
#   - the Java smoke project (release/smoke/jvm) against the jar's linux-aarch64/ library: compiled
#     by Maven on this machine (bytecode is the same everywhere), run by the arm64 JVM.
# (npm --force: npm checks a tarball named on the command line against this x86_64 machine.)
# Each runs against the test upstream, a static x86_64 build (runs natively beside the emulated
# programs, in the same root). Needs root (chroot, binfmt_misc), Debian's qemu-user-static,
# binfmt-support and debootstrap (installed here with apt when missing), and dist/ from
#   RELEASE_TARGETS="x86_64-gnu aarch64-gnu" bash release/build.sh   (or the full matrix)
# Outside CI: debootstrap's second stage under emulation takes about 10 minutes; the root is
# cached in target/arm64-root (delete it to rebuild). The runs take 2-4 minutes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="$(python3 release/version.py)"
wheel="dist/harness_sdk-$version-cp39-abi3-manylinux2014_aarch64.whl"
npm_arm64="dist/harness-sdk-linux-arm64-gnu-$version.tgz"
repo="dist/maven/dev/harness/harness-sdk/$version"
for f in "$wheel" "$npm_arm64" "dist/harness-sdk-$version.tgz" "$repo/harness-sdk-$version.jar"; do
  [ -f "$f" ] || { echo "missing $f: run RELEASE_TARGETS=\"x86_64-gnu aarch64-gnu\" bash release/build.sh first" >&2; exit 1; }
done
python3 -c 'import sys, zipfile; sys.exit("linux-aarch64/libharness_kotlin.so" not in zipfile.ZipFile(sys.argv[1]).namelist())' "$repo/harness-sdk-$version.jar" || { echo "the jar has no linux-aarch64/ library" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (chroot, binfmt_misc)" >&2; exit 1; }
if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null || ! command -v update-binfmts >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static binfmt-support debootstrap >/dev/null
fi
# The kernel runs arm64 programs through qemu once binfmt_misc knows qemu-aarch64.
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
started=$SECONDS

rootfs="$root/target/arm64-root"
if [ ! -x "$rootfs/usr/bin/node" ] || [ ! -x "$rootfs/usr/bin/python3" ] || [ ! -e "$rootfs/usr/lib/jvm" ]; then
  echo "== debootstrap: an arm64 Debian 12 root (python3, nodejs, openjdk-17-jre-headless)"
  rm -rf "$rootfs.tmp"
  debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,nodejs,openjdk-17-jre-headless,ca-certificates \
    bookworm "$rootfs.tmp" http://deb.debian.org/debian >"$root/target/arm64-debootstrap.log" 2>&1 ||
    { tail -20 "$root/target/arm64-debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"
  mv "$rootfs.tmp" "$rootfs"
  echo "   made in $((SECONDS - started)) s"
fi

echo "== the static test upstream (x86_64 musl) and the Java smoke project's classes"
PATH="$root/target/release-tools/bin:$PATH" CARGO_TARGET_DIR="$root/target/dist" \
  cargo zigbuild -q -p harness-upstream --target x86_64-unknown-linux-musl
mvn -B -ntp -q install:install-file -Dfile="$repo/harness-sdk-$version.jar" -DpomFile="$repo/harness-sdk-$version.pom"
mvn -B -ntp -q -f release/smoke/jvm/pom.xml compile dependency:copy-dependencies -DoutputDirectory=target/deps

work="$rootfs/tmp/harness-arm64"
cleanup() {
  for m in "$rootfs/proc" "$rootfs/dev"; do mountpoint -q "$m" && umount "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work/node" "$work/java"
mountpoint -q "$rootfs/dev" || mount --bind /dev "$rootfs/dev"
mountpoint -q "$rootfs/proc" || mount -t proc proc "$rootfs/proc"
cp "$root/target/dist/x86_64-unknown-linux-musl/debug/harness-upstream" "$work/harness-upstream"
cp "$wheel" examples/python/quickstart.py "$work/"
cp -r release/smoke/jvm/target/classes release/smoke/jvm/target/deps "$work/java/"
in_arm64() { HARNESS_UPSTREAM_BIN=/tmp/harness-arm64/harness-upstream HOME=/tmp chroot "$rootfs" "$@"; }
echo "   machine in the root: $(in_arm64 uname -m) (host: $(uname -m))"

echo "== Python (arm64): the manylinux2014_aarch64 wheel in a fresh venv"
t=$SECONDS
in_arm64 python3 -m venv /tmp/harness-arm64/venv
in_arm64 /tmp/harness-arm64/venv/bin/pip install -q --no-index --disable-pip-version-check "/tmp/harness-arm64/$(basename "$wheel")"
in_arm64 /tmp/harness-arm64/venv/bin/python -c 'import harness, platform; print("harness", harness.__version__, "on", platform.machine(), "from", harness.__file__)'
(cd "$work" && in_arm64 /tmp/harness-arm64/venv/bin/python /tmp/harness-arm64/quickstart.py)
echo "   $((SECONDS - t)) s"

echo "== Node (arm64): harness-sdk and @harness-sdk/linux-arm64-gnu"
t=$SECONDS
(cd "$work/node" && npm init -y >/dev/null &&
  npm install --offline --no-audit --no-fund --force --os=linux --cpu=arm64 --libc=glibc "$root/$npm_arm64" "$root/dist/harness-sdk-$version.tgz" >/dev/null)
sed "s|'../../bindings-node'|'harness-sdk'|" examples/node/quickstart.cjs >"$work/node/quickstart.cjs"
sed "s|'../../bindings-node/index.mjs'|'harness-sdk'|" examples/node/quickstart.mjs >"$work/node/quickstart.mjs"
in_arm64 node -p '`node ${process.version} on ${process.arch}`'
in_arm64 node /tmp/harness-arm64/node/quickstart.cjs
in_arm64 node /tmp/harness-arm64/node/quickstart.mjs
echo "   $((SECONDS - t)) s"

echo "== JVM (arm64): the smoke project against the jar's linux-aarch64/ library"
t=$SECONDS
in_arm64 sh -c 'java -version 2>&1 | head -1'
in_arm64 java -cp "/tmp/harness-arm64/java/classes:$(cd "$work/java/deps" && ls *.jar | sed 's|^|/tmp/harness-arm64/java/deps/|' | paste -sd:)" smoke.Main
echo "   $((SECONDS - t)) s"
echo "== the arm64 artifacts installed and worked under qemu ($((SECONDS - started)) s)"
