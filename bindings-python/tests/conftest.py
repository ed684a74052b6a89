"""Shared fixtures: the fault-injecting loopback upstream (tests/upstream) and its admin API."""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _upstream_bin() -> str:
    env = os.environ.get("HARNESS_UPSTREAM_BIN")
    if env:
        return env
    for triple in ("x86_64-unknown-linux-gnu/", ""):
        p = REPO / "target" / f"{triple}debug" / "harness-upstream"
        if p.exists():
            return str(p)
    raise RuntimeError("harness-upstream not built: run `cargo build -p harness-upstream` (or set HARNESS_UPSTREAM_BIN)")


class Upstream:
    """A running harness-upstream: its addresses and its admin API."""

    def __init__(self, proc: subprocess.Popen, info: dict) -> None:
        self.proc = proc
        self.info = info
        self.url = "http://" + info["addr"]

    def urls(self) -> dict:
        """`{upstream}`, `{blackhole}`, `{closed}`... -> http:// URLs, for config substitution."""
        out = {"{upstream}": self.url}
        for key, addr in self.info.items():
            if key != "addr":
                out["{" + key + "}"] = "http://" + addr
        return out

    def script(self, name: str, steps: list, capacity: Optional[int] = None) -> None:
        """Installs script `name` (served at `/s/{name}/...`); `capacity` serves at most that many
        requests at once, the rest queue."""
        spec = {"steps": steps} if capacity is None else {"steps": steps, "capacity": capacity}
        body = json.dumps(spec).encode()
        req = urllib.request.Request(f"{self.url}/__admin/script/{name}", data=body, method="PUT")
        with _NO_PROXY.open(req, timeout=10) as r:
            assert 200 <= r.status < 300, r.read()

    def log(self, name: str) -> list:
        with _NO_PROXY.open(f"{self.url}/__admin/log/{name}", timeout=10) as r:
            return json.loads(r.read())["requests"]

    def stats(self, name: str) -> dict:
        """`{"requests", "disconnects", "max_in_flight"}` of script `name`."""
        with _NO_PROXY.open(f"{self.url}/__admin/stats/{name}", timeout=10) as r:
            return json.loads(r.read())

    def otlp_spans(self, trace_id: str, want: int, timeout: float = 5.0) -> list:
        """The spans of `trace_id` the upstream's OTLP receiver got (tests/upstream/src/otlp.rs),
        polled until there are `want` of them (exports are batched) or `timeout` seconds passed."""
        deadline = time.monotonic() + timeout
        while True:
            with _NO_PROXY.open(f"{self.url}/__admin/otlp/spans", timeout=10) as r:
                spans = [s for s in json.loads(r.read())["spans"] if s["trace_id"] == trace_id]
            if len(spans) >= want or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def provider(self, name: str, spec: dict) -> None:
        """Sets how simulated model provider `name` answers `/llm/{name}/...` (tests/upstream/src/provider.rs)."""
        req = urllib.request.Request(f"{self.url}/__admin/provider/{name}", data=json.dumps(spec).encode(), method="POST")
        with _NO_PROXY.open(req, timeout=10) as r:
            assert 200 <= r.status < 300, r.read()

    def provider_log(self, name: str) -> dict:
        """`{"count": n, "requests": [{"n", "model", "stream", "body", "at_ms", "outcome"}]}` of provider `name`."""
        with _NO_PROXY.open(f"{self.url}/__admin/provider-log/{name}", timeout=10) as r:
            return json.loads(r.read())


@pytest.fixture(scope="session")
def upstream():
    proc = subprocess.Popen([_upstream_bin()], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        info = json.loads(line)
        yield Upstream(proc, info)
    finally:
        # Closing stdin is the upstream's signal to exit; kill it if it does not.
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def config(upstream):
    """A one-service (`svc`) config on the upstream, logs off."""

    def make(**svc):
        return {"client": {"name": "pytest"}, "log": {"enabled": False}, "services": {"svc": {"base_url": upstream.url, **svc}}}

    return make


@pytest.fixture
def sigint():
    """Python's own Ctrl-C handler for the test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt (what the Ctrl-C tests check the binding honours)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
