"""Checks the release artifacts in dist/ and prints their names, sizes and SHA-256 sums.

    python3 release/check_artifacts.py VERSION

Checked for each: the version; license, description and README (what each registry shows);
the Python and Node engine ranges; that the npm package never compiles at install time; the
wheel's abi3 manylinux tag; the POM's dependencies (runtime ones compile-scoped, test ones
not leaked); that each shipped native library is stripped, under 16 MB and exports only its entry points. Exits 1 listing
every failure.
"""

import hashlib
import json
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
failures: list = []


def need(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)


def stripped(name: str, data: bytes, binding: str) -> None:
    """A native library: under 16 MB, no DWARF sections left, and only its own entry points exported."""
    need(len(data) < MAX_NATIVE, f"{name}: {len(data) / 1e6:.1f} MB, over {MAX_NATIVE / 2**20:.0f} MB")
    tmp = ROOT / "target" / "release-stage" / "check.so"
    tmp.write_bytes(data)
    sections = subprocess.run(["objdump", "-h", str(tmp)], capture_output=True, text=True).stdout
    need(".debug_info" not in sections, f"{name}: not stripped (has .debug_info)")
    need(".gnu_debuglink" in sections, f"{name}: no .gnu_debuglink to its split-off debug info")
    dynamic = subprocess.run(["nm", "-D", "--defined-only", str(tmp)], capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in dynamic.splitlines() if line.strip()]
    foreign = [sym for sym in exported if not sym.startswith(EXPORTS[binding])]
    need(not foreign, f"{name}: exports {len(foreign)} symbols not its own, e.g. {foreign[:5]}")
    need(len(exported) > 0, f"{name}: exports nothing")


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


def check_python(version: str) -> None:
    wheels = list(DIST.glob(f"harness_sdk-{version}-*.whl"))
    need(len(wheels) == 1, f"expected one wheel, found {[w.name for w in wheels]}")
    for w in wheels:
        need("-cp39-abi3-manylinux" in w.name and w.name.endswith("_x86_64.whl"), f"{w.name}: not an abi3 manylinux x86-64 wheel")
        with zipfile.ZipFile(w) as z:
            names = z.namelist()
            metadata_text(z.read(f"harness_sdk-{version}.dist-info/METADATA").decode(), w.name, version)
            need("harness/py.typed" in names and "harness/_types.py" in names and "harness/_native.pyi" in names, f"{w.name}: no type information")
            need("harness/_openapi.py" in names, f"{w.name}: harness/_openapi.py (the runtime of `harness codegen`'s Python clients) is missing")
            natives = [n for n in names if n.startswith("harness/_native") and n.endswith(".so")]
            need(len(natives) == 1, f"{w.name}: native libraries {natives}")
            for n in natives:
                stripped(f"{w.name}:{n}", z.read(n), "python")
    need(len(wheels) == 0 or wheels[0].stat().st_size < MAX_NATIVE, f"the wheel is over {MAX_NATIVE / 2**20:.0f} MB")
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


def check_node(version: str) -> None:
    main = DIST / f"harness-sdk-{version}.tgz"
    plat = DIST / f"harness-sdk-linux-x64-gnu-{version}.tgz"
    need(main.exists() and plat.exists(), f"missing npm tarballs: {main.name}, {plat.name}")
    if not (main.exists() and plat.exists()):
        return
    pkg, files, readme, blobs = npm_json(main)
    need(pkg["name"] == "harness-sdk" and pkg["version"] == version, f"{main.name}: {pkg['name']}@{pkg['version']}")
    need(pkg.get("license") == "Apache-2.0", f"{main.name}: license {pkg.get('license')}")
    need(bool(pkg.get("description")), f"{main.name}: no description")
    need(pkg.get("engines", {}).get("node") == ">=18", f"{main.name}: engines.node {pkg.get('engines')}")
    scripts = pkg.get("scripts", {})
    need(not any(k in scripts for k in ("preinstall", "install", "postinstall")), f"{main.name}: an install script ({scripts})")
    need(pkg.get("optionalDependencies", {}).get("@harness-sdk/linux-x64-gnu") == version, f"{main.name}: optionalDependencies {pkg.get('optionalDependencies')}")
    need(not blobs, f"{main.name}: carries a native module")
    js = {"package/index.js", "package/index.mjs", "package/index.d.ts", "package/index.d.mts", "package/types.d.ts", "package/errors.js", "package/errors.d.ts"}
    # harness-sdk/openapi: the runtime of `harness codegen`'s TypeScript clients, in the exports map.
    js |= {"package/openapi.js", "package/openapi.mjs", "package/openapi.d.ts"}
    need("./openapi" in pkg.get("exports", {}), f"{main.name}: exports has no ./openapi")
    need(js <= files, f"{main.name}: JS files missing: {sorted(js - files)}")
    need(len(readme) > 500, f"{main.name}: README missing")
    pkg, files, readme, blobs = npm_json(plat)
    need(pkg["name"] == "@harness-sdk/linux-x64-gnu" and pkg["version"] == version, f"{plat.name}: {pkg['name']}@{pkg['version']}")
    need(pkg.get("os") == ["linux"] and pkg.get("cpu") == ["x64"] and pkg.get("libc") == ["glibc"], f"{plat.name}: os/cpu/libc {pkg}")
    need(pkg.get("license") == "Apache-2.0" and bool(pkg.get("description")), f"{plat.name}: license or description")
    need(pkg.get("engines", {}).get("node") == ">=18", f"{plat.name}: engines.node")
    need(bool(readme), f"{plat.name}: README missing")
    need(list(blobs) == ["package/harness-sdk.linux-x64-gnu.node"], f"{plat.name}: native modules {list(blobs)}")
    for n, data in blobs.items():
        stripped(f"{plat.name}:{n}", data, "node")


def check_jvm(version: str) -> None:
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
        need("linux-x86-64/libharness_kotlin.so" in names, f"{jar.name}: no native library under linux-x86-64/")
        if "linux-x86-64/libharness_kotlin.so" in names:
            stripped(f"{jar.name}:linux-x86-64/libharness_kotlin.so", z.read("linux-x86-64/libharness_kotlin.so"), "jvm")
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
    deps = {}
    for d in root.findall("m:dependencies/m:dependency", ns):
        deps[d.findtext("m:artifactId", namespaces=ns)] = (d.findtext("m:scope", default="compile", namespaces=ns), d.findtext("m:optional", default="false", namespaces=ns))
    for runtime in ("kotlin-stdlib", "kotlinx-coroutines-core", "jna", "slf4j-api"):
        need(deps.get(runtime, ("missing",))[0] == "compile" and deps[runtime][1] == "false", f"{pom.name}: {runtime} is {deps.get(runtime)}")
    for test_only in ("junit-jupiter", "logback-classic", "opentelemetry-sdk", "json"):
        need(deps.get(test_only, ("test",))[0] == "test", f"{pom.name}: {test_only} leaks as {deps.get(test_only)}")


def main() -> None:
    version = sys.argv[1]
    check_python(version)
    check_node(version)
    check_jvm(version)
    print(f"\n| artifact | size | SHA-256 |\n|---|---:|---|")
    for f in sorted(p for p in DIST.rglob("*") if p.is_file() and not p.name.endswith(".sha1")):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        print(f"| {f.relative_to(DIST)} | {f.stat().st_size / 1e6:.2f} MB | {digest} |")
    if failures:
        print("\nrelease checks failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"\nall release checks passed for {version}")


if __name__ == "__main__":
    main()
