"""`harness codegen --lang typescript` over the public OpenAPI documents in ../shared/openapi-corpus/
(read from there, never copied into the project): every operation is generated or refused with a
reason, at least 90% of those whose request body (if any) is JSON are generated, each package
loads in Node by `require` and by `import`, and their declarations (with the examples' clients)
pass `tsc --strict`. Prints the counts per document. The Python side is tests/openapi_corpus.py,
whose counting this shares.

Needs `npm install` in bindings-node (tsc, @types/node and the native module) and a built
`harness`: python3 tests/openapi_corpus_ts.py
"""

import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openapi_corpus import CORPUS, DOCUMENTS, LARGEST, REPO, harness_bin, operations  # noqa: E402

NODE = REPO / "bindings-node"
TSC = NODE / "node_modules" / ".bin" / "tsc"


def package_name(spec: Path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", spec.stem.lower()).strip("-")


def main() -> int:
    if not CORPUS.is_dir():
        sys.exit(f"{CORPUS} is missing: the corpus lives beside the project (see its SOURCES.md)")
    if not TSC.exists():
        sys.exit(f"{TSC} is missing: run `npm install` in bindings-node (bash bindings-node/test.sh does)")
    harness = harness_bin()
    failures = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="harness-corpus-ts-") as tmp:
        out_dir = Path(tmp)
        # The packages import harness-sdk as a user's would: node_modules/harness-sdk is this repository's.
        (out_dir / "node_modules").mkdir()
        (out_dir / "node_modules" / "harness-sdk").symlink_to(NODE, target_is_directory=True)
        (out_dir / "node_modules" / "@types").symlink_to(NODE / "node_modules" / "@types", target_is_directory=True)
        packages = []
        for name in DOCUMENTS:
            spec = CORPUS / name
            ops = operations(json.loads(spec.read_text()))
            package = package_name(spec)
            started = time.monotonic()
            run = subprocess.run(
                [harness, "codegen", "--spec", str(spec), "--lang", "typescript", "--out", str(out_dir), "--package", package],
                capture_output=True,
                text=True,
            )
            wall_ms = (time.monotonic() - started) * 1000
            if run.returncode != 0:
                failures.append(f"{name}: harness codegen failed: {run.stderr.strip()}")
                continue
            generated, refused = map(int, re.search(r"^generated (\d+) operations, refused (\d+)$", run.stdout, re.M).groups())
            refusals = re.findall(r"^refused (\S+) (\S+)(?: \((.*?)\))?: (.*)$", run.stdout, re.M)
            took = int(re.search(r"^read and generated in (\d+) ms$", run.stdout, re.M).group(1))
            if generated + refused != len(ops) or len(refusals) != refused:
                failures.append(f"{name}: {generated} generated + {refused} refused != {len(ops)} operations")
            for method, path, _, reason in refusals:
                if not re.match(r"^[^ ]*#/", reason):
                    failures.append(f"{name}: the refusal of {method} {path} does not name a pointer: {reason}")
            refused_keys = {(m, p) for m, p, _, _ in refusals}
            eligible = [o for o in ops if o[3]]
            eligible_generated = [o for o in eligible if (o[0], o[1]) not in refused_keys]
            if eligible and len(eligible_generated) / len(eligible) < 0.9:
                failures.append(f"{name}: only {len(eligible_generated)} of {len(eligible)} operations with a JSON body or none were generated")
            # Every generated operation is a method of the client class, in the declarations and in the code.
            decls = (out_dir / package / "index.d.ts").read_text()
            methods = re.findall(r"^  (\w+)\((?:\n|options\?)", decls, re.M)
            if len(methods) != generated:
                failures.append(f"{name}: {len(methods)} methods declared for {generated} operations")
            reasons = collections.Counter(r.split(": ", 1)[1] if ": " in r else r for _, _, _, r in refusals)
            rows.append((name, len(ops), generated, refused, len(eligible_generated), len(eligible), reasons, took, wall_ms))
            packages.append((package, methods))

        print("| document | operations | generated | refused | JSON-or-no-body generated | top refusal reasons | generation (ms) |")
        print("|---|---|---|---|---|---|---|")
        for name, total, gen, ref, eg, e, reasons, took, wall in rows:
            top = "; ".join(f"{n}x {r}" for r, n in reasons.most_common(3)) or "-"
            print(f"| {name} | {total} | {gen} | {ref} | {eg}/{e} | {top} | {took} (process {wall:.0f}) |")

        # Each package loads by require and by import, with a client whose prototype has every declared method.
        for package, methods in packages:
            probe = (
                "const m = require(process.argv[1]); const names = JSON.parse(process.argv[2]);"
                "const cls = Object.values(m).find((v) => typeof v === 'function' && v.name.endsWith('Client'));"
                "const missing = names.filter((n) => typeof cls.prototype[n] !== 'function');"
                "if (missing.length) { console.error('missing methods: ' + missing.join(', ')); process.exit(1) }"
                "import(require('node:path').join(process.argv[1], 'index.mjs')).then((e) => { if (e[cls.name] !== cls) process.exit(2) })"
            )
            r = subprocess.run(["node", "-e", probe, str(out_dir / package), json.dumps(methods)], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"node loading {package}: {r.stderr.strip()[-800:]}")

        # tsc --strict on every package's declarations and the examples', in one run.
        started = time.monotonic()
        examples = REPO / "examples" / "openapi" / "typescript"
        for s in ("orders", "users", "payments"):
            subprocess.run(["cp", "-r", str(examples / s), str(out_dir / f"example-{s}")], check=True)
        files = [f"{p}/index.d.ts" for p, _ in packages] + [f"example-{s}/index.d.ts" for s in ("orders", "users", "payments")]
        r = subprocess.run(
            [str(TSC), "--strict", "--noEmit", "--target", "es2022", "--module", "commonjs", "--moduleResolution", "node10", "--types", "node", *files],
            cwd=out_dir,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            failures.append(f"tsc --strict on the corpus clients:\n{(r.stdout + r.stderr)[-3000:]}")
        print(f"tsc --strict: corpus and examples checked in {time.monotonic() - started:.1f} s")
    largest = [r for r in rows if r[0] == LARGEST]
    if largest:
        print(f"largest document ({LARGEST}, {(CORPUS / LARGEST).stat().st_size} bytes): read and generated in {largest[0][7]} ms")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
