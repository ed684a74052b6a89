"""The console's world: the loopback upstream with simulated providers, two real `harness serve`
processes in front of it (a tidy one for the screenshots and the operations, one full of hostile
names), and Debian's Chromium driven by chromedriver (no browser is downloaded). For the fleet:
a real `redis-server` on a free loopback port and three more `harness serve` following the fleet
config source in it (two instances of a tidy fleet, one of a fleet with hostile names)."""

import hashlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = ROOT / "target" / "x86_64-unknown-linux-gnu" / "debug"
ADMIN_KEY = "admin-console-key-0123456789"
CALLER_KEYS = {"checkout": "sk-checkout-0123456789", "reports": "sk-reports-0123456789"}
SERVICE_SECRET = "svc-orders-secret-0123456789"

# Outside strings that must arrive as text: markup that would run, an RTL override, 10 KB.
SCRIPT = "<img src=x onerror=window.__pwned=2><script>window.__pwned=1</script>"
RTL = "invoice\u202egnp.exe"
LONG = "N" * (10 * 1024)

PROVIDERS = {
    "up-a": {"content": "Hello from provider a.", "prompt_tokens": 40, "completion_tokens": 20, "latency_ms": 5},
    "up-b": {"content": "Hello from provider b.", "prompt_tokens": 40, "completion_tokens": 12, "latency_ms": 15},
    "shift-a": {"content": "answer from shift-a", "prompt_tokens": 10, "completion_tokens": 10},
    "shift-b": {"content": "answer from shift-b", "prompt_tokens": 10, "completion_tokens": 10},
    "evil": {"fail_rate": 1.0, "fail_status": 500, "error_message": f"{SCRIPT} {RTL} {LONG}"},
    "fine": {"content": "fine"},
}


def http(method, url, body=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def http_json(method, url, body=None, headers=None):
    status, raw, _ = http(method, url, body, headers)
    return status, json.loads(raw or b"null")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def service(llm, name, **extra):
    return {"base_url": f"{llm}{name}", "retry": {"max_retries": 0}, "timeouts": {"response_ms": 3000}, **extra}


def tidy_config(upstream):
    llm = f"{upstream}/llm/"
    return {
        "log": {"enabled": False},
        "services": {
            "up-a": service(llm, "up-a"), "up-b": service(llm, "up-b"),
            "shift-a": service(llm, "shift-a"), "shift-b": service(llm, "shift-b"),
            "orders": {"base_url": upstream, "retry": {"max_retries": 0}, "timeouts": {"response_ms": 1000},
                       "auth": {"type": "header", "header": "x-api-key", "keys": [{"value": SERVICE_SECRET}]},
                       "bulkhead": {"max_concurrency": 16}, "rate_limit": {"rps": 50, "burst": 20}},
        },
        "routes": {
            "chat": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
                {"id": "a", "service": "up-a", "model": "gpt-large", "weight": 1, "price": {"input_per_1k": 0.5, "output_per_1k": 1.5}},
                {"id": "b", "service": "up-b", "model": "claude-mid", "weight": 1, "price": {"input_per_1k": 0.3, "output_per_1k": 1.2}}]},
            "shift": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
                {"id": "a", "service": "shift-a", "model": "shift-model-a", "weight": 1, "price": {"input_per_1k": 1, "output_per_1k": 1}},
                {"id": "b", "service": "shift-b", "model": "shift-model-b", "weight": 1, "price": {"input_per_1k": 1, "output_per_1k": 1}}]},
        },
        "callers": {
            "checkout": {"key_sha256": sha(CALLER_KEYS["checkout"]), "routes": ["*"], "services": ["*"], "budget_per_day": 5.0},
            "reports": {"key_sha256": sha(CALLER_KEYS["reports"]), "routes": ["chat"], "rate_limit": {"rps": 1, "burst": 1, "max_wait_ms": 0}},
        },
        "gateway": {"admin_key_sha256": sha(ADMIN_KEY), "drain_ms": 3000},
    }


def hostile_config(upstream):
    llm = f"{upstream}/llm/"
    return {
        "log": {"enabled": False},
        "services": {"evil": service(llm, "evil"), "fine": service(llm, "fine")},
        "routes": {"hostile": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
            {"id": "a", "service": "evil", "model": f"{SCRIPT}{RTL}", "weight": 1},
            {"id": "b", "service": "fine", "model": LONG, "weight": 1}]}},
        "callers": {SCRIPT: {"key_sha256": sha("sk-hostile-0123456789"), "routes": ["*"]}},
        "gateway": {"admin_key_sha256": sha(ADMIN_KEY), "drain_ms": 3000},
    }


class Gateway:
    def __init__(self, tmp, name, config):
        self.config_path = tmp / f"{name}.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.log_path = tmp / f"{name}.log"
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [os.environ.get("HARNESS_BIN", str(BIN / "harness")), "serve", "--config", str(self.config_path), "--listen", f"127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, f"harness serve exited with {self.proc.returncode}:\n{self.log_path.read_text()}"
            try:
                if http("GET", f"{self.url}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no /healthz within 30 s:\n{self.log_path.read_text()}"
            time.sleep(0.05)

    def chat(self, key, route):
        return http_json("POST", f"{self.url}/v1/chat/completions", {"model": route, "messages": [{"role": "user", "content": "hi"}]},
                         {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})

    def admin(self, method, path, body=None):
        return http_json(method, f"{self.url}{path}", body, {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"})

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        assert code == 0, f"harness serve exited with {code} after SIGTERM:\n{self.log_path.read_text()}"

    def audit_lines(self):
        return [json.loads(l) for l in self.log_path.read_text().splitlines() if '"harness.admin_action"' in l]


class Redis:
    """A real redis-server on a free loopback port, nothing written to disk."""

    def __init__(self, tmp):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_path = tmp / "redis.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [os.environ.get("REDIS_SERVER", "/usr/bin/redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                cwd=tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self.ping():
            assert self.proc.poll() is None, f"redis-server exited with {self.proc.returncode}:\n{self.log_path.read_text()}"
            assert time.monotonic() < deadline, f"redis-server did not answer within 10 s:\n{self.log_path.read_text()}"
            time.sleep(0.05)

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class World:
    def __init__(self, upstream, tidy, hostile):
        self.upstream = upstream
        self.tidy = tidy
        self.hostile = hostile

    def provider(self, name, spec):
        assert http_json("POST", f"{self.upstream}/__admin/provider/{name}", spec)[0] == 200

    def provider_count(self, name):
        return http_json("GET", f"{self.upstream}/__admin/provider-log/{name}")[1]["count"]


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    upstream = subprocess.Popen([os.environ.get("HARNESS_UPSTREAM_BIN", str(BIN / "harness-upstream"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    gateways = []
    try:
        upstream_url = f"http://{json.loads(upstream.stdout.readline())['addr']}"
        for name, spec in PROVIDERS.items():
            assert http_json("POST", f"{upstream_url}/__admin/provider/{name}", spec)[0] == 200
        tidy = Gateway(tmp, "tidy", tidy_config(upstream_url))
        gateways.append(tidy)
        hostile = Gateway(tmp, "hostile", hostile_config(upstream_url))
        gateways.append(hostile)
        yield World(upstream_url, tidy, hostile)
        for g in gateways:
            g.stop()
        gateways = []
    finally:
        for g in gateways:
            g.proc.kill()
            g.proc.wait()
        upstream.stdin.close()
        upstream.wait(timeout=10)


# ---- the fleet ----

FLEET = "shop"
# Instance ids pick the canary share (the first 8 bytes of their SHA-256, little-endian,
# modulo 10,000 basis points): edge-1 falls at 39.83 %, edge-7 at 5.33 %, so a 10 % canary
# lands on edge-7 only.
FLEET_INSTANCES = ("edge-1", "edge-7")
# Names become Redis keys (no spaces or glob characters), but markup and an RTL override are allowed.
HOSTILE_FLEET = "<svg/onload=window.__pwned=4>"
HOSTILE_INSTANCE = f"<img/src=x/onerror=window.__pwned=3>{RTL}"
FLEET_PROVIDERS = {
    "fleet-a": {"content": "answer from fleet-a", "prompt_tokens": 10, "completion_tokens": 10, "latency_ms": 5},
    "fleet-b": {"content": "answer from fleet-b", "prompt_tokens": 10, "completion_tokens": 10, "latency_ms": 5},
}


def bucket(instance):
    """Where an instance falls in 0..10000, as the core's `fleet::bucket` computes it."""
    return int.from_bytes(hashlib.sha256(instance.encode()).digest()[:8], "little") % 10_000


def fleet_version(upstream, a_weight):
    """A version as pushed: the core's sections only (a gateway keeps its own `gateway` and
    `callers`); route chat prefers provider a unless its weight is 0."""
    llm = f"{upstream}/llm/"
    return {
        "log": {"enabled": False},
        "services": {"fleet-a": service(llm, "fleet-a"), "fleet-b": service(llm, "fleet-b")},
        "routes": {"chat": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
            {"id": "a", "service": "fleet-a", "model": "model-a", "weight": a_weight, "price": {"input_per_1k": 0.5, "output_per_1k": 1.5}},
            {"id": "b", "service": "fleet-b", "model": "model-b", "weight": 1, "price": {"input_per_1k": 0.3, "output_per_1k": 1.2}}]}},
    }


def fleet_gateway_config(upstream, redis_url, name, instance):
    """The bootstrap a fleet instance starts from: the fleet config source, its own gateway and
    callers, and version 0's services and routes (in force until a version is pushed)."""
    return {
        **fleet_version(upstream, 1),
        "config_source": {"redis_url": redis_url, "name": name, "poll_ms": 1000, "heartbeat_ms": 300, "instance_id": instance},
        "callers": {"checkout": {"key_sha256": sha(CALLER_KEYS["checkout"]), "routes": ["*"], "services": ["*"]}},
        "gateway": {"admin_key_sha256": sha(ADMIN_KEY), "drain_ms": 3000},
    }


class Fleet:
    def __init__(self, tmp, world):
        self.tmp = tmp
        self.world = world
        self.redis = Redis(tmp)
        self.gateways = {}
        self.pushes = 0

    def start(self, name, instance):
        cfg = fleet_gateway_config(self.world.upstream, self.redis.url, name, instance)
        g = Gateway(self.tmp, f"fleet-{len(self.gateways)}", cfg)
        self.gateways[(name, instance)] = g
        return g

    def cli(self, *args):
        """`harness config ...` against this Redis, as an operator runs it."""
        out = subprocess.run([os.environ.get("HARNESS_BIN", str(BIN / "harness")), "config", *args],
                             env={**os.environ, "HARNESS_CONFIG_REDIS": self.redis.url}, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"harness config {' '.join(args)}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def push(self, name, a_weight, *flags):
        self.pushes += 1
        path = self.tmp / f"push-{self.pushes}.json"
        path.write_text(json.dumps(fleet_version(self.world.upstream, a_weight), indent=2))
        return self.cli("push", str(path), "--name", name, *flags)


@pytest.fixture(scope="session")
def fleet(world, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    for name, spec in FLEET_PROVIDERS.items():
        world.provider(name, spec)
    f = Fleet(tmp, world)
    try:
        for instance in FLEET_INSTANCES:
            f.start(FLEET, instance)
        f.start(HOSTILE_FLEET, HOSTILE_INSTANCE)
        yield f
        for g in list(f.gateways.values()):
            g.stop()
        f.gateways = {}
    finally:
        for g in f.gateways.values():
            g.proc.kill()
            g.proc.wait()
        f.redis.stop()


def make_browser(width=1280, height=900):
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    profile = tempfile.mkdtemp(prefix="harness-console-chromium-")
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions", "--lang=en-US",
                 "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={width},{height}", f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # The viewer's time zone is not the server's: times must be shown in this one.
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"), env={**os.environ, "TZ": "Asia/Kolkata"})
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser():
    driver = make_browser()
    yield driver
    driver.quit()
