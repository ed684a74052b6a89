"""Harness live engine: reload, a watched config file, streaming, listeners and `logging`.

    cargo build -p harness-upstream
    python -m venv .venv && .venv/bin/pip install ./bindings-python
    .venv/bin/python examples/python/live.py

Set HARNESS_UPSTREAM_BIN to use another upstream binary.
"""

import asyncio
import json
import logging
import os
import subprocess
import tempfile
import time
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
            "client": {"name": "live"},
            # Request records go to logging.getLogger("harness"), fields in `extra`.
            "log": {"enabled": True, "sink": "python"},
            "services": {"llm": {"base_url": base, "timeouts": {"idle_ms": 2000}}},
        }
        logging.basicConfig(level=logging.INFO, format="log: %(levelname)s %(message)s [service=%(harness_service)s]")

        with harness.Client(config) as client:
            # Every event, as a harness.Event with named fields.
            client.add_listener(lambda e: print(f"event: {e.type} {e.to_dict().get('version', '')}".rstrip()))

            # Streaming: lines as they arrive; leaving the block frees the connection.
            script(base, "tokens", [{"chunks": [{"data": "data: Hel\n"}, {"data": "data: lo\r\n", "delay_ms": 50}, {"data": "data: [DONE]"}]}])
            with client.stream("llm", "POST", "/s/tokens/v1/generate", json={"prompt": "hi"}) as r:
                print(f"stream: status {r.status}, lines {list(r.iter_lines())}")

            # Reload: validated first; a bad config is a ConfigError naming the field.
            before = client.config_version
            after = client.reload({**config, "services": {"llm": {"base_url": base, "retry": {"max_retries": 2}}}})
            print(f"reload: {before} -> {after}")
            try:
                client.reload({"services": {"llm": {"base_url": base, "retry": {"max_retries": -1}}}})
            except harness.ConfigError as e:
                print(f"reload rejected: {e.message}; version still {client.config_version}")
            client.flush()

        # A watched file: edits apply within about a second.
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "harness.yaml"
            path.write_text(f"log: {{enabled: false}}\nservices:\n  llm: {{base_url: '{base}'}}\n")

            async def watch() -> None:
                async with harness.AsyncClient.from_file(path, watch=True) as aclient:
                    seen = asyncio.Event()

                    async def on_event(event: harness.Event) -> None:  # runs on this loop
                        if event.type == "config_reloaded":
                            seen.set()

                    aclient.add_listener(on_event)
                    first = aclient.config_version
                    await asyncio.sleep(0.2)
                    path.write_text(f"log: {{enabled: false}}\nservices:\n  llm: {{base_url: '{base}', timeouts: {{idle_ms: 500}}}}\n")
                    start = time.monotonic()
                    await asyncio.wait_for(seen.wait(), 5)
                    print(f"watch: {first} -> {aclient.config_version} in {time.monotonic() - start:.1f} s")
                    script(base, "atokens", [{"chunks": [{"data": "a"}, {"data": "b", "delay_ms": 20}]}])
                    async with aclient.stream("llm", "GET", "/s/atokens/x") as r:
                        print(f"async stream: {[c async for c in r.aiter_bytes()]}")

            asyncio.run(watch())
    finally:
        upstream.stdin.close()
        upstream.wait(timeout=5)


if __name__ == "__main__":
    main()
