"""The one version of Harness: `[workspace.package] version` in Cargo.toml (every crate, and
so every native library, takes it). The other places that must say the same are checked here,
and `--set X.Y.Z` writes all of them.

    python3 release/version.py            # prints the version; exits 1 naming each place that differs
    python3 release/version.py --set 0.2.0
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARGO = ROOT / "Cargo.toml"
# (file, regex whose group 1 is the version): the places besides Cargo.toml.
PLACES = [
    (ROOT / "bindings-python/python/harness/_version.py", r'__version__ = "([^"]+)"'),
    (ROOT / "bindings-node/package.json", r'"version": "([^"]+)"'),
    (ROOT / "bindings-kotlin/pom.xml", r"<artifactId>harness-sdk</artifactId>\s*<version>([^<]+)</version>"),
    (ROOT / "bench/jvm/pom.xml", r"<artifactId>harness-sdk</artifactId>\s*<version>([^<]+)</version>"),
    (ROOT / "release/smoke/jvm/pom.xml", r"<artifactId>harness-sdk</artifactId>\s*<version>([^<]+)</version>"),
]
CARGO_RE = r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"'


def cargo_version() -> str:
    m = re.search(CARGO_RE, CARGO.read_text())
    if not m:
        sys.exit(f"{CARGO}: no [workspace.package] version")
    return m.group(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", metavar="VERSION")
    args = ap.parse_args()
    if args.set:
        if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", args.set):
            sys.exit(f"--set: expected a semantic version like 1.2.3, got {args.set!r}")
        text = CARGO.read_text()
        m = re.search(CARGO_RE, text)
        CARGO.write_text(text[: m.start(1)] + args.set + text[m.end(1):])
        for path, rx in PLACES:
            text = path.read_text()
            m = re.search(rx, text)
            path.write_text(text[: m.start(1)] + args.set + text[m.end(1):])
    version = cargo_version()
    wrong = []
    for path, rx in PLACES:
        m = re.search(rx, path.read_text())
        found = m.group(1) if m else None
        if found != version:
            wrong.append(f"{path.relative_to(ROOT)} says {found or 'nothing'}")
    # package.json must stay valid JSON after any edit.
    json.loads((ROOT / "bindings-node/package.json").read_text())
    if wrong:
        sys.exit(f"the version is {version} (Cargo.toml [workspace.package]), but " + "; ".join(wrong) +
                 ": run python3 release/version.py --set " + version)
    print(version)


if __name__ == "__main__":
    main()
