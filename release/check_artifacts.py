"""Checks the release artifacts in dist/ and prints their names, sizes and SHA-256 sums.

    python3 release/check_artifacts.py VERSION [TARGET...]   (targets: release/build.sh's; default x86_64-gnu)

Checked for each: the version; license, description and README (what each registry shows);
the Python and Node engine ranges; that the npm package never compiles at install time; the
wheels' abi3 manylinux2014/musllinux_1_2 tags, one per target; every platform package's
os/cpu/libc; the jar's library per architecture; the POM's dependencies (runtime ones
compile-scoped, test ones not leaked) and the fields a public repository requires (url, scm,
licenses, developers); that each shipped native library is for its target's machine, stripped,
under 16 MB, exports only its entry points, and, for the gnu targets, needs no glibc symbol
version above 2.17, for the musl targets no glibc at all. Exits 1 listing every failure; prints
each native library's size and highest glibc symbol version.
"""

import hashlib
import json
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "dist"
# 16 MB: the libraries grew to 19.8-20.8 MB with the caches (hnsw_rs) and the fleet config; fat
# LTO and one codegen unit (Cargo.toml's release profile) and hnsw_rs without its C interface
# (vendor/hnsw_rs) brought them to 13-15 MB. The cap catches debug info left in (100+ MB), a
# doubled build, or a dependency that brings megabytes.
MAX_NATIVE = 16 * 1024 * 1024
# What each library may export (its entry points); anything else is another crate's
# `#[no_mangle]` C function leaking out (hnsw_rs's 64, before vendor/hnsw_rs), which can clash
# with a symbol of the same name in another library of the host process.
EXPORTS = {
    "python": ("PyInit__native",),
    "node": ("napi_register_module_v1",),
    "jvm": ("harness_kotlin_", "uniffi_harness_kotlin_", "ffi_harness_kotlin_", "UNIFFI_META_HARNESS_KOTLIN_", "UNIFFI_META_NAMESPACE_HARNESS_KOTLIN"),
}
# release/build.sh's targets: wheel platform tag, npm platform, JNA folder (None: not in the jar),
# readelf's machine name, libc.
TARGETS = {
    "x86_64-gnu": ("manylinux2014_x86_64", "linux-x64-gnu", "linux-x86-64", "X86-64", "glibc"),
    "aarch64-gnu": ("manylinux2014_aarch64", "linux-arm64-gnu", "linux-aarch64", "AArch64", "glibc"),
    "x86_64-musl": ("musllinux_1_2_x86_64", "linux-x64-musl", None, "X86-64", "musl"),
    "aarch64-musl": ("musllinux_1_2_aarch64", "linux-arm64-musl", None, "AArch64", "musl"),
}
ALL_NPM = [t[1] for t in TARGETS.values()]
# manylinux2014's floor (PEP 599); zig links the gnu builds against its glibc stubs of that version.
GLIBC_FLOOR = (2, 17)
failures: list = []
# name -> (size, highest GLIBC_ version or "none (musl)"), for the table printed at the end
natives: dict = {}


def need(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)


def readelf(path: Path, *args: str) -> str:
    return subprocess.run(["readelf", "-W", *args, str(path)], capture_output=True, text=True, check=True).stdout


def stripped(name: str, data: bytes, binding: str, target: str) -> None:
    """A native library for TARGET: its machine, under 16 MB, no DWARF sections left, only its own
    entry points exported, and its libc floor (glibc 2.17 symbol versions at most; musl: no glibc)."""
    machine, libc = TARGETS[target][3], TARGETS[target][4]
    need(len(data) < MAX_NATIVE, f"{name}: {len(data) / 1e6:.1f} MB, over {MAX_NATIVE / 2**20:.0f} MB")
    tmp = ROOT / "target" / "release-stage" / "check.so"
    tmp.write_bytes(data)
    header = readelf(tmp, "-h")
    need(re.search(rf"Machine:\s+.*{re.escape(machine)}", header) is not None, f"{name}: not a {machine} library ({header.split('Machine:')[1].splitlines()[0].strip() if 'Machine:' in header else '?'})")
    sections = readelf(tmp, "-S")
    need(".debug_info" not in sections, f"{name}: not stripped (has .debug_info)")
    need(".gnu_debuglink" in sections, f"{name}: no .gnu_debuglink to its split-off debug info")
    exported = []
    for line in readelf(tmp, "--dyn-syms").splitlines():
        cols = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(cols) >= 8 and cols[0].rstrip(":").isdigit() and cols[6] != "UND" and cols[4] in ("GLOBAL", "WEAK"):
            exported.append(cols[7].split("@")[0])
    foreign = [sym for sym in exported if not sym.startswith(EXPORTS[binding])]
    need(not foreign, f"{name}: exports {len(foreign)} symbols not its own, e.g. {foreign[:5]}")
    need(len(exported) > 0, f"{name}: exports nothing")
    dynamic = readelf(tmp, "-d")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", readelf(tmp, "-V"))}
    highest = max(versions) if versions else None
    if libc == "glibc":
        need(highest is not None and highest <= GLIBC_FLOOR, f"{name}: needs glibc {'.'.join(map(str, highest)) if highest else '?'}, above {'.'.join(map(str, GLIBC_FLOOR))}")
        need("libc.so.6" in needed, f"{name}: does not link glibc (NEEDED {needed})")
        floor = "GLIBC_" + ".".join(map(str, highest)) if highest else "?"
    else:
        glibc_libs = [n for n in needed if re.fullmatch(r"lib(c|m|pthread|dl|rt|util)\.so\.\d+|ld-linux.*", n)]
        need(not versions and not glibc_libs, f"{name}: a musl library that needs glibc ({sorted(versions)[-1:] or glibc_libs})")
        need(any(n.startswith("libc.") for n in needed), f"{name}: does not link a libc (NEEDED {needed})")
        floor = "none (musl)"
    natives[name] = (len(data), floor)


def metadata_text(text: str, where: str, version: str) -> None:
    meta = Parser().parsestr(text)
    need(meta["Name"] == "harness-sdk", f"{where}: Name is {meta['Name']}")
    need(meta["Version"] == version, f"{where}: Version is {meta['Version']}")
    need(bool(meta["Summary"]), f"{where}: no Summary")
    lic = (meta.get("License-Expression") or meta.get("License") or "")
    need("Apache-2.0" in lic, f"{where}: no Apache-2.0 license ({lic!r})")
    need(meta["Requires-Python"] == ">=3.9", f"{where}: Requires-Python is {meta['Requires-Python']}")
    need(meta.get("Description-Content-Type", "").startswith("text/markdown"), f"{where}: the README is not markdown")
    need(len(meta.get_payload() or "") > 500, f"{where}: the README (long description) is missing")


def check_python(version: str, targets: list) -> None:
    wheels = {w.name: w for w in DIST.glob(f"harness_sdk-{version}-*.whl")}
    expected = {f"harness_sdk-{version}-cp39-abi3-{TARGETS[t][0]}.whl": t for t in targets}
    need(set(wheels) == set(expected), f"wheels {sorted(wheels)}, expected {sorted(expected)}")
    for wname, target in expected.items():
        w = wheels.get(wname)
        if w is None:
            continue
        with zipfile.ZipFile(w) as z:
            names = z.namelist()
            metadata_text(z.read(f"harness_sdk-{version}.dist-info/METADATA").decode(), w.name, version)
            tags = [l.split(":", 1)[1].strip() for l in z.read(f"harness_sdk-{version}.dist-info/WHEEL").decode().splitlines() if l.startswith("Tag:")]
            need(tags == [f"cp39-abi3-{TARGETS[target][0]}"], f"{w.name}: WHEEL tags {tags}")
            need("harness/py.typed" in names and "harness/_types.py" in names and "harness/_native.pyi" in names, f"{w.name}: no type information")
            need("harness/_openapi.py" in names, f"{w.name}: harness/_openapi.py (the runtime of `harness codegen`'s Python clients) is missing")
            so = [n for n in names if n.startswith("harness/_native") and n.endswith(".so")]
            need(so == ["harness/_native.abi3.so"], f"{w.name}: native libraries {so}")
            for n in so:
                stripped(f"{w.name}:{n}", z.read(n), "python", target)
        need(w.stat().st_size < MAX_NATIVE, f"{w.name} is over {MAX_NATIVE / 2**20:.0f} MB")
    sdist = DIST / f"harness_sdk-{version}.tar.gz"
    need(sdist.exists(), f"no sdist {sdist.name}")
    if sdist.exists():
        with tarfile.open(sdist) as t:
            names = t.getnames()
            metadata_text(t.extractfile(f"harness_sdk-{version}/PKG-INFO").read().decode(), sdist.name, version)
            need(any(n.endswith("core/src/lib.rs") for n in names), f"{sdist.name}: the core's sources are missing")
            need(any(n.endswith("python/harness/_openapi.py") for n in names), f"{sdist.name}: harness/_openapi.py is missing")


def npm_json(tgz: Path) -> tuple:
    with tarfile.open(tgz) as t:
        pkg = json.loads(t.extractfile("package/package.json").read())
        files = {m.name: m for m in t.getmembers()}
        readme = t.extractfile("package/README.md").read().decode() if "package/README.md" in files else ""
        blobs = {n: t.extractfile(m).read() for n, m in files.items() if n.endswith(".node")}
    return pkg, set(files), readme, blobs


def check_node(version: str, targets: list) -> None:
    main = DIST / f"harness-sdk-{version}.tgz"
    need(main.exists(), f"missing npm tarball {main.name}")
    if not main.exists():
        return
    pkg, files, readme, blobs = npm_json(main)
    need(pkg["name"] == "harness-sdk" and pkg["version"] == version, f"{main.name}: {pkg['name']}@{pkg['version']}")
    need(pkg.get("license") == "Apache-2.0", f"{main.name}: license {pkg.get('license')}")
    need(bool(pkg.get("description")), f"{main.name}: no description")
    need(pkg.get("engines", {}).get("node") == ">=18", f"{main.name}: engines.node {pkg.get('engines')}")
    scripts = pkg.get("scripts", {})
    need(not any(k in scripts for k in ("preinstall", "install", "postinstall")), f"{main.name}: an install script ({scripts})")
    want = {f"@harness-sdk/{p}": version for p in ALL_NPM}
    need(pkg.get("optionalDependencies") == want, f"{main.name}: optionalDependencies {pkg.get('optionalDependencies')}, expected {want}")
    need(not blobs, f"{main.name}: carries a native module")
    js = {"package/index.js", "package/index.mjs", "package/index.d.ts", "package/index.d.mts", "package/types.d.ts", "package/errors.js", "package/errors.d.ts"}
    # harness-sdk/openapi: the runtime of `harness codegen`'s TypeScript clients, in the exports map.
    js |= {"package/openapi.js", "package/openapi.mjs", "package/openapi.d.ts"}
    need("./openapi" in pkg.get("exports", {}), f"{main.name}: exports has no ./openapi")
    need(js <= files, f"{main.name}: JS files missing: {sorted(js - files)}")
    need(len(readme) > 500, f"{main.name}: README missing")
    for target in targets:
        platform = TARGETS[target][1]
        plat = DIST / f"harness-sdk-{platform}-{version}.tgz"
        need(plat.exists(), f"missing npm tarball {plat.name}")
        if not plat.exists():
            continue
        pkg, files, readme, blobs = npm_json(plat)
        cpu = {"linux-x64": "x64", "linux-arm64": "arm64"}[platform.rsplit("-", 1)[0]]
        libc = {"gnu": "glibc", "musl": "musl"}[platform.rsplit("-", 1)[1]]
        need(pkg["name"] == f"@harness-sdk/{platform}" and pkg["version"] == version, f"{plat.name}: {pkg['name']}@{pkg['version']}")
        need(pkg.get("os") == ["linux"] and pkg.get("cpu") == [cpu] and pkg.get("libc") == [libc], f"{plat.name}: os/cpu/libc {pkg.get('os')}/{pkg.get('cpu')}/{pkg.get('libc')}")
        need(pkg.get("license") == "Apache-2.0" and bool(pkg.get("description")), f"{plat.name}: license or description")
        need(pkg.get("engines", {}).get("node") == ">=18", f"{plat.name}: engines.node")
        need(bool(readme), f"{plat.name}: README missing")
        need(pkg.get("main") == f"harness-sdk.{platform}.node", f"{plat.name}: main is {pkg.get('main')}")
        need(list(blobs) == [f"package/harness-sdk.{platform}.node"], f"{plat.name}: native modules {list(blobs)}")
        for n, data in blobs.items():
            stripped(f"{plat.name}:{n}", data, "node", target)


def check_jvm(version: str, targets: list) -> None:
    repo = DIST / "maven" / "dev" / "harness" / "harness-sdk" / version
    jar, pom = repo / f"harness-sdk-{version}.jar", repo / f"harness-sdk-{version}.pom"
    sources, javadoc = repo / f"harness-sdk-{version}-sources.jar", repo / f"harness-sdk-{version}-javadoc.jar"
    for f in (jar, pom, sources, javadoc):
        need(f.exists(), f"missing {f.relative_to(DIST)}")
        need(f.exists() and (repo / (f.name + ".sha1")).exists(), f"missing {f.name}.sha1")
    if not all(f.exists() for f in (jar, pom, sources, javadoc)):
        return
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        libs = sorted(n for n in names if n.endswith(".so"))
        expected = sorted(f"{TARGETS[t][2]}/libharness_kotlin.so" for t in targets if TARGETS[t][2])
        need(libs == expected, f"{jar.name}: native libraries {libs}, expected {expected}")
        for t in targets:
            lib = f"{TARGETS[t][2]}/libharness_kotlin.so"
            if TARGETS[t][2] and lib in names:
                stripped(f"{jar.name}:{lib}", z.read(lib), "jvm", t)
        props = z.read("dev/harness/harness-sdk.properties").decode() if "dev/harness/harness-sdk.properties" in names else ""
        need(f"version={version}" in props, f"{jar.name}: harness-sdk.properties says {props.strip()!r}")
        need("dev/harness/HarnessClient.class" in names, f"{jar.name}: no HarnessClient")
    with zipfile.ZipFile(sources) as z:
        need("dev/harness/HarnessClient.kt" in z.namelist(), f"{sources.name}: no HarnessClient.kt")
    with zipfile.ZipFile(javadoc) as z:
        need("index.html" in z.namelist(), f"{javadoc.name}: no index.html")
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(pom).getroot()
    text = lambda path: (root.findtext(path, namespaces=ns) or "").strip()
    need(text("m:groupId") == "dev.harness" and text("m:artifactId") == "harness-sdk" and text("m:version") == version, f"{pom.name}: coordinates")
    need(bool(text("m:description")) and bool(text("m:name")), f"{pom.name}: name or description")
    need(text("m:licenses/m:license/m:name") == "Apache-2.0", f"{pom.name}: license")
    # What Maven Central requires of a POM besides coordinates, name, description and licenses.
    need(text("m:url").startswith("https://"), f"{pom.name}: no url")
    need(text("m:licenses/m:license/m:url").startswith("https://"), f"{pom.name}: the license has no url")
    need(bool(text("m:developers/m:developer/m:name")), f"{pom.name}: no developers")
    need(text("m:scm/m:url").startswith("https://") and text("m:scm/m:connection").startswith("scm:git:"), f"{pom.name}: no scm url/connection")
    deps = {}
    for d in root.findall("m:dependencies/m:dependency", ns):
        deps[d.findtext("m:artifactId", namespaces=ns)] = (d.findtext("m:scope", default="compile", namespaces=ns), d.findtext("m:optional", default="false", namespaces=ns))
    for runtime in ("kotlin-stdlib", "kotlinx-coroutines-core", "jna", "slf4j-api"):
        need(deps.get(runtime, ("missing",))[0] == "compile" and deps[runtime][1] == "false", f"{pom.name}: {runtime} is {deps.get(runtime)}")
    for test_only in ("junit-jupiter", "logback-classic", "opentelemetry-sdk", "json"):
        need(deps.get(test_only, ("test",))[0] == "test", f"{pom.name}: {test_only} leaks as {deps.get(test_only)}")


def main() -> None:
    version, targets = sys.argv[1], sys.argv[2:] or ["x86_64-gnu"]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        sys.exit(f"unknown targets {unknown} (known: {', '.join(TARGETS)})")
    check_python(version, targets)
    check_node(version, targets)
    check_jvm(version, targets)
    print(f"\n| native library | size | highest glibc symbol |\n|---|---:|---|")
    for name, (size, floor) in sorted(natives.items()):
        print(f"| {name} | {size / 1e6:.2f} MB | {floor} |")
    print(f"\n| artifact | size | SHA-256 |\n|---|---:|---|")
    for f in sorted(p for p in DIST.rglob("*") if p.is_file() and not p.name.endswith(".sha1") and p.name != "SHA256SUMS"):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        print(f"| {f.relative_to(DIST)} | {f.stat().st_size / 1e6:.2f} MB | {digest} |")
    if failures:
        print("\nrelease checks failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"\nall release checks passed for {version} ({', '.join(targets)})")


if __name__ == "__main__":
    main()
