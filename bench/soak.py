"""The chaos soak: N requests (default 1,000,000) through the Python binding and the core, with
mixed faults (latency, 429, 503, resets, response timeouts, stream cuts) injected by the
core's `faults:` rules and host cancellations, against the loopback upstream's side-effect
ledger. Prints the figures and exits non-zero when one fails:

- 0 leaked bulkhead permits at the end;
- 0 panics (no error mentions one);
- RSS growth under 5% between the 10% mark (at least 100k requests in a full run) and the end;
- no duplicated POST side effect: every `x-op-id` executed at most once (POSTs without an
  idempotency key must never be resent), keyed POSTs replayed, never re-executed;
- every request ended in a success or a typed HarnessError (or the host's own cancellation)
  within its deadline (plus 250 ms of scheduling slack).

Usage: python bench/soak.py [--requests N] [--concurrency C]. Needs the binding installed
(`pip install ./bindings-python`) and `cargo build -p harness-upstream`.
"""

import argparse
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.request

import harness

REPO = pathlib.Path(__file__).resolve().parent.parent
REQUEST_MS = 2000
SLACK_MS = 250


def rss_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def upstream_bin() -> str:
    env = os.environ.get("HARNESS_UPSTREAM_BIN")
    if env:
        return env
    for triple in ("x86_64-unknown-linux-gnu/", ""):
        for profile in ("release", "debug"):
            p = REPO / "target" / f"{triple}{profile}" / "harness-upstream"
            if p.exists():
                return str(p)
    raise SystemExit("harness-upstream not built: run `cargo build -p harness-upstream`")


def config(url: str) -> dict:
    return {
        "client": {"name": "soak"},
        "log": {"enabled": False},
        "services": {
            "api": {
                "base_url": url,
                "timeouts": {"response_ms": 200, "request_ms": REQUEST_MS, "idle_ms": 500},
                "retry": {"max_retries": 2, "base_delay_ms": 5, "max_delay_ms": 50, "max_retry_after_ms": 100},
                "breaker": {"failure_threshold": 50, "open_ms": 200},
                "bulkhead": {"max_concurrency": 256},
            }
        },
        "faults": {
            "enabled": True,
            "seed": 20261202,
            "rules": [
                {"service": "api", "rate": 0.01, "fault": "latency", "latency_ms": 300},
                {"service": "api", "rate": 0.03, "fault": "latency", "latency_ms": 5},
                {"service": "api", "rate": 0.03, "fault": "status", "status": 429, "retry_after_s": 0},
                {"service": "api", "rate": 0.03, "fault": "status", "status": 503},
                {"service": "api", "rate": 0.01, "fault": "reset"},
                {"service": "api", "rate": 0.02, "fault": "stream_cut", "after_bytes": 6},
            ],
        },
    }


class Tally:
    def __init__(self) -> None:
        self.ok = 0
        self.errors: dict = {}
        self.cancelled = 0
        self.untyped: list = []
        self.late = 0
        self.worst_ms = 0.0
        self.panics = 0

    def error(self, e: BaseException) -> None:
        name = type(e).__name__
        self.errors[name] = self.errors.get(name, 0) + 1
        if "panic" in str(e).lower():
            self.panics += 1


async def one(client: "harness.AsyncClient", i: int, t: Tally) -> None:
    kind = i % 20
    started = time.perf_counter()
    try:
        if kind < 13:
            await client.request("api", "GET", f"/soak/{i}")
        elif kind < 17:
            # No idempotency key: must never be resent once it may have arrived.
            await client.request("api", "POST", f"/ledger/{i}", json={"i": i}, headers={"x-op-id": str(i)})
        elif kind < 18:
            await client.request("api", "POST", f"/ledger/k{i}", json={"i": i}, idempotency_key=f"k{i}")
        else:
            async with client.stream("api", "GET", f"/soak/stream/{i}") as r:
                async for _ in r.aiter_bytes():
                    pass
        t.ok += 1
    except harness.HarnessError as e:
        t.error(e)
    except Exception as e:  # noqa: BLE001 - what the soak exists to catch
        t.untyped.append(repr(e)[:200])
    ms = (time.perf_counter() - started) * 1000
    t.worst_ms = max(t.worst_ms, ms)
    if ms > REQUEST_MS + SLACK_MS:
        t.late += 1


async def run(n: int, concurrency: int, url: str) -> dict:
    client = harness.AsyncClient(config(url))
    t = Tally()
    marks = {}
    next_i = 0
    mark_at = max(n // 10, 1)

    async def worker() -> None:
        nonlocal next_i
        while next_i < n:
            i = next_i
            next_i += 1
            if i == mark_at:
                marks["rss_mark"] = rss_kib()
            if i % 50 == 7:
                # The host gives up on this one: the task is cancelled mid-flight.
                task = asyncio.ensure_future(one(client, i, t))
                await asyncio.sleep(0.001)
                if not task.done():
                    task.cancel()
                    try:
                        await task
                    except asyncio.CancelledError:
                        t.cancelled += 1
                        continue
                else:
                    await task
                continue
            await one(client, i, t)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    # Permits a cancelled call holds are freed asynchronously: give them a moment.
    leaked = client.bulkhead_in_use("api")
    for _ in range(100):
        if leaked == 0:
            break
        await asyncio.sleep(0.01)
        leaked = client.bulkhead_in_use("api")
    metrics = client.metrics()
    client.close()
    faults = {}
    for line in metrics.splitlines():
        if line.startswith("harness_faults_injected_total{"):
            kind = line.split('fault="')[1].split('"')[0]
            faults[kind] = faults.get(kind, 0) + float(line.rsplit(" ", 1)[1])
    return {"tally": t, "wall": wall, "leaked": leaked, "rss_mark": marks.get("rss_mark", rss_kib()), "rss_end": rss_kib(), "faults": faults}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    proc = subprocess.Popen([upstream_bin()], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        addr = json.loads(proc.stdout.readline())["addr"]
        url = f"http://{addr}"
        r = asyncio.run(run(a.requests, a.concurrency, url))
        ledger = json.loads(urllib.request.urlopen(f"{url}/__admin/ledger").read())
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    t: Tally = r["tally"]
    growth = (r["rss_end"] - r["rss_mark"]) * 100.0 / max(r["rss_mark"], 1)
    done = t.ok + sum(t.errors.values()) + t.cancelled + len(t.untyped)
    print(f"soak: {a.requests} requests, {a.concurrency} at a time, in {r['wall']:.1f} s ({a.requests / r['wall']:.0f}/s)")
    print("| figure | value | target |")
    print("|---|---:|---|")
    print(f"| requests accounted for | {done} | {a.requests} |")
    print(f"| success | {t.ok} ({t.ok * 100.0 / a.requests:.1f}%) | |")
    for name, count in sorted(t.errors.items()):
        print(f"| {name} | {count} | typed |")
    print(f"| cancelled by the host | {t.cancelled} | |")
    print(f"| untyped exceptions | {len(t.untyped)} | 0 |")
    print(f"| panics | {t.panics} | 0 |")
    print(f"| past deadline + {SLACK_MS} ms | {t.late} (worst {t.worst_ms:.0f} ms) | 0 |")
    print(f"| faults injected | {', '.join(f'{k} {int(v)}' for k, v in sorted(r['faults'].items()))} | |")
    print(f"| leaked bulkhead permits | {r['leaked']} | 0 |")
    print(f"| RSS at 10% / end | {r['rss_mark'] / 1024:.1f} / {r['rss_end'] / 1024:.1f} MiB ({growth:+.1f}%) | < +5% |")
    print(f"| ledger: ops, executions, duplicates, replays | {ledger['ops']}, {ledger['executions']}, {ledger['duplicates']}, {ledger['replays']} | duplicates 0 |")
    failures = []
    if done != a.requests:
        failures.append("requests lost")
    if t.untyped:
        failures.append(f"untyped exceptions, e.g. {t.untyped[0]}")
    if t.panics:
        failures.append("panics")
    if t.late:
        failures.append("requests past their deadline")
    if r["leaked"]:
        failures.append("leaked permits")
    if growth >= 5.0:
        failures.append("RSS grew 5% or more")
    if ledger["duplicates"]:
        failures.append("duplicated side effects")
    if not r["faults"]:
        failures.append("no fault was injected")
    if failures:
        print("SOAK FAILED: " + "; ".join(failures))
        return 1
    print("soak passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
