"""The one summary table of `bench/run.sh --all`: every binding against its peer and against the core.

Reads the per-language JSON that the benches write (core.json, python.json, node.json, jvm.json in
one results folder), prints one Markdown table with medians and ranges (the range of per-round
ratios: the rounds are interleaved, so round i of a binding ran next to round i of its peer), the
c=10,000 rows and the issue's targets met or missed, and writes the same figures to summary.json in
that folder. A row that names a `baseline` (another row of its file, e.g. the same client with one
interceptor, described by its `interceptor` field) is shown in an extra table against it, paired
round by round. With --readme FILE, the section between the `bench:summary` markers in FILE is
replaced by the table.

    python3 bench/summary.py bench/results/20261202-0800 [--readme README.md]
"""

import argparse
import datetime
import json
import statistics
from pathlib import Path

# binding -> (file, client, peer at c=64, peer at c=1, concurrencies measured)
BINDINGS = [
    ("Python AsyncClient", "python", "harness.AsyncClient", "aiohttp", "aiohttp", (1, 64)),
    ("Python Client (sync)", "python", "harness.Client", None, "requests.Session", (1,)),
    ("Node", "node", "harness", "undici.request", "undici.request", (1, 64)),
    ("JVM (suspend)", "jvm", "harness (suspend)", "okhttp + resilience4j", "okhttp", (1, 64)),
    ("JVM (CompletableFuture)", "jvm", "harness (future)", "okhttp + resilience4j", "okhttp", (1, 64)),
]
# What the issue asks of each binding: (binding, what, threshold, higher is better).
TARGETS = [
    ("Node", "c64_vs_peer", 1.5, True),
    ("Node", "c64_cpu_vs_peer", 1.0, False),
    ("Node", "c1_p50_vs_peer", 1.2, False),
    ("JVM (suspend)", "c64_vs_peer", 1.3, True),
    ("JVM (suspend)", "c1_p50_vs_peer", 1.2, False),
    ("JVM (CompletableFuture)", "c64_vs_peer", 1.1, True),
    ("JVM (CompletableFuture)", "c1_p50_vs_peer", 1.2, False),
    ("Python Client (sync)", "c1_rps_vs_peer", 3.5, True),
    ("Python AsyncClient", "c64_vs_peer", 3.0, True),
    ("Python AsyncClient", "c64_vs_core", 0.8, True),
    ("Node", "c64_vs_core", 0.8, True),
    ("JVM (suspend)", "c64_vs_core", 0.8, True),
    ("JVM (CompletableFuture)", "c64_vs_core", 0.8, True),
]
# The core against raw reqwest (issue 32): throughput, CPU per request, µs added to the c=1 p50.
CORE_TARGETS = [
    ("c64_vs_reqwest", 0.95, True),
    ("c64_cpu_vs_reqwest", 1.1, False),
    ("c1_p50_added_us", 20.0, False),
]
HUGE_BOUND = 2.0  # p99 at c=N within 2x of the c=64 p99 per request queued, i.e. 2 * p99(64) * N / 64


def load(folder: Path) -> dict:
    docs = {}
    for name in ("core", "python", "node", "jvm"):
        f = folder / f"{name}.json"
        if f.exists():
            docs[name] = json.loads(f.read_text())
    return docs


def row(doc: dict, client: str, concurrency: int):
    for r in (doc or {}).get("rows", []):
        if r["client"] == client and r["concurrency"] == concurrency:
            return r
    return None


def med(r: dict, key: str) -> float:
    return statistics.median(x[key] for x in r["rounds"])


def paired(a: dict, b: dict, key: str, invert: bool = False):
    """Median and range of the per-round ratio a/b (b/a when invert)."""
    ratios = [(y[key] / x[key]) if invert else (x[key] / y[key]) for x, y in zip(a["rounds"], b["rounds"])]
    return statistics.median(ratios), min(ratios), max(ratios)


def huge_row(doc: dict, client: str):
    rows = [r for r in (doc or {}).get("rows", []) if r["client"] == client and r["concurrency"] > 1000]
    return rows[0] if rows else None


def summarise(docs: dict) -> dict:
    core = docs.get("core")
    core64 = row(core, "harness", 64)
    out = {"core": {}, "bindings": {}}
    if core64:
        out["core"] = {
            "c64_rps": med(core64, "rps"),
            "c64_cpu_ms_per_1k": med(core64, "cpu_ms_per_1k"),
            "c64_p99_ms": med(core64, "p99_ms"),
        }
        plain = row(core, "reqwest", 64)
        if plain:
            out["core"]["c64_vs_reqwest"] = paired(core64, plain, "rps")
            out["core"]["c64_cpu_vs_reqwest"] = paired(core64, plain, "cpu_ms_per_1k")
        c1 = row(core, "harness", 1)
        if c1:
            out["core"]["c1_p50_ms"] = med(c1, "p50_ms")
            plain1 = row(core, "reqwest", 1)
            if plain1:
                # The target is absolute: the core's c=1 p50 at most reqwest's + 20 µs.
                d = [(x["p50_ms"] - y["p50_ms"]) * 1000 for x, y in zip(c1["rounds"], plain1["rounds"])]
                out["core"]["c1_p50_added_us"] = (statistics.median(d), min(d), max(d))
        h = huge_row(core, "harness")
        if h:
            out["core"]["huge"] = huge_summary(h, core64)
    for name, file, client, peer64, peer1, levels in BINDINGS:
        doc = docs.get(file)
        if not doc:
            continue
        b = {"runtime": doc.get("runtime", "")}
        if 1 in levels:
            me, peer = row(doc, client, 1), row(doc, peer1, 1)
            if me and peer:
                b["peer1"] = peer1
                b["c1_p50_ms"] = med(me, "p50_ms")
                b["c1_p50_vs_peer"] = paired(me, peer, "p50_ms")
                b["c1_rps_vs_peer"] = paired(me, peer, "rps")
        if 64 in levels:
            me, peer = row(doc, client, 64), row(doc, peer64, 64)
            if me and peer:
                b["peer64"] = peer64
                b["c64_rps"] = med(me, "rps")
                b["c64_vs_peer"] = paired(me, peer, "rps")
                b["c64_cpu_ms_per_1k"] = med(me, "cpu_ms_per_1k")
                b["c64_cpu_vs_peer"] = paired(me, peer, "cpu_ms_per_1k")
                if core64:
                    rps = [x["rps"] for x in me["rounds"]]
                    c = out["core"]["c64_rps"]
                    b["c64_vs_core"] = (statistics.median(rps) / c, min(rps) / c, max(rps) / c)
            h = huge_row(doc, client)
            if h and me:
                b["huge"] = huge_summary(h, me)
        out["bindings"][name] = b
    out["interceptors"] = []
    for file, doc in docs.items():
        for r in doc.get("rows", []):
            base = row(doc, r["baseline"], r["concurrency"]) if r.get("baseline") else None
            if base:
                out["interceptors"].append({
                    "bench": file, "client": r["client"], "baseline": r["baseline"], "concurrency": r["concurrency"],
                    "what": r.get("interceptor", ""), "rps": med(r, "rps"), "rps_vs_baseline": paired(r, base, "rps"),
                    "cpu_vs_baseline": paired(r, base, "cpu_ms_per_1k"), "p50_vs_baseline": paired(r, base, "p50_ms"),
                })
    out["targets"] = []
    for key, threshold, higher in CORE_TARGETS:
        v = out["core"].get(key)
        if v is not None:
            ok = v[0] >= threshold if higher else v[0] <= threshold
            out["targets"].append({"binding": "core", "measure": key, "median": v[0], "target": threshold, "higher_is_better": higher, "met": ok})
    for name, key, threshold, higher in TARGETS:
        v = out["bindings"].get(name, {}).get(key)
        if v is None:
            continue
        ok = v[0] >= threshold if higher else v[0] <= threshold
        out["targets"].append({"binding": name, "measure": key, "median": v[0], "target": threshold, "higher_is_better": higher, "met": ok})
    for name, b in [("core", out["core"])] + list(out["bindings"].items()):
        h = b.get("huge")
        if h:
            out["targets"].append({"binding": name, "measure": f"c{h['concurrency']}", "median": h["p99_ratio"], "target": HUGE_BOUND,
                                   "higher_is_better": False, "met": h["errors"] == 0 and h["leaked_permits"] == 0 and h["p99_ratio"] <= HUGE_BOUND})
    return out


def huge_summary(h: dict, c64: dict) -> dict:
    n = h["concurrency"]
    p99, p99_64 = med(h, "p99_ms"), med(c64, "p99_ms")
    return {
        "concurrency": n,
        "errors": h["errors"],
        "leaked_permits": h.get("leaked_permits", -1),
        "rps": med(h, "rps"),
        "p99_ms": p99,
        "p99_ms_range": (min(x["p99_ms"] for x in h["rounds"]), max(x["p99_ms"] for x in h["rounds"])),
        # p99 over (the c=64 p99 scaled by the queue depth): at most 2 is the target.
        "p99_ratio": p99 / (p99_64 * n / 64),
    }


def fmt_ratio(v, suffix="×") -> str:
    if v is None:
        return "-"
    m, lo, hi = v
    return f"{m:.2f}{suffix} ({lo:.2f}-{hi:.2f})"


def table(s: dict, rounds_note: str) -> str:
    lines = [
        rounds_note,
        "",
        "| binding | peer (c=64 / c=1) | c=64 req/s vs peer | c=64 CPU/req vs peer | c=64 vs core | c=1 p50 vs peer | c=1 req/s vs peer | c=10,000 in flight |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    core = s["core"]
    if core:
        h = core.get("huge")
        lines.append(
            f"| Rust core | reqwest | {fmt_ratio(core.get('c64_vs_reqwest'))} | {fmt_ratio(core.get('c64_cpu_vs_reqwest'))} | 1.00× ({core['c64_rps']:.0f} req/s) | - | - | {fmt_huge(h)} |"
        )
    for name, b in s["bindings"].items():
        peers = f"{b.get('peer64') or '-'} / {b.get('peer1') or '-'}"
        lines.append(
            f"| {name} | {peers} | {fmt_ratio(b.get('c64_vs_peer'))} | {fmt_ratio(b.get('c64_cpu_vs_peer'))} | "
            f"{fmt_ratio(b.get('c64_vs_core'))} | {fmt_ratio(b.get('c1_p50_vs_peer'))} | {fmt_ratio(b.get('c1_rps_vs_peer'))} | "
            f"{fmt_huge(b.get('huge'))} |"
        )
    lines += ["", "Ratios are medians of per-round ratios (range in brackets); below 1 is better for CPU and p50.", ""]
    if s.get("interceptors"):
        lines += ["Rows against their own baseline (same bench, same rounds):", "",
                  "| bench | client | what it adds | against | conc | req/s | req/s vs against | CPU/req vs against | p50 vs against |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|"]
        for i in s["interceptors"]:
            lines.append(f"| {i['bench']} | {i['client']} | {i['what'] or '-'} | {i['baseline']} | {i['concurrency']} | {i['rps']:.0f} | "
                         f"{fmt_ratio(i['rps_vs_baseline'])} | {fmt_ratio(i['cpu_vs_baseline'])} | {fmt_ratio(i['p50_vs_baseline'])} |")
        lines.append("")
    lines.append("| target | median | met |")
    lines.append("|---|---:|---|")
    names = {
        "c64_vs_peer": "c=64 throughput vs peer",
        "c64_cpu_vs_peer": "c=64 CPU per request vs peer",
        "c1_p50_vs_peer": "c=1 p50 vs peer",
        "c1_rps_vs_peer": "c=1 throughput vs peer",
        "c64_vs_core": "c=64 throughput vs the core",
        "c64_vs_reqwest": "c=64 throughput vs reqwest",
        "c64_cpu_vs_reqwest": "c=64 CPU per request vs reqwest",
        "c1_p50_added_us": "c=1 p50 added to reqwest's, µs",
    }
    for t in s["targets"]:
        what = names.get(t["measure"], f"{t['measure']}: no error, no leaked permit, p99 / (c=64 p99 × N/64)")
        sign = "≥" if t["higher_is_better"] else "≤"
        lines.append(f"| {t['binding']}: {what} {sign} {t['target']} | {t['median']:.2f} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines)


def fmt_huge(h) -> str:
    if not h:
        return "-"
    return (f"{h['rps']:.0f} req/s, p99 {h['p99_ms']:.0f} ms ({h['p99_ratio']:.2f} of the bound), "
            f"{h['errors']} errors, {h['leaked_permits']} permits leaked")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--readme", type=Path, help="replace the bench:summary section of this file")
    args = ap.parse_args()
    docs = load(args.folder)
    if not docs:
        raise SystemExit(f"no bench JSON in {args.folder}")
    s = summarise(docs)
    rounds = sorted({len(r["rounds"]) for d in docs.values() for r in d["rows"] if r["concurrency"] <= 64})
    runtimes = ", ".join(d.get("runtime", k) for k, d in docs.items())
    note = (f"`bash bench/run.sh --all`, {args.folder.name}, {runtimes}; "
            f"{'/'.join(map(str, rounds))} interleaved rounds per cell (c=10,000: 3), loopback upstream in its own process.")
    text = table(s, note)
    print(text)
    s["generated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    (args.folder / "summary.json").write_text(json.dumps(s, indent=1))
    if args.readme:
        start, end = "<!-- bench:summary:start -->", "<!-- bench:summary:end -->"
        doc = args.readme.read_text()
        if start not in doc or end not in doc:
            raise SystemExit(f"{args.readme} has no {start} ... {end} section")
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
        args.readme.write_text(f"{head}{start}\n{text}\n{end}{tail}")


if __name__ == "__main__":
    main()
