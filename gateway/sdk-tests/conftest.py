"""The Python suite's world: the loopback upstream with its simulated providers, and
`harness serve` in front of it, both real processes (see world.json, shared with Node)."""

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = ROOT / "target" / "x86_64-unknown-linux-gnu" / "debug"
WORLD = json.loads((HERE / "world.json").read_text())


def _http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read() or b"null")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gateway_config(upstream_url):
    """world.json's config with the upstream's address and the callers' key hashes filled in."""
    text = json.dumps(WORLD["config"]).replace("{llm}", f"{upstream_url}/llm/")
    config = json.loads(text)
    for name, caller in config["callers"].items():
        caller["key_sha256"] = hashlib.sha256(WORLD["keys"][name].encode()).hexdigest()
    return config


class World:
    def __init__(self, upstream_url, gateway_url):
        self.upstream_url = upstream_url
        self.base_url = f"{gateway_url}/v1"
        self.keys = WORLD["keys"]
        self.providers = WORLD["providers"]

    def provider_log(self, name):
        return _http("GET", f"{self.upstream_url}/__admin/provider-log/{name}")[1]


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway")
    upstream = subprocess.Popen(
        [os.environ.get("HARNESS_UPSTREAM_BIN", str(BIN / "harness-upstream"))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    gateway = None
    try:
        addrs = json.loads(upstream.stdout.readline())
        upstream_url = f"http://{addrs['addr']}"
        for name, spec in WORLD["providers"].items():
            assert _http("POST", f"{upstream_url}/__admin/provider/{name}", spec)[0] == 200

        config_path = tmp / "harness.json"
        config_path.write_text(json.dumps(gateway_config(upstream_url), indent=2))
        port = _free_port()
        log_path = tmp / "gateway.log"
        with open(log_path, "wb") as log:
            gateway = subprocess.Popen(
                [os.environ.get("HARNESS_BIN", str(BIN / "harness")), "serve", "--config", str(config_path), "--listen", f"127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        gateway_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert gateway.poll() is None, f"harness serve exited with {gateway.returncode}:\n{log_path.read_text()}"
            try:
                if _http("GET", f"{gateway_url}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no /healthz within 30 s:\n{log_path.read_text()}"
            time.sleep(0.05)

        yield World(upstream_url, gateway_url)

        gateway.send_signal(signal.SIGTERM)
        code = gateway.wait(timeout=30)
        gateway = None
        assert code == 0, f"harness serve exited with {code} after SIGTERM:\n{log_path.read_text()}"
    finally:
        if gateway is not None:
            gateway.kill()
            gateway.wait()
        upstream.stdin.close()
        upstream.wait(timeout=10)
