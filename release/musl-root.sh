#!/usr/bin/env bash
# Builds a musl root filesystem with no glibc in it, in which release/test-install.sh runs the
# musl wheel's and the musl npm package's quickstarts (chroot). An Alpine root would be the
# natural choice, but Alpine's servers (dl-cdn.alpinelinux.org) are not reachable from the
# machines this project builds on; every part here comes from a registry that is:
#   - musl 1.2.5, the libc and its loader: Debian 13's `musl` package (deb.debian.org). Debian
#     12's musl 1.2.3 cannot load Alpine-built libraries (no DT_RELR support before 1.2.4).
#   - CPython 3.11.2: built here from Debian's source tarball with musl-gcc (Debian's
#     musl-tools), zlib 1.2.13 (Debian's source too) linked in statically for pip.
#   - a JavaScript runtime that loads N-API modules: Bun's musl build (npm: @oven/bun-linux-x64-musl).
#     Node.js publishes no musl build to npm. Bun needs libstdc++ and libgcc_s built for musl;
#     Alpine's, as PyPI's musllinux wheel of pyzmq carries them (auditwheel vendors them).
# Every download is checked against its SHA-256. x86_64 only. Takes about 6 minutes on 2 cores
# (CPython's build); the result is cached in target/musl-root (delete it to rebuild).
#   bash release/musl-root.sh        prints the root's path
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/target/musl-root"
if [ -x "$out/usr/local/bin/python3" ] && [ -x "$out/usr/local/bin/bun" ]; then
  echo "$out"
  exit 0
fi
command -v musl-gcc >/dev/null || {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null
  else
    echo "musl-gcc is needed (apt-get install musl-tools)" >&2
    exit 1
  fi
}
work="$root/target/musl-root.build"
rm -rf "$work" "$out.tmp"
mkdir -p "$work" "$out.tmp"
cd "$work"

fetch() { # URL SHA256
  local f="${1##*/}"
  curl -sSfL --retry 3 -o "$f" "$1"
  echo "$2  $f" | sha256sum -c --quiet - || { echo "$f: SHA-256 mismatch" >&2; exit 1; }
}
fetch "http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.5-3.1~deb13u1_amd64.deb" fd4231e1c189c0ebe01182747f83817593fefa7f6b690c484410646288b60058
fetch http://deb.debian.org/debian/pool/main/p/python3.11/python3.11_3.11.2.orig.tar.gz 2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
fetch http://deb.debian.org/debian/pool/main/z/zlib/zlib_1.2.13.dfsg.orig.tar.bz2 71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1
python3 -m pip download -q --no-deps --only-binary=:all: --platform musllinux_1_2_x86_64 --python-version 3.11 pyzmq==27.3.0 -d .
grep pyzmq "$root/release/musl-root.sha256" | sha256sum -c --quiet -
npm pack --silent @oven/bun-linux-x64-musl@1.4.5 >/dev/null
grep bun "$root/release/musl-root.sha256" | sha256sum -c --quiet -

echo "== musl 1.2.5 (Debian 13)" >&2
dpkg-deb -x musl_1.2.5-*.deb musl
mkdir -p "$out.tmp/lib" "$out.tmp/usr/lib" "$out.tmp/usr/local/bin" "$out.tmp/tmp" "$out.tmp/dev" "$out.tmp/proc" "$out.tmp/etc"
cp -L musl/usr/lib/x86_64-linux-musl/libc.so "$out.tmp/lib/ld-musl-x86_64.so.1"
ln -s ld-musl-x86_64.so.1 "$out.tmp/lib/libc.musl-x86_64.so.1"
chmod 1777 "$out.tmp/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$out.tmp/etc/passwd"
printf '127.0.0.1 localhost\n' >"$out.tmp/etc/hosts"

echo "== zlib 1.2.13 (static, musl-gcc)" >&2
tar xjf zlib_*.tar.bz2
(cd zlib-1.2.13* && CC=musl-gcc CFLAGS="-O2 -fPIC" ./configure --static --prefix="$work/zlib" >/dev/null && make -s -j2 >/dev/null && make -s install >/dev/null)

echo "== CPython 3.11.2 (musl-gcc)" >&2
tar xzf python3.11_*.orig.tar.gz
# musl-gcc is Debian's gcc with musl's headers and libraries: asked for its multiarch it still
# answers x86_64-linux-gnu, which CPython's configure finds at odds with the musl it compiles
# for, and from which setup.py adds glibc's header folder. This wrapper answers the target's
# own, x86_64-linux-musl (where Debian keeps musl's headers and libraries).
printf '#!/bin/sh\ncase "$*" in *-print-multiarch*) echo x86_64-linux-musl; exit 0 ;; esac\nexec musl-gcc "$@"\n' >musl-cc
chmod +x musl-cc
(cd Python-3.11.2 &&
  CC="$work/musl-cc" CPPFLAGS="-I$work/zlib/include" LDFLAGS="-L$work/zlib/lib" \
    ./configure --prefix=/usr/local --without-ensurepip --disable-test-modules >"$work/python-build.log" 2>&1 &&
  make -j2 >>"$work/python-build.log" 2>&1 &&
  make install DESTDIR="$out.tmp" >>"$work/python-build.log" 2>&1) || { tail -30 "$work/python-build.log" >&2; exit 1; }
[ -n "$(ls "$out.tmp"/usr/local/lib/python3.11/lib-dynload/zlib.*.so 2>/dev/null)" ] || {
  grep -A12 'modules were not\|Failed to build' "$work/python-build.log" >&2
  echo "CPython for musl was built without its zlib module" >&2
  exit 1
}
ln -sf python3.11 "$out.tmp/usr/local/bin/python3"
# pip, to install the wheel as a user would (ensurepip's bundled wheel, zlib for the wheel's zip).
(cd Python-3.11.2 && cp Lib/ensurepip/_bundled/pip-*.whl "$out.tmp/tmp/")
chroot "$out.tmp" /usr/local/bin/python3 -c 'import zlib, json, asyncio; print("musl python", __import__("sys").version.split()[0])' >&2

echo "== Bun 1.4.5 (musl) with Alpine's libstdc++ and libgcc_s" >&2
tar xzf oven-bun-linux-x64-musl-1.4.5.tgz
cp package/bin/bun "$out.tmp/usr/local/bin/bun"
python3 - "$out.tmp/usr/lib" <<'EOF'
import glob, os, sys, zipfile
dst = sys.argv[1]
with zipfile.ZipFile(glob.glob("pyzmq-27.3.0-*.whl")[0]) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if n.startswith("pyzmq.libs/") and base.startswith(("libstdc++-", "libgcc_s-")):
            open(os.path.join(dst, base), "wb").write(z.read(n))
            os.chmod(os.path.join(dst, base), 0o755)
            link = "libstdc++.so.6" if base.startswith("libstdc++") else "libgcc_s.so.1"
            os.symlink(base, os.path.join(dst, link))
EOF
chroot "$out.tmp" /usr/local/bin/bun --version >/dev/null
# No glibc anywhere in the root.
if find "$out.tmp" -name 'libc.so.6' -o -name 'ld-linux-*' | grep -q .; then
  echo "the musl root holds glibc" >&2
  exit 1
fi
rm -rf "$out"
mv "$out.tmp" "$out"
rm -rf "$work"
echo "$out"
