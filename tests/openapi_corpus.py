"""`harness codegen --lang python` over the public OpenAPI documents in ../shared/openapi-corpus/
(read from there, never copied into the project): every operation is generated or refused with
a reason, at least 90% of those whose request body (if any) is JSON are generated, each package
imports, and the packages (with the examples' clients and their runtime, harness/_openapi.py)
pass `mypy --strict` and `pyright --strict`. Prints the counts per document and the time to
generate the largest one.

Run with a Python that has harness, mypy and pyright (bindings-python/.venv after bindings-python/test.sh):
    bindings-python/.venv/bin/python tests/openapi_corpus.py
"""

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "openapi-corpus"
DOCUMENTS = ["oai-petstore-expanded.json", "oai-uspto.json", "adyen-checkout-v71.json", "twilio-messaging-v1.json"]
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LARGEST = "adyen-checkout-v71.json"


def harness_bin() -> str:
    if os.environ.get("HARNESS_BIN"):
        return os.environ["HARNESS_BIN"]
    triple = os.environ.get("CARGO_BUILD_TARGET", "x86_64-unknown-linux-gnu")
    for p in (REPO / "target" / triple / "debug" / "harness", REPO / "target" / "debug" / "harness"):
        if p.exists():
            return str(p)
    sys.exit("harness is not built: run `cargo build -p harness-cli` (or set HARNESS_BIN)")


def is_json(media: str) -> bool:
    m = media.split(";")[0].strip().lower()
    return m == "application/json" or (m.startswith("application/") and m.endswith("+json"))


def operations(doc: dict) -> list:
    """(METHOD, path, operationId, body is JSON or absent) for each operation, by the standard library."""
    out = []
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            body = op.get("requestBody")
            if body and "$ref" in body:
                body = doc["components"]["requestBodies"][body["$ref"].rsplit("/", 1)[1]]
            content = (body or {}).get("content") or {}
            json_or_none = not content or any(is_json(m) for m in content)
            out.append((method.upper(), path, op.get("operationId"), json_or_none))
    return out


def pyright_strict(cwd: Path, paths: list) -> subprocess.CompletedProcess:
    """pyright in strict mode, for Python 3.9 (the oldest harness supports), with this
    interpreter's packages (harness among them)."""
    with tempfile.TemporaryDirectory() as d:
        config = Path(d) / "pyrightconfig.json"
        config.write_text(json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.9", "extraPaths": [str(cwd)]}))
        return subprocess.run(
            [sys.executable, "-m", "pyright", "-p", str(config), "--pythonpath", sys.executable, *paths],
            cwd=cwd,
            capture_output=True,
            text=True,
        )


def main() -> int:
    if not CORPUS.is_dir():
        sys.exit(f"{CORPUS} is missing: the corpus lives beside the project (see its SOURCES.md)")
    harness = harness_bin()
    failures = []
    rows = []
    out_dir = Path(tempfile.mkdtemp(prefix="harness-corpus-"))
    packages = []
    for name in DOCUMENTS:
        spec = CORPUS / name
        doc = json.loads(spec.read_text())
        ops = operations(doc)
        started = time.monotonic()
        run = subprocess.run([harness, "codegen", "--spec", str(spec), "--lang", "python", "--out", str(out_dir)], capture_output=True, text=True)
        wall_ms = (time.monotonic() - started) * 1000
        if run.returncode != 0:
            failures.append(f"{name}: harness codegen failed: {run.stderr.strip()}")
            continue
        m = re.search(r"^generated (\d+) operations, refused (\d+)$", run.stdout, re.M)
        generated, refused = int(m.group(1)), int(m.group(2))
        refusals = re.findall(r"^refused (\S+) (\S+)(?: \((.*?)\))?: (.*)$", run.stdout, re.M)
        took = int(re.search(r"^read and generated in (\d+) ms$", run.stdout, re.M).group(1))
        if generated + refused != len(ops) or len(refusals) != refused:
            failures.append(f"{name}: {generated} generated + {refused} refused != {len(ops)} operations")
        for method, path, op_id, reason in refusals:
            if not re.match(r"^[^ ]*#/", reason):
                failures.append(f"{name}: the refusal of {method} {path} does not name a pointer: {reason}")
        refused_keys = {(m_, p) for m_, p, _, _ in refusals}
        eligible = [o for o in ops if o[3]]
        eligible_generated = [o for o in eligible if (o[0], o[1]) not in refused_keys]
        share = len(eligible_generated) / len(eligible) if eligible else 1.0
        if share < 0.9:
            failures.append(f"{name}: only {len(eligible_generated)} of {len(eligible)} operations with a JSON body or none were generated")
        # The reason without its pointer, for the summary.
        reasons = collections.Counter(r.split(": ", 1)[1] if ": " in r else r for _, _, _, r in refusals)
        rows.append((name, len(ops), generated, refused, len(eligible_generated), len(eligible), reasons, took, wall_ms))
        packages.append(re.sub(r"[^a-z0-9]+", "_", spec.stem.lower()))

    print("| document | operations | generated | refused | JSON-or-no-body generated | top refusal reasons | generation (ms) |")
    print("|---|---|---|---|---|---|---|")
    for name, total, gen, ref, eg, e, reasons, took, wall in rows:
        top = "; ".join(f"{n}x {r}" for r, n in reasons.most_common(3)) or "-"
        print(f"| {name} | {total} | {gen} | {ref} | {eg}/{e} | {top} | {took} (process {wall:.0f}) |")

    # Each package imports (with harness), and all of them pass mypy --strict with the examples'.
    for p in packages:
        r = subprocess.run([sys.executable, "-c", f"import {p}"], cwd=out_dir, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"import {p}: {r.stderr.strip()[-500:]}")
    examples = REPO / "examples" / "openapi" / "python"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cache:
        r = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, *packages],
            cwd=out_dir,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            failures.append(f"mypy --strict on the corpus clients:\n{r.stdout[-3000:]}")
        r2 = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "orders", "users", "payments"], cwd=examples, capture_output=True, text=True)
        if r2.returncode != 0:
            failures.append(f"mypy --strict on examples/openapi/python:\n{r2.stdout[-3000:]}")
    print(f"mypy --strict: corpus and examples checked in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    runtime = REPO / "bindings-python" / "python" / "harness" / "_openapi.py"
    for what, cwd, paths in [
        ("the corpus clients", out_dir, packages),
        ("examples/openapi/python", examples, ["orders", "users", "payments"]),
        ("harness/_openapi.py", runtime.parent.parent, [str(runtime)]),
    ]:
        r = pyright_strict(cwd, paths)
        if r.returncode != 0:
            failures.append(f"pyright --strict on {what}:\n{r.stdout[-3000:]}{r.stderr[-1000:]}")
    print(f"pyright --strict: corpus, examples and harness/_openapi.py checked in {time.monotonic() - started:.1f} s")
    largest = [r for r in rows if r[0] == LARGEST]
    if largest:
        print(f"largest document ({LARGEST}, {(CORPUS / LARGEST).stat().st_size} bytes): read and generated in {largest[0][7]} ms")
    subprocess.run(["rm", "-rf", str(out_dir)])
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
