"""Harness quickstart: sync and async calls against the repo's loopback test upstream.

    cargo build -p harness-upstream
    python -m venv .venv && .venv/bin/pip install ./bindings-python
    .venv/bin/python examples/python/quickstart.py

Set HARNESS_UPSTREAM_BIN to use another upstream binary.
"""

import asyncio
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import harness

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = os.environ.get("HARNESS_UPSTREAM_BIN", str(REPO / "target/x86_64-unknown-linux-gnu/debug/harness-upstream"))


def script(base: str, name: str, steps: list) -> None:
    """Tells the test upstream how to answer requests under /s/{name}/."""
    req = urllib.request.Request(f"{base}/__admin/script/{name}", data=json.dumps({"steps": steps}).encode(), method="PUT")
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req).close()


def main() -> None:
    upstream = subprocess.Popen([UPSTREAM], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        base = "http://" + json.loads(upstream.stdout.readline())["addr"]
        config = {
            "client": {"name": "quickstart"},
            "log": {"enabled": False},
            "services": {
                "orders": {
                    "base_url": base,
                    "timeouts": {"connect_ms": 500, "response_ms": 1000, "request_ms": 5000},
                    "retry": {"max_retries": 2, "base_delay_ms": 50},
                    "breaker": {"failure_threshold": 5, "open_ms": 10000},
                    "bulkhead": {"max_concurrency": 64},
                }
            },
        }

        # A flaky endpoint: one 503, then success. GET is idempotent, so Harness retries it.
        script(base, "orders", [{"status": 503}, {"json": {"id": 42, "state": "shipped"}}])
        with harness.Client(config) as client:
            r = client.get("orders", "/s/orders/orders/42")
            print(f"GET  -> {r.status} {r.json()} after {r.attempts} attempts, trace {r.trace_id}")

            # A POST is not retried without an idempotency key; errors are typed.
            script(base, "create", [{"status": 409, "json": {"code": "ORDER_EXISTS", "message": "order already exists"}}])
            try:
                client.post("orders", "/s/create/orders", json={"sku": "A-1", "qty": 1})
            except harness.HttpStatusError as e:
                print(f"POST -> {type(e).__name__} status={e.status} code={e.code}: {e}")

            # A slow upstream gives a TimeoutError that names its phase.
            script(base, "slow", [{"delay_ms": 2000}])
            try:
                client.get("orders", "/s/slow/orders/7", timeout_ms=300)
            except harness.TimeoutError as e:
                print(f"GET  -> TimeoutError phase={e.phase} after {e.attempts} attempt(s)")

            print("breaker for GET /orders/{id}:", client.breaker_state("orders", "GET", "/s/orders/orders/42"))

        async def fan_out() -> None:
            async with harness.AsyncClient(config) as aclient:
                responses = await asyncio.gather(*(aclient.get("orders", f"/bench/{i}") for i in range(20)))
                print(f"async: {len(responses)} responses, statuses {sorted({r.status for r in responses})}")
                metrics = aclient.metrics()
                print("metrics:", next(line for line in metrics.splitlines() if line.startswith("harness_requests_total")))

        asyncio.run(fan_out())
    finally:
        upstream.stdin.close()
        upstream.wait(timeout=5)


if __name__ == "__main__":
    main()
