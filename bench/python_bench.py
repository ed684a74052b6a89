"""Python row of the Harness benchmark: harness vs httpx / aiohttp / requests on one loopback upstream.

Compares, against the repo's fault-injecting upstream (`/bench` answers 200 {"ok":true}):
  * harness.AsyncClient vs httpx.AsyncClient vs aiohttp.ClientSession at concurrency 1 and 64
  * harness.Client (sync) vs requests.Session at concurrency 1
  * harness.AsyncClient+hmac at concurrency 64: the same service signing every request in the
    core (auth type hmac, preset github), against harness.AsyncClient in the same rounds
  * harness.AsyncClient+before at concurrency 64: the same client with one interceptor, a plain
    (sync) `before` that adds one header, run in the same interleaved rounds as the row without
and prints throughput (req/s), p50/p99 latency (µs) and process CPU ms per 1,000 requests.
Harness runs with retry, circuit breaker and bulkhead all on (the production shape); its
request log is off, as the others log nothing either.

Setup (release builds; `pip install` builds the binding in release by default):

    export CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu
    cargo build --release -p harness-upstream
    python3 -m venv bindings-python/.venv
    bindings-python/.venv/bin/pip install ./bindings-python httpx aiohttp requests
    bindings-python/.venv/bin/python bench/python_bench.py [--requests 5000] [--only harness,aiohttp]

`--only harness.AsyncClient@64,harness.Client@1` picks rows by name (a row's whole name picks
that row only, a part of a name every row containing it) and concurrency, and
`--upstream URL` measures against a running upstream: bench/compare.sh runs a base and a
current build of the binding (two venvs) that way, one round per process.

Env (the defaults of the flags, as bench/run.sh's other benches read them): BENCH_REQUESTS,
BENCH_ROUNDS, BENCH_HUGE.

CPU is this process's user+system time (time.process_time), so it includes the Rust
runtime's worker threads; the upstream runs in its own process and is not counted.
"""

import argparse
import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRIPLE = "x86_64-unknown-linux-gnu"


def upstream_bin() -> str:
    if os.environ.get("HARNESS_UPSTREAM_BIN"):
        return os.environ["HARNESS_UPSTREAM_BIN"]
    for profile in ("release", "debug"):
        for sub in (f"{TRIPLE}/{profile}", profile):
            p = REPO / "target" / sub / "harness-upstream"
            if p.exists():
                return str(p)
    raise SystemExit("build the upstream first: cargo build --release -p harness-upstream")


class Result:
    def __init__(self, name: str, concurrency: int, latencies_ns: list, wall_s: float, cpu_s: float) -> None:
        self.name, self.concurrency = name, concurrency
        n = len(latencies_ns)
        lat = sorted(latencies_ns)
        self.rps = n / wall_s
        self.p50_us = lat[n // 2] / 1000
        self.p99_us = lat[min(n - 1, int(n * 0.99))] / 1000
        self.cpu_ms_per_1k = cpu_s * 1000 / n * 1000


def measure(name: str, concurrency: int, run) -> Result:
    """`run()` performs the requests and returns the per-request latencies (ns)."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    lat = run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return Result(name, concurrency, lat, wall, cpu)


async def drive(call, n: int, concurrency: int) -> list:
    """Runs `n` awaits of `call()` with `concurrency` workers; returns latencies in ns."""
    lat: list = []
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t = time.perf_counter_ns()
            await call()
            lat.append(time.perf_counter_ns() - t)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return lat


def harness_config(base: str, huge: bool = False) -> dict:
    return {
        "client": {"name": "bench"},
        "log": {"enabled": False},
        "services": {
            "up": {
                "base_url": base,
                "retry": {"max_retries": 1},
                "breaker": {"failure_threshold": 5, "open_ms": 30000},
                # Room for every caller of the c=10,000 row, whose connections take longer to open.
                "bulkhead": {"max_concurrency": 20000 if huge else 256},
                **({"timeouts": {"connect_ms": 5000, "response_ms": 30000, "request_ms": 60000}} if huge else {}),
            }
        },
    }


def bench_huge(base: str, concurrency: int, rounds: int) -> tuple:
    """harness.AsyncClient with `concurrency` requests in flight: a warm-up pass that opens the
    connections, then `rounds` measured passes of 5 requests per caller. Returns the rows, the
    number of failed requests and the bulkhead permits still held at the end."""
    import harness

    async def go():
        client = harness.AsyncClient(harness_config(base, huge=True))
        errors = 0

        async def call():
            nonlocal errors
            try:
                r = await client.get("up", "/bench")
                if r.status != 200 or not r.content:
                    errors += 1
            except harness.HarnessError:
                errors += 1

        try:
            await drive(call, concurrency, concurrency)
            errors = 0
            rows = []
            for _ in range(rounds):
                cpu0, t0 = time.process_time(), time.perf_counter()
                lat = await drive(call, concurrency * 5, concurrency)
                rows.append(Result("harness.AsyncClient", concurrency, lat, time.perf_counter() - t0, time.process_time() - cpu0))
            text = client.metrics()
            leaked = next((int(float(l.rsplit(" ", 1)[1])) for l in text.splitlines() if l.startswith('harness_bulkhead_permits_in_use{service="up"}')), -1)
            return rows, errors, leaked
        finally:
            await client.aclose()

    return asyncio.run(go())


INTERCEPTED = "harness.AsyncClient+before"
"""The c=64 row with one interceptor; its baseline is harness.AsyncClient at c=64."""
SIGNED = "harness.AsyncClient+hmac"
"""The c=64 row whose service signs every request (auth type hmac, preset github); same baseline."""


def bench_async(name: str, base: str, n: int, warmup: int, concurrency: int) -> Result:
    async def session():
        if name in ("harness.AsyncClient", INTERCEPTED, SIGNED):
            import harness

            cfg = harness_config(base)
            if name == SIGNED:
                # HMAC-SHA256 of the body into X-Hub-Signature-256, per request (the core's work).
                cfg["services"]["up"]["auth"] = {"type": "hmac", "preset": "github", "secret": {"value": "bench-signing-secret"}}
            client = harness.AsyncClient(cfg)
            if name == INTERCEPTED:
                # One plain `before` adding one header: the cost of crossing to Python per call.
                client.add_interceptor(lambda request: {"headers": {"x-bench": "1"}}, name="bench-header")

            async def call():
                r = await client.get("up", "/bench")
                assert r.status == 200 and r.content

            return call, client.aclose
        if name == "httpx.AsyncClient":
            import httpx

            client = httpx.AsyncClient(base_url=base, limits=httpx.Limits(max_connections=256, max_keepalive_connections=256))

            async def call():
                r = await client.get("/bench")
                assert r.status_code == 200 and r.content

            return call, client.aclose
        if name == "aiohttp":
            import aiohttp

            client = aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=256))

            async def call():
                async with client.get("/bench") as r:
                    assert r.status == 200 and await r.read()

            return call, client.close
        raise ValueError(name)

    async def go():
        call, close = await session()
        try:
            await drive(call, warmup, concurrency)
            cpu0, t0 = time.process_time(), time.perf_counter()
            lat = await drive(call, n, concurrency)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            return Result(name, concurrency, lat, wall, cpu)
        finally:
            await close()

    return asyncio.run(go())


def bench_sync(name: str, base: str, n: int, warmup: int) -> Result:
    if name == "harness.Client":
        import harness

        client = harness.Client(harness_config(base))

        def call():
            r = client.get("up", "/bench")
            assert r.status == 200 and r.content

        close = client.close
    elif name == "requests.Session":
        import requests

        client = requests.Session()
        client.trust_env = False  # no proxy lookups per request

        def call():
            r = client.get(base + "/bench")
            assert r.status_code == 200 and r.content

        close = client.close
    else:
        raise ValueError(name)

    def run(count):
        lat = []
        for _ in range(count):
            t = time.perf_counter_ns()
            call()
            lat.append(time.perf_counter_ns() - t)
        return lat

    try:
        run(warmup)
        return measure(name, 1, lambda: run(n))
    finally:
        close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    env = os.environ.get
    ap.add_argument("--requests", type=int, default=int(env("BENCH_REQUESTS", 5000)), help="measured requests per row (default 5000)")
    ap.add_argument("--requests-c1", type=int, help="measured requests per row at concurrency 1 (default: --requests)")
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--upstream", help="use a running upstream at this base URL instead of starting one")
    ap.add_argument("--only", help="comma-separated substrings of row names to run; NAME@C also pins the concurrency")
    ap.add_argument("--rounds", type=int, default=int(env("BENCH_ROUNDS", 5)), help="interleaved rounds, median reported (default 5)")
    ap.add_argument("--huge", type=int, default=int(env("BENCH_HUGE", 10000)), help="in-flight count of the harness.AsyncClient stress row (0 = skip)")
    ap.add_argument("--json", help="write every round's figures to this file (for bench/summary.py)")
    args = ap.parse_args()

    proc = None
    if args.upstream:
        base = args.upstream.rstrip("/")
    else:
        proc = subprocess.Popen([upstream_bin()], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        base = "http://" + json.loads(proc.stdout.readline())["addr"]

    rows = [
        ("async", "harness.AsyncClient", 1),
        ("async", "httpx.AsyncClient", 1),
        ("async", "aiohttp", 1),
        ("async", "harness.AsyncClient", 64),
        ("async", INTERCEPTED, 64),
        ("async", SIGNED, 64),
        ("async", "httpx.AsyncClient", 64),
        ("async", "aiohttp", 64),
        ("sync", "harness.Client", 1),
        ("sync", "requests.Session", 1),
    ]
    only = [s.strip() for s in args.only.split(",")] if args.only else None

    names = {r[1] for r in rows}

    def picked(name: str, conc: int) -> bool:
        for o in only or []:
            sub, _, c = o.partition("@")
            # A row's whole name picks that row only (harness.AsyncClient is not its +before row).
            hit = sub == name if sub in names else sub in name
            if hit and (not c or int(c) == conc):
                return True
        return not only

    rows = [r for r in rows if picked(r[1], r[2])]
    results: dict = {}
    huge = None
    try:
        # Interleaved rounds: each round runs every row once, so drift hits every client alike.
        for round_no in range(args.rounds):
            for kind, name, conc in rows:
                n = args.requests_c1 if conc == 1 and args.requests_c1 else args.requests
                try:
                    if kind == "async":
                        r = bench_async(name, base, n, args.warmup, conc)
                    else:
                        r = bench_sync(name, base, n, args.warmup)
                except ImportError as e:
                    print(f"skipping {name}: {e} (pip install httpx aiohttp requests)")
                    continue
                results.setdefault((name, conc), []).append(r)
            print(f"  round {round_no + 1} of {args.rounds} done", flush=True)
        if args.huge and picked("harness.AsyncClient", args.huge):
            huge = bench_huge(base, args.huge, min(args.rounds, 3))
    finally:
        if proc:
            proc.stdin.close()
            proc.wait(timeout=5)

    def med(xs):
        return sorted(xs)[len(xs) // 2]

    print()
    print(f"median of {args.rounds} interleaved rounds, {args.requests} requests per cell")
    print(f"{'client':<26}{'conc':>6}{'req/s':>10}{'p50 µs':>10}{'p99 µs':>10}{'CPU ms/1k':>11}")
    for (name, conc), rs in results.items():
        print(f"{name:<26}{conc:>6}{med([r.rps for r in rs]):>10.0f}{med([r.p50_us for r in rs]):>10.0f}"
              f"{med([r.p99_us for r in rs]):>10.0f}{med([r.cpu_ms_per_1k for r in rs]):>11.1f}")
    if huge:
        hr, errors, leaked = huge
        print(f"{'harness.AsyncClient':<26}{args.huge:>6}{med([r.rps for r in hr]):>10.0f}{med([r.p50_us for r in hr]):>10.0f}"
              f"{med([r.p99_us for r in hr]):>10.0f}{med([r.cpu_ms_per_1k for r in hr]):>11.1f}   errors {errors}, permits left in use {leaked}")

    def ratio(a, b, c):
        ra, rb = results.get((a, c)), results.get((b, c))
        if ra and rb:
            print(f"{a} / {b} at c={c}: {med([r.rps for r in ra]) / med([r.rps for r in rb]):.2f}x throughput, "
                  f"{med([r.cpu_ms_per_1k for r in rb]) / med([r.cpu_ms_per_1k for r in ra]):.2f}x less CPU")

    print()
    ratio("harness.AsyncClient", "aiohttp", 64)
    ratio("harness.AsyncClient", "httpx.AsyncClient", 64)
    ratio("harness.Client", "requests.Session", 1)
    ratio(INTERCEPTED, "harness.AsyncClient", 64)
    ratio(SIGNED, "harness.AsyncClient", 64)
    if args.json:
        def js(r):
            return {"rps": r.rps, "p50_ms": r.p50_us / 1000, "p99_ms": r.p99_us / 1000, "cpu_ms_per_1k": r.cpu_ms_per_1k}

        out = [{"client": name, "concurrency": conc, "errors": 0, "rounds": [js(r) for r in rs]} for (name, conc), rs in results.items()]
        for row in out:
            if row["client"] == INTERCEPTED:
                # bench/summary.py pairs a row marked so with its baseline, round by round.
                row.update(interceptor="one sync before adding a header", baseline="harness.AsyncClient")
            if row["client"] == SIGNED:
                row.update(interceptor="hmac signing (preset github)", baseline="harness.AsyncClient")
        if huge:
            out.append({"client": "harness.AsyncClient", "concurrency": args.huge, "errors": huge[1], "leaked_permits": huge[2], "rounds": [js(r) for r in huge[0]]})
        import platform

        Path(args.json).write_text(json.dumps({"bench": "python", "runtime": f"Python {platform.python_version()}", "rows": out}, indent=1))


if __name__ == "__main__":
    main()
