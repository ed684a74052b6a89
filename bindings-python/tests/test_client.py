"""The Python API beyond the vectors: responses, cancellation, threads, fork, errors, config."""

import asyncio
import inspect
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import harness
from harness import _native

SECRET = "s3cr3t-T0KEN-value"


def wait_for_permits(client, service="svc", timeout=2.0):
    deadline = time.monotonic() + timeout
    while client.bulkhead_in_use(service) != 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    return client.bulkhead_in_use(service)


# ---- responses -----------------------------------------------------------------------------


def test_response_fields_and_case_insensitive_headers(upstream, config):
    upstream.script("resp", [{"json": {"hello": "wörld"}, "headers": {"X-Thing": "1"}}])
    with harness.Client(config()) as c:
        r = c.get("svc", "/s/resp/a", params={"q": "v", "n": 2, "many": ["x", "y"]})
        assert r.status == 200 and r.attempts == 1 and re.fullmatch(r"[0-9a-f]{32}", r.trace_id)
        assert r.headers["Content-Type"] == r.headers["content-type"] == "application/json"
        assert "X-THING" in r.headers and r.headers.get("x-thing") == "1"
        assert r.json() == {"hello": "wörld"} and "wörld" in r.text and isinstance(r.content, bytes)
        assert r.elapsed_ms > 0
    assert upstream.log("resp")[0]["path"].startswith("/s/resp/a")


@pytest.mark.parametrize("verb", ["get", "post", "put", "patch", "delete"])
def test_shortcut_methods(upstream, config, verb):
    upstream.script("verbs", [{"status": 200}])
    with harness.Client(config()) as c:
        assert getattr(c, verb)("svc", "/s/verbs/x", content=b"raw" if verb != "get" else None).status == 200

    async def go():
        async with harness.AsyncClient(config()) as a:
            return await getattr(a, verb)("svc", "/s/verbs/x", json={"k": [1, 2]} if verb != "get" else None)

    assert asyncio.run(go()).status == 200
    assert [r["method"] for r in upstream.log("verbs")] == [verb.upper()] * 2


def test_json_and_content_bodies_are_sent(upstream, config):
    upstream.script("bodies", [{"status": 200, "times": 3}])
    with harness.Client(config()) as c:
        c.post("svc", "/s/bodies/a", json={"a": 1, "b": [True, None, 1.5]})
        c.post("svc", "/s/bodies/b", content=b"\x00bin")
        c.post("svc", "/s/bodies/c", content="text")
    bodies = [r["body"] for r in upstream.log("bodies")]
    assert bodies[0] == '{"a":1,"b":[true,null,1.5]}' and bodies[2] == "text"


def test_metrics_text(upstream, config):
    with harness.Client(config()) as c:
        c.get("svc", "/bench")
        m = c.metrics()
    assert "harness_requests_total" in m and 'service="svc"' in m


def test_closed_client_refuses(upstream, config):
    with harness.Client(config()) as c:
        pass
    assert c.closed
    with pytest.raises(harness.HarnessError, match="closed"):
        c.get("svc", "/bench")


def test_config_from_a_file(upstream, tmp_path):
    p = tmp_path / "harness.yaml"
    p.write_text(f"log: {{enabled: false}}\nservices:\n  svc:\n    base_url: {upstream.url}\n")
    with harness.Client(p) as c:
        assert c.get("svc", "/bench").json() == {"ok": True}
    with harness.Client(str(p)) as c:
        assert c.get("svc", "/bench").status == 200


# ---- cancellation and concurrency ----------------------------------------------------------


def test_thousand_cancelled_asyncio_tasks_leak_no_permit(upstream, config):
    upstream.script("cancel1k", [{"delay_ms": 2000}])

    async def go():
        client = harness.AsyncClient(config(bulkhead={"max_concurrency": 2000}, retry={"max_retries": 0}))
        tasks = [asyncio.ensure_future(client.get("svc", "/s/cancel1k/x")) for _ in range(1000)]
        await asyncio.sleep(0.3)
        held = client.bulkhead_in_use("svc")
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return client, held, results

    client, held, results = asyncio.run(go())
    assert held > 0, "the requests should have been in flight when cancelled"
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert wait_for_permits(client) == 0
    assert 'harness_bulkhead_permits_in_use{service="svc"} 0' in client.metrics()


def test_sixteen_threads_share_one_sync_client(upstream, config):
    upstream.script("threads", [{"delay_ms": 200}])
    with harness.Client(config()) as c:
        # Warm up the pool so the timing below measures waiting, not connecting.
        c.get("svc", "/bench")
        start = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(lambda _: c.get("svc", "/s/threads/x").status, range(16)))
        wall = time.perf_counter() - start
        assert statuses == [200] * 16
        # 16 x 200 ms in well under 16 x 200 ms: the GIL is released while waiting.
        assert wall < 1.5, wall
        with ThreadPoolExecutor(16) as pool:
            assert set(pool.map(lambda _: c.get("svc", "/bench").status, range(800))) == {200}
        assert c.bulkhead_in_use("svc") == 0


def test_ctrl_c_interrupts_a_sync_call_within_100ms(upstream, config, sigint):
    upstream.script("ctrlc", [{"action": "hang"}])
    with harness.Client(config()) as c:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            c.get("svc", "/s/ctrlc/x")
        late = time.perf_counter() - start - 0.2
        assert late < 0.1, f"interrupted {late * 1000:.0f} ms after Ctrl-C"
        assert wait_for_permits(c) == 0


def test_async_call_outside_a_loop_is_a_clear_error(upstream, config):
    c = harness.AsyncClient(config())
    coro = c.get("svc", "/bench")
    with pytest.raises(RuntimeError):
        coro.send(None)  # driven without a running loop
    assert c.bulkhead_in_use("svc") == 0


# ---- fork ----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_a_clear_error_and_never_hangs(upstream, config):
    client = harness.Client(config())
    assert client.get("svc", "/bench").status == 200  # the runtime runs in the parent
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report and leave without running parent cleanups
        try:
            os.close(r)
            lines = []
            for make in (lambda: client, lambda: harness.Client(config())):
                try:
                    make().get("svc", "/bench")
                    lines.append("ok")
                except harness.HarnessError as e:
                    lines.append(f"{type(e).__name__}|{e}")
            os.write(w, "\n".join(lines).encode())
        finally:
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 15)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    for line in out.decode().splitlines():
        assert line == "ok" or (line.startswith("HarnessError|") and "fork" in line), line
    assert client.get("svc", "/bench").status == 200  # the parent is unaffected


_FORK_SCRIPT = """
import asyncio, json, multiprocessing, sys
import harness

CFG = {"log": {"enabled": False}, "services": {"svc": {"base_url": sys.argv[1]}}}
# Module-level clients, as under gunicorn --preload, used before the fork.
client = harness.Client(CFG)
aclient = harness.AsyncClient(CFG)


def outcome(call):
    try:
        return "ok %d" % call().status
    except harness.HarnessError as e:
        return "%s|%s" % (e.kind, e)


async def parents_async():
    return await aclient.get("svc", "/bench")


async def new_async():
    async with harness.AsyncClient(CFG) as c:
        return await c.get("svc", "/bench")


def child(queue):
    queue.put({
        "bridges": len(harness._BRIDGES),
        "parent_sync": outcome(lambda: client.get("svc", "/bench")),
        "parent_async": outcome(lambda: asyncio.run(parents_async())),
        "new_sync": outcome(lambda: harness.Client(CFG).get("svc", "/bench")),
        "new_async": outcome(lambda: asyncio.run(new_async())),
    })


if __name__ == "__main__":
    assert client.get("svc", "/bench").status == 200
    loop = asyncio.new_event_loop()  # kept open: its bridge (an eventfd) is live at the fork
    assert loop.run_until_complete(parents_async()).status == 200 and len(harness._BRIDGES) == 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    try:
        result = queue.get(timeout=30)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    result["parent_after"] = outcome(lambda: client.get("svc", "/bench"))
    result["parent_async_after"] = outcome(lambda: loop.run_until_complete(parents_async()))
    print(json.dumps(result))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_multiprocessing_fork_child_builds_new_clients_and_refuses_the_parents(upstream, tmp_path):
    script = tmp_path / "fork_child.py"  # a file, so the __main__ guard works as in an application
    script.write_text(_FORK_SCRIPT)
    out = subprocess.run([sys.executable, str(script), upstream.url], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["bridges"] == 0, "the child must not reuse its parent's eventfd bridge"
    for key in ("parent_sync", "parent_async"):
        kind, _, text = result[key].partition("|")
        assert kind == "HarnessError" and "fork" in text and "new client" in text, result[key]
    assert result["new_sync"] == result["new_async"] == "ok 200", result
    assert result["parent_after"] == result["parent_async_after"] == "ok 200", result


# ---- exceptions ----------------------------------------------------------------------------


def test_exception_tree_matches_the_core_names():
    assert _native.ERROR_NAMES[0] == "HarnessError"
    for name in _native.ERROR_NAMES:
        cls = getattr(harness, name)
        assert issubclass(cls, harness.HarnessError) and issubclass(cls, Exception)
        assert cls.__name__ == name and cls.__module__ == "harness" and cls.__doc__
        assert name in harness.__all__
    # ... and every exception class is one of the core's kinds.
    assert set(harness._errors.__all__) == set(_native.ERROR_NAMES)


def test_http_status_error_attributes_and_no_secret(upstream, config):
    upstream.script("attrs", [{"status": 409, "json": {"code": "ORDER_EXISTS", "message": "order already exists", "token": SECRET}}])
    cfg = config(headers={"authorization": f"Bearer {SECRET}"}, retry={"max_retries": 0})
    with harness.Client(cfg) as c:
        with pytest.raises(harness.HttpStatusError) as info:
            c.post("svc", "/s/attrs/orders/42", json={}, params={"api_key": SECRET}, headers={"x-api-key": SECRET})
        assert SECRET not in repr(c) and SECRET not in str(c)
    e = info.value
    assert (e.status, e.code, e.service, e.method, e.endpoint, e.attempts) == (409, "ORDER_EXISTS", "svc", "POST", "/s/attrs/orders/{id}", 1)
    assert re.fullmatch(r"[0-9a-f]{32}", e.trace_id) and e.retry_after_ms is None and e.kind == "HttpStatusError"
    assert b"ORDER_EXISTS" in e.body
    text = str(e) + repr(e) + str(e.args)
    assert "order already exists" in text and "409" in text
    assert SECRET not in text and "api_key" not in text


def test_timeout_error_has_a_phase(upstream, config):
    upstream.script("slow", [{"delay_ms": 1000}])
    with harness.Client(config(timeouts={"response_ms": 100}, retry={"max_retries": 0})) as c:
        with pytest.raises(harness.TimeoutError) as info:
            c.get("svc", "/s/slow/x")
    assert info.value.phase == "response" and info.value.attempts == 1 and isinstance(info.value, harness.HarnessError)


def test_rate_limited_error_carries_retry_after(upstream, config):
    upstream.script("rl", [{"status": 429, "retry_after": "2"}])
    with harness.Client(config(retry={"max_retries": 0})) as c:
        with pytest.raises(harness.HarnessError) as info:
            c.get("svc", "/s/rl/x")
    assert info.value.retry_after_ms == 2000 and info.value.status == 429


def test_exceptions_pickle():
    import pickle

    e = harness.TimeoutError("slow (service=svc)", message="slow", service="svc", attempts=2, phase="total")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is harness.TimeoutError and e2.service == "svc" and e2.attempts == 2 and e2.phase == "total"


# ---- bad config and bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg, field",
    [
        ({"services": {"orders": {"base_url": "http://x", "retry": {"max_retries": -1}}}}, "services.orders.retry.max_retries"),
        ({"services": {"orders": {"base_url": "http://x", "timeouts": {"connect_ms": "soon"}}}}, "services.orders.timeouts.connect_ms"),
        ({"services": {"orders": {}}}, "services.orders.base_url"),
        ({"services": {"orders": {"base_url": "http://x", "bulkhead": {"max_concurrency": {1}}}}}, "services.orders.bulkhead.max_concurrency"),
        ({"services": {"orders": {"base_url": object()}}}, "config"),
        (42, "config"),
        ("/no/such/harness.yaml", ""),
    ],
)
def test_bad_config_is_a_config_error_naming_the_field(cfg, field):
    with pytest.raises(harness.ConfigError) as info:
        harness.Client(cfg)
    assert str(info.value).startswith(field), str(info.value)
    with pytest.raises(harness.ConfigError):
        harness.AsyncClient(cfg)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"params": 5}, "params"),
        ({"params": {"a": object()}}, "params.a"),
        ({"headers": {"x": 1}}, "headers.x"),
        ({"headers": "x: y"}, "headers"),
        ({"json": {"when": object()}}, "json"),
        ({"json": {}, "content": b""}, "json"),
        ({"content": 3}, "content"),
        ({"timeout_ms": -1}, "timeout_ms"),
        ({"timeout_ms": "1s"}, "timeout_ms"),
        ({"idempotency_key": 7}, "idempotency_key"),
        ({"endpoint": 7}, "endpoint"),
    ],
)
def test_bad_request_input_is_a_config_error_naming_the_argument(upstream, config, kwargs, field):
    with harness.Client(config()) as c:
        with pytest.raises(harness.ConfigError) as info:
            c.post("svc", "/bench", **kwargs)
        assert str(info.value).startswith(field + ":"), str(info.value)
        with pytest.raises(harness.ConfigError):
            c.request(None, "GET", "/x")  # type: ignore[arg-type]
        with pytest.raises(harness.ConfigError, match="unknown service"):
            c.get("nope", "/x")
        assert c.bulkhead_in_use("svc") == 0


# ---- typing and docs -----------------------------------------------------------------------


def _public(obj):
    return [n for n, _ in inspect.getmembers(obj) if not n.startswith("_")]


def test_every_public_name_has_a_docstring_and_a_stub():
    # The package is typed inline (mypy --strict: test_types.py); views and the chat answer are
    # generated into _types.py and the exceptions live in _errors.py: a member is typed in one.
    here = Path(harness.__file__).parent
    stub = "".join((here / f).read_text() for f in ("__init__.py", "_types.py", "_errors.py", "_idempotency.py", "_events.py", "_embed.py", "_adapters.py"))
    native_stub = (Path(harness.__file__).parent / "_native.pyi").read_text()
    assert (Path(harness.__file__).parent / "py.typed").exists()
    for name in harness.__all__:
        obj = getattr(harness, name)
        assert obj.__doc__, name
        assert re.search(rf"\b{name}\b", stub), f"{name} missing from the typed package"
        if inspect.isclass(obj):
            for member in _public(obj):
                # Inherited from Exception, Mapping and tuple (Usage is a NamedTuple).
                if member in ("args", "with_traceback", "add_note", "get", "items", "keys", "values", "count", "index"):
                    continue
                assert inspect.getdoc(getattr(obj, member)), f"{name}.{member}"
                assert re.search(rf"\b{member}\b", stub), f"{name}.{member} missing from the typed package"
    for member in _public(_native.Client):
        assert getattr(_native.Client, member).__doc__, member
        assert member in native_stub, member


@pytest.mark.parametrize("cls", [harness.Client, harness.AsyncClient])
def test_describe_shows_services_and_routes_and_never_a_secret(cls):
    c = cls(
        {
            "client": {"name": "py-tests"},
            "log": {"enabled": False},
            "services": {
                "svc": {
                    "base_url": "http://user:pa55word@127.0.0.1:1",
                    "auth": {"type": "bearer", "token": {"value": "tok-SECRET-py"}},
                    "endpoints": {"GET /orders/{id}": {}},
                }
            },
            "routes": {"chat": {"providers": [{"id": "a", "service": "svc", "weight": 1}]}},
        }
    )
    d = c.describe()
    assert (d["client"], d["config_version"]) == ("py-tests", c.config_version)
    [svc] = d["services"]
    assert (svc["name"], svc["auth"], svc["base_url"], svc["endpoints"]) == ("svc", "bearer", "http://user:***@127.0.0.1:1", ["GET /orders/{id}"])
    assert d["routes"] == [{"name": "chat", "strategy": "weighted-health", "providers": ["a"]}]
    assert "pa55word" not in repr(d) and "tok-SECRET-py" not in repr(d)


def test_timeout_ms_follows_the_cores_rule_a_whole_number_of_milliseconds(upstream, config):
    # The same rule in every language (harness_core::request::millis): whole, >= 0.
    c = harness.Client(config())
    for bad in (0.5, 1.5, -1, float("nan"), float("inf"), "100", True):
        with pytest.raises(harness.ConfigError, match=r"^timeout_ms: expected an integer >= 0"):
            c.get("svc", "/bench", timeout_ms=bad)
    assert c.get("svc", "/bench", timeout_ms=5000.0).status == 200
    assert c.get("svc", "/bench", timeout_ms=5000).status == 200


def test_config_source_state_says_what_this_instance_runs_and_is_a_config_error_without_one():
    plain = harness.Client({"log": {"enabled": False}, "services": {}})
    with pytest.raises(harness.ConfigError, match="this client has no config_source"):
        plain.config_source_state()
    # Redis at a closed port: the bootstrap config runs, and the state says so.
    source = {"redis_url": "redis://127.0.0.1:1/0", "name": "shop", "instance_id": "py-1", "poll_ms": 100}
    c = harness.Client({"log": {"enabled": False}, "services": {}, "config_source": source})
    s = c.config_source_state()
    assert (s["name"], s["instance"], s["version"], s["applied_from"], s["connected"]) == ("shop", "py-1", 0, "bootstrap", False)
    assert s["rejected_version"] is None and s["target"] == 0
    assert "redis_url" not in s and "127.0.0.1:1" not in repr(s)
