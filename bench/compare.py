"""The measuring half of `bench/compare.sh`: Harness at a base revision vs the current tree, per binding.

compare.sh builds both trees into BENCH_COMPARE_DIR (base/ and current/: the core's bench
binary, a venv with the wheel, a copy of the Node package with its native module, and the JVM
bench compiled against each tree's jar in its own Maven repository). This script starts one
loopback upstream and, per binding, runs the existing benchmark program (harness rows only, one
round per process) for the two builds alternately: base then current in odd rounds, current then
base in even ones. It prints one table and writes compare.json:

    python3 bench/compare.py --work /tmp/harness-compare --upstream-bin .../harness-upstream \
        --out bench/results/<stamp> [--rounds 5] [--scale 1] [--only core,python,node,jvm]

A row passes when the median of the per-round ratios current/base (throughput) is at least 0.97.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
THRESHOLD = 0.97

# (row, binding, client in the bench's JSON, concurrency)
ROWS = [
    ("core (Rust) c=64", "core", "harness", 64),
    ("Python AsyncClient c=64", "python", "harness.AsyncClient", 64),
    ("Python Client (sync) c=1", "python", "harness.Client", 1),
    ("Node c=64", "node", "harness", 64),
    ("Node c=1", "node", "harness", 1),
    ("JVM suspend c=64", "jvm", "harness (suspend)", 64),
    ("JVM CompletableFuture c=64", "jvm", "harness (future)", 64),
    ("JVM suspend c=1", "jvm", "harness (suspend)", 1),
]
BINDINGS = ["core", "python", "node", "jvm"]


def command(binding: str, side: Path, upstream: str, scale: float, out: Path):
    """The benchmark program of `binding` for the build in `side`, one round, harness rows only."""
    env = dict(os.environ, BENCH_ROUNDS="1", BENCH_HUGE="0", BENCH_JSON=str(out), BENCH_UPSTREAM=upstream)
    n = lambda x: str(max(100, int(x * scale)))  # noqa: E731
    if binding == "core":
        env.update(BENCH_ONLY="harness", BENCH_CONCURRENCY="64", BENCH_OVERHEAD="0", BENCH_LOG="0", BENCH_REQUESTS=n(100_000))
        return [str(side / "harness-bench")], env
    if binding == "python":
        # Python's c=64 cell is the noisiest (host thread, engine workers and upstream on 2 cores): long cells.
        return [str(side / "venv/bin/python"), str(BENCH / "python_bench.py"), "--upstream", upstream, "--rounds", "1", "--huge", "0",
                "--only", "harness.AsyncClient@64,harness.Client@1", "--requests", n(50_000), "--requests-c1", n(10_000),
                "--json", str(out)], env
    if binding == "node":
        # c=1 runs a quarter of BENCH_REQUESTS.
        env.update(BENCH_ONLY="harness", BENCH_REQUESTS=n(40_000), HARNESS_NODE_SDK=str(side / "node/index.mjs"))
        return ["node", str(BENCH / "node_bench.mjs")], env
    if binding == "jvm":
        # c=64 first, so that c=1 runs on a JIT warmed by 60,000 calls; 30,000 requests per c=64 cell.
        env.update(BENCH_ONLY="harness (suspend),harness (future)@64", BENCH_CONCURRENCY="64,1", BENCH_SCALE=str(scale))
        cp = (side / "jvm-bench/classes").as_posix() + ":" + (side / "jvm-bench/classpath.txt").read_text().strip()
        return ["java", "-Xms512m", "-XX:+UseG1GC", "-cp", cp, "dev.harness.bench.JvmBenchKt"], env
    raise ValueError(binding)


def start_upstream(binary: str):
    proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return proc, "http://" + json.loads(proc.stdout.readline())["addr"]


def one_round(binding: str, side: Path, upstream: str, scale: float, tmp: Path, log) -> dict:
    """Runs the bench once; returns {(client, concurrency): round} from its JSON."""
    out = tmp / f"{binding}-{side.name}.json"
    out.unlink(missing_ok=True)
    cmd, env = command(binding, side, upstream, scale, out)
    log.write(f"\n$ [{side.name}] {' '.join(cmd)}\n")
    log.flush()
    r = subprocess.run(cmd, env=env, stdout=log, stderr=log, cwd=BENCH.parent)
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"{binding} ({side.name}) exited with {r.returncode}; see {log.name}")
    doc = json.loads(out.read_text())
    return {(row["client"], row["concurrency"]): row["rounds"][0] for row in doc["rows"]}, doc.get("runtime", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="BENCH_COMPARE_DIR: base/ and current/ builds")
    ap.add_argument("--upstream-bin", required=True)
    ap.add_argument("--out", type=Path, required=True, help="results folder (compare.json, compare.log)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", help="comma list of bindings (core, python, node, jvm)")
    args = ap.parse_args()

    bindings = [b for b in BINDINGS if not args.only or b in args.only.split(",")]
    sides = {s: args.work / s for s in ("base", "current")}
    revs = {s: (p / "REV").read_text().strip() if (p / "REV").exists() else "?" for s, p in sides.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.work / "json"
    tmp.mkdir(exist_ok=True)
    # rounds[row][side] = [round, ...] in round order; errors[binding] = message
    rounds = {r[0]: {"base": [], "current": []} for r in ROWS}
    errors, runtimes = {}, {}
    proc, upstream = start_upstream(args.upstream_bin)
    t0 = time.monotonic()
    try:
        with open(args.out / "compare.log", "w") as log:
            for binding in bindings:
                failed = [(p / f"FAILED-{binding}").read_text().strip() for p in sides.values() if (p / f"FAILED-{binding}").exists()]
                if failed:
                    errors[binding] = "; ".join(failed)
                    print(f"  {binding}: {errors[binding]}", file=sys.stderr, flush=True)
                    continue
                try:
                    for k in range(1, args.rounds + 1):
                        order = ["base", "current"] if k % 2 == 1 else ["current", "base"]
                        for s in order:
                            got, runtimes[binding] = one_round(binding, sides[s], upstream, args.scale, tmp, log)
                            for row, b, client, conc in ROWS:
                                if b == binding:
                                    rounds[row][s].append(got[(client, conc)])
                        print(f"  {binding}: round {k} of {args.rounds} done ({' then '.join(order)})", file=sys.stderr, flush=True)
                except (RuntimeError, KeyError, OSError, ValueError) as e:
                    errors[binding] = str(e)
                    print(f"  {binding}: {e}", file=sys.stderr, flush=True)
    finally:
        proc.stdin.close()
        proc.wait(timeout=5)

    med = statistics.median
    out_rows, lines = [], []
    lines.append(f"Harness {revs['base']} (base) vs {revs['current']} (current), {args.rounds} interleaved rounds per binding, "
                 f"BENCH_SCALE={args.scale:g}, one loopback upstream; PASS when the median ratio >= {THRESHOLD}")
    lines.append("")
    lines.append("| row | base req/s | current req/s | current/base (min-max) | base CPU ms/1k | current CPU ms/1k | verdict |")
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    for row, binding, client, conc in ROWS:
        if binding not in bindings:
            continue
        b, c = rounds[row]["base"], rounds[row]["current"]
        n = min(len(b), len(c))
        if n == 0:
            lines.append(f"| {row} | - | - | - | - | - | ERROR |")
            out_rows.append({"row": row, "binding": binding, "client": client, "concurrency": conc, "error": errors.get(binding, "no rounds")})
            continue
        # Round k of the two builds ran back to back: their ratio is the paired measure.
        ratios = [c[i]["rps"] / b[i]["rps"] for i in range(n)]
        r = {"median": med(ratios), "min": min(ratios), "max": max(ratios), "per_round": ratios}
        ok = r["median"] >= THRESHOLD and n == args.rounds
        verdict = "PASS" if ok else ("FAIL" if n == args.rounds else f"INCOMPLETE ({n} rounds)")
        side = lambda xs: {"rps_median": med(x["rps"] for x in xs), "cpu_ms_per_1k_median": med(x["cpu_ms_per_1k"] for x in xs),  # noqa: E731
                           "p50_ms_median": med(x["p50_ms"] for x in xs), "rounds": xs}
        sb, sc = side(b[:n]), side(c[:n])
        lines.append(f"| {row} | {sb['rps_median']:.0f} | {sc['rps_median']:.0f} | {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f}) | "
                     f"{sb['cpu_ms_per_1k_median']:.1f} | {sc['cpu_ms_per_1k_median']:.1f} | {verdict} |")
        out_rows.append({"row": row, "binding": binding, "client": client, "concurrency": conc, "base": sb, "current": sc,
                         "ratio_current_over_base": r, "pass": ok, **({"error": errors[binding]} if binding in errors else {})})
    lines.append("")
    lines.append("Ratio: median of per-round ratios of throughput (round k ran base and current back to back; odd rounds base first).")
    for binding, e in errors.items():
        lines.append(f"ERROR {binding}: {e}")
    text = "\n".join(lines)
    print(text)
    doc = {
        "bench": "compare",
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "base": revs["base"],
        "current": revs["current"],
        "rounds": args.rounds,
        "scale": args.scale,
        "threshold": THRESHOLD,
        "runtimes": runtimes,
        "measure_seconds": round(time.monotonic() - t0),
        "rows": out_rows,
        "all_pass": bool(out_rows) and all(r.get("pass") for r in out_rows),
    }
    (args.out / "compare.json").write_text(json.dumps(doc, indent=1))
    print(f"\nwrote {args.out / 'compare.json'}")
    sys.exit(0 if doc["all_pass"] else 1)


if __name__ == "__main__":
    main()
