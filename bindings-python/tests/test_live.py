"""The live engine from Python: reload and file watching, streaming bodies, listeners,
the `logging` sink, and the completion pattern (eventfd and the portable notifier)."""

import asyncio
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest

import harness


def wait_for(predicate, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def permits_freed(client, service="svc", timeout=1.0):
    return wait_for(lambda: client.bulkhead_in_use(service) == 0, timeout)


async def apermits_freed(client, service="svc", timeout=1.0):
    deadline = time.monotonic() + timeout
    while client.bulkhead_in_use(service) != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    return client.bulkhead_in_use(service) == 0


# ---- reload and config_version -------------------------------------------------------------


@pytest.mark.parametrize("make", [harness.Client, harness.AsyncClient])
def test_reload_from_a_dict_applies_and_an_invalid_one_keeps_the_old_config(upstream, config, make):
    upstream.script("reload_dict", [{"status": 200}])
    client = make(config(headers={"x-config": "one"}))
    try:
        before = client.config_version
        version = client.reload(config(headers={"x-config": "two"}))
        assert version == client.config_version != before
        with pytest.raises(harness.ConfigError) as info:
            client.reload(config(retry={"max_retries": -1}))
        assert "services.svc.retry.max_retries" in str(info.value)
        with pytest.raises(harness.ConfigError, match="^config:"):
            client.reload(42)
        assert client.config_version == version, "a rejected reload keeps the old config"
        if isinstance(client, harness.Client):
            client.get("svc", "/s/reload_dict/x")
        else:
            asyncio.run(client.get("svc", "/s/reload_dict/x"))
    finally:
        client.close()
    assert upstream.log("reload_dict")[-1]["headers"]["x-config"] == "two"


def test_reload_from_a_path_and_events_say_so(upstream, config, tmp_path):
    p = tmp_path / "next.json"
    p.write_text(json.dumps(config(retry={"max_retries": 3})))
    events = []
    with harness.Client(config()) as c:
        c.add_listener(events.append)
        version = c.reload(p)
        assert version == c.config_version == harness.Client(config(retry={"max_retries": 3})).config_version
        with pytest.raises(harness.ConfigError):
            c.reload(tmp_path / "missing.yaml")
        c.flush()
    kinds = [(e.type, e.source) for e in events]
    assert kinds[0] == ("config_reloaded", f"file:{p}") and kinds[1][0] == "config_rejected", kinds
    assert events[0].version == version and events[1].version == version


def test_config_version_is_equal_for_equal_configs(upstream, config, tmp_path):
    p = tmp_path / "same.yaml"
    p.write_text(f"log: {{enabled: false}}\nclient: {{name: pytest}}\nservices:\n  svc:\n    base_url: {upstream.url}\n")
    versions = {
        harness.Client(config()).config_version,
        harness.AsyncClient(config()).config_version,
        harness.Client.from_file(p).config_version,
        harness.Client(str(p)).config_version,
    }
    assert len(versions) == 1, versions
    (v,) = versions
    assert isinstance(v, str) and 6 <= len(v) <= 32
    assert harness.Client(config(retry={"max_retries": 2})).config_version != v


def _yaml(upstream, header):
    return f"log: {{enabled: false}}\nservices:\n  svc:\n    base_url: {upstream.url}\n    headers: {{x-config: {header}}}\n"


@pytest.mark.parametrize("cls", [harness.Client, harness.AsyncClient])
def test_a_watched_file_reloads_and_an_invalid_edit_keeps_the_old_version(upstream, tmp_path, cls):
    p = tmp_path / "harness.yaml"
    p.write_text(_yaml(upstream, "one"))
    client = cls.from_file(p, watch=True)
    assert isinstance(client, cls)
    rejected = threading.Event()
    client.add_listener(lambda e: rejected.set() if e.type == "config_rejected" else None)
    try:
        first = client.config_version
        time.sleep(0.2)  # let the watcher settle
        p.write_text(_yaml(upstream, "two"))
        assert wait_for(lambda: client.config_version != first, 2.5), "the edit was not applied within 2.5 s"
        second = client.config_version
        p.write_text("services:\n  svc:\n    base_url: 42\n    retry: {max_retries: -1}\n")
        assert rejected.wait(3), "the invalid edit raised no config_rejected event"
        assert client.config_version == second
    finally:
        client.close()
    with pytest.raises(harness.ConfigError, match="^path:"):
        cls.from_file({"services": {}})  # type: ignore[arg-type]


# ---- streaming -----------------------------------------------------------------------------

SLOW_TAIL = [{"chunks": [{"data": "one;"}, {"data": "two;", "delay_ms": 20}, {"data": "three;", "delay_ms": 3000}]}]


def test_stream_reads_bytes_lines_and_the_whole_body(upstream, config):
    upstream.script("st_lines", [{"chunks": [{"data": "al"}, {"data": "pha\r\nbe", "delay_ms": 10}, {"data": "ta\n\ngam"}, {"data": "ma"}]}])
    with harness.Client(config()) as c:
        with c.stream("svc", "GET", "/s/st_lines/x", params={"q": 1}) as r:
            assert r.status == 200 and r.attempts == 1 and len(r.trace_id) == 32
            assert r.headers["Transfer-Encoding"] == "chunked" and isinstance(r.headers, harness.Headers)
            assert list(r.iter_lines()) == ["alpha", "beta", "", "gamma"]
        with c.stream("svc", "GET", "/s/st_lines/x") as r:
            assert r.read() == b"alpha\r\nbeta\n\ngamma" and r.read() is r.read()
        with c.stream("svc", "GET", "/s/st_lines/x") as r:
            assert b"".join(r.iter_bytes()) == b"alpha\r\nbeta\n\ngamma"
        assert permits_freed(c)

    async def go():
        async with harness.AsyncClient(config()) as a:
            async with a.stream("svc", "GET", "/s/st_lines/x") as r:
                lines = [line async for line in r.aiter_lines()]
            async with a.stream("svc", "GET", "/s/st_lines/x") as r:
                body = await r.aread()
            return lines, body, await apermits_freed(a)

    assert asyncio.run(go()) == (["alpha", "beta", "", "gamma"], b"alpha\r\nbeta\n\ngamma", True)


def test_stream_early_break_frees_the_permit_at_once(upstream, config):
    upstream.script("st_break", SLOW_TAIL)
    with harness.Client(config()) as c:
        start = time.perf_counter()
        with c.stream("svc", "GET", "/s/st_break/x") as r:
            for chunk in r.iter_bytes():
                assert chunk == b"one;"
                assert c.bulkhead_in_use("svc") == 1
                break
        assert permits_freed(c) and time.perf_counter() - start < 1.5
        assert c.breaker_state("svc", "GET", "/s/st_break/x") == "closed"


def test_stream_exception_in_the_block_frees_the_permit(upstream, config):
    upstream.script("st_raise", SLOW_TAIL)
    with harness.Client(config()) as c:
        with pytest.raises(ValueError):
            with c.stream("svc", "GET", "/s/st_raise/x") as r:
                next(r.iter_bytes())
                raise ValueError("consumer failed")
        assert permits_freed(c)


def test_stream_task_cancel_frees_the_permit(upstream, config):
    upstream.script("st_cancel", SLOW_TAIL)
    upstream.script("st_cancel_open", [{"delay_ms": 3000}])

    async def consume(a, path, started):
        async with a.stream("svc", "GET", path) as r:
            async for _ in r.aiter_bytes():
                started.set()

    async def go():
        async with harness.AsyncClient(config(retry={"max_retries": 0})) as a:
            results = []
            for path in ("/s/st_cancel/x", "/s/st_cancel_open/x"):
                started = asyncio.Event()
                task = asyncio.ensure_future(consume(a, path, started))
                if "open" in path:
                    await asyncio.sleep(0.3)  # waiting for the head
                else:
                    await asyncio.wait_for(started.wait(), 2)  # waiting for the third chunk
                assert a.bulkhead_in_use("svc") == 1
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    results.append("cancelled")
                results.append(await apermits_freed(a))
            return results

    assert asyncio.run(go()) == ["cancelled", True, "cancelled", True]


def test_async_early_break_frees_the_permit(upstream, config):
    upstream.script("st_abreak", SLOW_TAIL)

    async def go():
        async with harness.AsyncClient(config()) as a:
            async with a.stream("svc", "GET", "/s/st_abreak/x") as r:
                async for chunk in r.aiter_bytes():
                    break
            return chunk, await apermits_freed(a)

    assert asyncio.run(go()) == (b"one;", True)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stream_error_status_raises_on_entering_the_block(upstream, config, mode):
    upstream.script("st_503", [{"status": 503, "json": {"code": "down"}}])
    cfg = config(retry={"max_retries": 0})
    if mode == "sync":
        with harness.Client(cfg) as c:
            with pytest.raises(harness.HttpStatusError) as info:
                with c.stream("svc", "GET", "/s/st_503/x"):
                    pytest.fail("the block must not run")
            assert permits_freed(c)
    else:

        async def go():
            async with harness.AsyncClient(cfg) as a:
                async with a.stream("svc", "GET", "/s/st_503/x"):
                    pytest.fail("the block must not run")

        with pytest.raises(harness.HttpStatusError) as info:
            asyncio.run(go())
    assert info.value.status == 503 and info.value.code == "down"


def test_stream_idle_timeout_and_cut_raise_while_reading(upstream, config):
    upstream.script("st_idle", [{"chunks": [{"data": "a"}, {"data": "b", "delay_ms": 1500}]}])
    upstream.script("st_cut", [{"chunks": [{"data": "partial"}], "cut": True}])
    with harness.Client(config(timeouts={"idle_ms": 200})) as c:
        with c.stream("svc", "GET", "/s/st_idle/x") as r:
            with pytest.raises(harness.TimeoutError) as info:
                r.read()
        assert info.value.phase == "idle"
        with c.stream("svc", "GET", "/s/st_cut/x") as r:
            with pytest.raises((harness.ConnectError, harness.ProtocolError)):
                list(r.iter_bytes())
        assert permits_freed(c)


def test_ctrl_c_during_a_chunk_wait_interrupts_within_100ms(upstream, config, sigint):
    upstream.script("st_ctrlc", [{"chunks": [{"data": "a"}, {"data": "b", "delay_ms": 5000}]}])
    with harness.Client(config()) as c:
        with pytest.raises(KeyboardInterrupt):
            with c.stream("svc", "GET", "/s/st_ctrlc/x") as r:
                chunks = r.iter_bytes()
                assert next(chunks) == b"a"
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
                start = time.perf_counter()
                try:
                    next(chunks)
                finally:
                    late = time.perf_counter() - start - 0.2
        assert late < 0.1, f"interrupted {late * 1000:.0f} ms after Ctrl-C"
        assert permits_freed(c)


_GIB_SCRIPT = """
import json, resource, sys
import harness

cfg = {"log": {"enabled": False}, "services": {"svc": {"base_url": sys.argv[1], "timeouts": {"request_ms": 600000}}}}
with harness.Client(cfg) as c:
    with c.stream("svc", "GET", "/s/gib_warm/x") as r:  # the runtime, the pool and the code paths exist
        warm = sum(len(b) for b in r.iter_bytes())
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    total = 0
    with c.stream("svc", "GET", "/s/gib/x") as r:
        for chunk in r.iter_bytes():
            total += len(chunk)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    in_use = c.bulkhead_in_use("svc")
scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
print(json.dumps({"warm": warm, "total": total, "growth": (peak - base) * scale, "in_use": in_use}))
"""


def test_streaming_1_gib_keeps_peak_rss_growth_under_64_mib(upstream, tmp_path):
    upstream.script("gib_warm", [{"body_bytes": 4 << 20, "chunked": True}])
    upstream.script("gib", [{"body_bytes": 1 << 30, "chunked": True}])  # generated on the fly
    script = tmp_path / "gib.py"
    script.write_text(_GIB_SCRIPT)
    out = subprocess.run([sys.executable, str(script), upstream.url], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["warm"] == 4 << 20 and result["total"] == 1 << 30 and result["in_use"] == 0, result
    assert result["growth"] < 64 << 20, f"peak RSS grew by {result['growth'] / (1 << 20):.1f} MiB"


# ---- listeners -----------------------------------------------------------------------------


def test_events_are_objects_with_named_fields(upstream, config):
    upstream.script("ev_fields", [{"status": 503}])
    events = []
    with harness.Client(config(retry={"max_retries": 1, "base_delay_ms": 1}, breaker={"failure_threshold": 2})) as c:
        c.add_listener(events.append)
        with pytest.raises(harness.HttpStatusError):
            c.get("svc", "/s/ev_fields/x")
        c.flush()
    by_type = {e.type: e for e in events}
    assert {"retry_scheduled", "breaker_state_changed", "request_finished"} <= set(by_type), [e.type for e in events]
    done = by_type["request_finished"]
    assert isinstance(done, harness.Event)
    assert (done.service, done.method, done.status, done.attempts, done.error_kind) == ("svc", "GET", 503, 2, "HttpStatusError")
    assert done.to_dict()["type"] == "request_finished" and done.to_dict()["trace_id"] == done.trace_id
    assert by_type["retry_scheduled"].attempt == 1 and by_type["retry_scheduled"].reason == "HttpStatusError"
    assert by_type["breaker_state_changed"].to_dict()["to"] == "open"
    with pytest.raises(AttributeError):
        done.no_such_field  # noqa: B018
    assert "request_finished" in repr(done)
    assert pickle.loads(pickle.dumps(done)) == done and type(done).__module__ == "harness"


def test_a_listener_that_raises_is_reported_once_and_keeps_receiving(upstream, config, capfd):
    calls = []

    def bad(event):
        calls.append(event.type)
        raise RuntimeError("listener bug")

    good = []
    with harness.Client(config()) as c:
        c.add_listener(bad)
        c.add_listener(good.append)
        for _ in range(3):
            assert c.get("svc", "/bench").status == 200  # requests never fail for a listener
        c.flush()
        assert c.get("svc", "/bench").status == 200
    assert calls == ["request_finished"] * 4 and len(good) == 4
    err = capfd.readouterr().err
    reports = [line for line in err.splitlines() if "listener_failed" in line]
    assert len(reports) == 1 and "RuntimeError: listener bug" in reports[0], err


def test_an_async_listener_runs_on_its_loop(upstream, config, capfd):
    async def go():
        loop_thread = threading.get_ident()
        seen, failures = [], []

        async def listener(event):
            await asyncio.sleep(0)
            seen.append((event.type, threading.get_ident() == loop_thread))

        async def failing(event):
            failures.append(event.type)
            raise ValueError("async listener bug")

        async def settle(n):
            a.flush()
            for _ in range(200):
                if len(seen) == n and len(failures) == n:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.01)  # the coroutines' done callbacks run after them

        async with harness.AsyncClient(config()) as a:
            a.add_listener(listener)
            a.add_listener(failing)
            for _ in range(3):
                assert (await a.get("svc", "/bench")).status == 200  # a failing listener fails no request
            await settle(3)
            # A coroutine's failure reaches the core with the next event given to its listener.
            assert (await a.get("svc", "/bench")).status == 200
            await settle(4)
        return seen, failures

    seen, failures = asyncio.run(go())
    assert seen == [("request_finished", True)] * 4 and len(failures) == 4
    reports = [line for line in capfd.readouterr().err.splitlines() if "listener_failed" in line]
    assert len(reports) == 1 and "ValueError: async listener bug" in reports[0], reports


def test_an_async_listener_needs_a_running_loop(config):
    async def listener(event):
        pass

    with harness.Client(config()) as c:
        with pytest.raises(harness.ConfigError, match="^listener:"):
            c.add_listener(listener)
        with pytest.raises(harness.ConfigError, match="^listener:"):
            c.add_listener(42)  # type: ignore[arg-type]


_EXIT_SCRIPT = """
import logging, sys, time
import harness

logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(harness_trace_id)s")
client = harness.Client({"log": {"enabled": True, "sink": "python"}, "services": {"svc": {"base_url": sys.argv[1]}}})
client.add_listener(lambda event: time.sleep(0.002))  # events still queued at exit
for _ in range(int(sys.argv[2])):
    client.get("svc", "/bench")
# no close(): the interpreter exits with the event thread busy
"""


def test_exiting_with_events_in_flight_is_clean_and_delivers_the_last_records(upstream, tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(_EXIT_SCRIPT)
    for n in (50, 300):
        out = subprocess.run([sys.executable, str(script), upstream.url, str(n)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.split()) == n, (n, out.stdout.count("\n"), out.stderr)


# ---- logs ----------------------------------------------------------------------------------


def test_log_records_go_to_logging_with_their_fields(upstream, config, caplog):
    upstream.script("log_py", [{"status": 200}, {"status": 404}])
    cfg = {**config(retry={"max_retries": 0}), "log": {"enabled": True, "sink": "python"}}
    with caplog.at_level(logging.INFO, logger="harness"):
        with harness.Client(cfg) as c:
            c.get("svc", "/s/log_py/a")
            with pytest.raises(harness.HttpStatusError):
                c.get("svc", "/s/log_py/b")
        # close() flushed this client's records
    records = [r for r in caplog.records if r.name == "harness"]
    assert [r.levelno for r in records] == [logging.INFO, logging.WARNING], records
    ok, failed = records
    assert (ok.harness_service, ok.harness_method, ok.harness_status, ok.harness_attempts) == ("svc", "GET", 200, 1)
    assert ok.harness_endpoint == "/s/log_py/a" and len(ok.harness_trace_id) == 32 and ok.harness_error_kind is None
    assert failed.harness_error_kind == "HttpStatusError" and failed.harness_status == 404
    assert "GET svc /s/log_py/a -> 200" in ok.getMessage() and "HttpStatusError" in failed.getMessage()


def test_log_sink_python_is_per_client_and_off_when_disabled(upstream, config, caplog, capfd):
    with caplog.at_level(logging.INFO, logger="harness"):
        with harness.Client({**config(), "log": {"enabled": False, "sink": "python"}}) as off, harness.Client(config()) as other:
            off.get("svc", "/bench")
            other.get("svc", "/bench")  # log disabled, stderr sink: nowhere
        with harness.Client({**config(), "log": {"enabled": True}}) as stderr_client:
            stderr_client.get("svc", "/bench")
    assert not [r for r in caplog.records if r.name == "harness"]
    assert '"service":"svc"' in capfd.readouterr().err  # the default sink is the stderr JSON line


# ---- the completion pattern ----------------------------------------------------------------


def test_the_default_notifier_is_eventfd_on_linux(upstream, config):
    async def go():
        async with harness.AsyncClient(config()) as a:
            await a.get("svc", "/bench")
            return harness._BRIDGES[asyncio.get_running_loop()].kind

    assert asyncio.run(go()) == ("eventfd" if sys.platform.startswith("linux") else "socketpair")


def test_the_portable_notifier_carries_requests_streams_and_cancels(upstream, config, monkeypatch):
    monkeypatch.setattr(harness, "_PORTABLE_NOTIFIER", True)
    upstream.script("portable", SLOW_TAIL)
    upstream.script("portable_hang", [{"delay_ms": 3000}])

    async def go():
        async with harness.AsyncClient(config(retry={"max_retries": 0})) as a:
            replies = await asyncio.gather(*[a.get("svc", "/bench") for _ in range(200)])
            async with a.stream("svc", "GET", "/s/portable/x") as r:
                async for first in r.aiter_bytes():
                    break
            task = asyncio.ensure_future(a.get("svc", "/s/portable_hang/x"))
            await asyncio.sleep(0.2)
            task.cancel()
            cancelled = await asyncio.gather(task, return_exceptions=True)
            kind = harness._BRIDGES[asyncio.get_running_loop()].kind
            return {r.status for r in replies}, first, type(cancelled[0]), kind, await apermits_freed(a)

    assert asyncio.run(go()) == ({200}, b"one;", asyncio.CancelledError, "socketpair", True)


def test_the_portable_notifier_runs_the_async_vectors(upstream):
    """Every async streaming, cancel and parallel vector again, through the socket pair."""
    from test_vectors import SCENARIOS, run_async

    chosen = [s for s in SCENARIOS if any(k in c for c in s.get("calls", []) for k in ("stream", "cancel_after_ms", "parallel", "background"))]
    assert len(chosen) >= 8
    harness_flag = harness._PORTABLE_NOTIFIER
    harness._PORTABLE_NOTIFIER = True
    try:
        errors = [e for s in chosen for e in asyncio.run(run_async(upstream, s))]
    finally:
        harness._PORTABLE_NOTIFIER = harness_flag
    assert not errors, "\n".join(errors)
