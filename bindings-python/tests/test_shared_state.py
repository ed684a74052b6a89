"""Shared state from Python: the client-side rate limit error, and the idempotent receiver
(in memory; on a real redis-server, across OS processes; with the store down; signatures)."""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import harness

WEBHOOK_SECRET = "whsec-py-test-4242"


# ---- a real redis-server on a free loopback port --------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed (apt-get install -y redis-server; tests/run_all.sh installs it)")
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"redis-server did not start on port {self.port}")
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def redis():
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


def _unique(name: str) -> str:
    return f"{name}-{os.getpid()}-{time.monotonic_ns()}"


# ---- the client-side rate limit -------------------------------------------------------------


def test_over_the_client_rate_limit_raises_rate_limited_error_and_nothing_is_sent(upstream, config):
    upstream.script("rl-py", [{"status": 200}])
    cfg = config(rate_limit={"rps": 1, "burst": 1, "max_wait_ms": 0})
    with harness.Client(cfg) as c:
        assert c.get("svc", "/s/rl-py/a").status == 200
        with pytest.raises(harness.RateLimitedError) as info:
            c.get("svc", "/s/rl-py/a")
        assert 'harness_rate_limited_total{service="svc"} 1' in c.metrics()
    e = info.value
    assert (e.code, e.status, e.service, e.kind) == ("client_rate_limited", None, "svc", "RateLimitedError")
    assert e.retry_after_ms is not None and 0 < e.retry_after_ms <= 1000, e.retry_after_ms
    assert len(upstream.log("rl-py")) == 1, "the refused request was not sent"

    async def go():
        async with harness.AsyncClient(cfg) as a:
            await a.get("svc", "/s/rl-py/b")
            with pytest.raises(harness.RateLimitedError) as info:
                await a.get("svc", "/s/rl-py/b")
            return info.value

    e = asyncio.run(go())
    assert e.code == "client_rate_limited" and e.retry_after_ms and e.status is None
    assert len(upstream.log("rl-py")) == 2


# ---- the receiver in memory -----------------------------------------------------------------


def test_run_twice_runs_the_handler_once_and_returns_an_equal_stored_result():
    idem = harness.Idempotency()
    key = idem.key("acme", "invoice.paid", "msg-1")
    assert key == "harness:idem:acme:invoice.paid:msg-1"
    calls = []

    def handler():
        calls.append(1)
        return {"paid": True, "items": (1, 2.5, "three"), "big": 2**70, 7: None}

    first = idem.run(key, handler)
    second = idem.run(key, handler)
    assert len(calls) == 1
    # Every delivery gets the result as stored (JSON): tuples are lists, keys strings.
    assert first == second == {"paid": True, "items": [1, 2.5, "three"], "big": 2**70, "7": None}
    text = idem.metrics_text()
    assert 'harness_idempotency_total{outcome="claimed"} 1' in text
    assert 'harness_idempotency_total{outcome="duplicate_processed"} 1' in text


def test_the_claim_block_stores_its_result_and_a_duplicate_sees_it_done():
    idem = harness.Idempotency({"prefix": "py:"})
    key = idem.key("t", "e", "m")
    with idem.claim(key) as c:
        assert (c.done, c.result, c.deduplicated, c.key) == (False, None, True, "py:t:e:m")
        c.result = ("ok", 1)
    assert c.result == ["ok", 1] and "claimed" in repr(c)
    with idem.claim(key) as again:
        assert again.done and again.result == ["ok", 1]
    assert "done" in repr(again)
    # A block that never sets the result stores None.
    with idem.claim(idem.key("t", "e", "none")) as c:
        pass
    assert idem.run(idem.key("t", "e", "none"), lambda: pytest.fail("must not run")) is None


def test_a_duplicate_while_the_first_is_running_raises_duplicate_in_flight():
    idem = harness.Idempotency({"lease_ms": 20000})
    key = idem.key("acme", "order.created", "dup-1")
    started, release = threading.Event(), threading.Event()
    out = {}

    def slow():
        started.set()
        assert release.wait(10)
        return "first"

    t = threading.Thread(target=lambda: out.setdefault("r", idem.run(key, slow)))
    t.start()
    assert started.wait(10)
    with pytest.raises(harness.DuplicateInFlightError) as info:
        idem.run(key, lambda: pytest.fail("must not run"))
    e = info.value
    assert isinstance(e, harness.HarnessError) and e.kind == "DuplicateInFlightError" and e.code == "duplicate_in_flight"
    assert 0 < e.retry_after_ms <= 20000
    with pytest.raises(harness.DuplicateInFlightError):
        with idem.claim(key):
            pytest.fail("the block must not be entered")
    release.set()
    t.join(10)
    assert out["r"] == "first" == idem.run(key, lambda: "second")


def test_a_handler_exception_fails_the_key_and_a_redelivery_runs_again():
    idem = harness.Idempotency()
    key = idem.key("acme", "invoice.paid", "boom")
    with pytest.raises(ZeroDivisionError):
        idem.run(key, lambda: 1 / 0)
    assert idem.run(key, lambda: "second try") == "second try"
    assert 'harness_idempotency_total{outcome="failed"} 1' in idem.metrics_text()

    # The block form: the exception propagates, the key is failed.
    key2 = idem.key("acme", "invoice.paid", "boom-2")
    with pytest.raises(KeyError):
        with idem.claim(key2) as c:
            c.result = "never stored"
            raise KeyError("x")
    assert idem.run(key2, lambda: 2) == 2

    # retry_failed off: a failed key is not run again.
    strict = harness.Idempotency({"retry_failed": False})
    k = strict.key("acme", "invoice.paid", "boom-3")
    def refuse():
        raise ValueError("no")

    with pytest.raises(ValueError):
        strict.run(k, refuse)
    with pytest.raises(harness.HarnessError) as info:
        strict.run(k, lambda: pytest.fail("must not run"))
    assert info.value.code == "failed_before" and type(info.value) is harness.HarnessError


def test_a_result_that_is_not_json_is_a_config_error_and_fails_the_key():
    idem = harness.Idempotency()
    key = idem.key("t", "e", "not-json")
    with pytest.raises(harness.ConfigError, match=r"^result: object of type set is not JSON serializable"):
        idem.run(key, lambda: {1, 2})
    with pytest.raises(harness.ConfigError, match=r"result: nan is not a JSON number.*\(at result.x\)"):
        idem.run(key, lambda: {"x": float("nan")})
    assert idem.run(key, lambda: "fine") == "fine", "a failed key is claimable again"

    async def handler():
        return 1

    with pytest.raises(harness.ConfigError, match="AsyncIdempotency"):
        idem.run(idem.key("t", "e", "coro"), handler)
    assert idem.run(idem.key("t", "e", "coro"), lambda: 3) == 3


def test_a_handler_that_outlives_its_lease_gets_lease_lost_and_the_new_result_stays():
    idem = harness.Idempotency({"lease_ms": 100})
    key = idem.key("t", "e", "slow")
    with pytest.raises(harness.HarnessError) as info:
        with idem.claim(key) as c:
            time.sleep(0.3)
            assert idem.run(key, lambda: "second") == "second"  # the lease expired: taken over
            c.result = "late"
    assert info.value.code == "lease_lost"
    assert idem.run(key, lambda: "third") == "second"


def test_bad_keys_and_config_are_config_errors_naming_the_part():
    idem = harness.Idempotency()
    for args, part in [(("", "e", "m"), "tenant"), (("t", "e\n", "m"), "event_type"), (("t", "e", "a\nb"), "msg_id"), (("t", "e", "x" * 257), "msg_id")]:
        with pytest.raises(harness.ConfigError) as info:
            idem.key(*args)
        assert info.value.message.startswith(f"{part}:"), info.value.message
    with pytest.raises(harness.ConfigError, match="^msg_id: expected a string, got int"):
        idem.key("t", "e", 5)
    with pytest.raises(harness.ConfigError, match="^key: "):
        idem.run("bad\x00key", lambda: 1)
    with pytest.raises(harness.ConfigError, match="lease_ms"):
        harness.Idempotency({"lease_ms": 0})
    with pytest.raises(harness.ConfigError, match="on_store_down"):
        harness.Idempotency({"on_store_down": "maybe"})
    with pytest.raises(harness.ConfigError, match="redis_url"):
        harness.Idempotency({"redis_url": "http://nope"})
    with pytest.raises(harness.ConfigError, match="^config: expected a dict, got list"):
        harness.Idempotency([1])


# ---- signatures -----------------------------------------------------------------------------


def test_signature_verify_ok_bad_and_stale_and_the_secret_is_never_shown():
    idem = harness.Idempotency({"signature": {"secret": {"value": WEBHOOK_SECRET}, "max_skew_ms": 60000}})
    now = int(time.time())
    body = b'{"id":"evt_1"}'
    sig = idem.sign(now, body)
    assert len(sig) == 64 and sig == idem.sign(str(now), bytearray(body))
    idem.verify(now, body, sig)
    idem.verify(str(now), memoryview(body), f"sha256={sig}")
    idem.verify(str(now), body.decode(), sig)
    errors = []
    for ts, b, s, code in [
        (now, b'{"id":"evt_2"}', sig, "bad_signature"),
        (now, body, "zz", "bad_signature"),
        ("yesterday", body, sig, "bad_signature"),
        (now - 3600, body, idem.sign(now - 3600, body), "stale_signature"),
    ]:
        with pytest.raises(harness.AuthError) as info:
            idem.verify(ts, b, s)
        assert info.value.code == code, (ts, s, info.value)
        errors.append(info.value)
    assert 'harness_idempotency_total{outcome="bad_signature"} 4' in idem.metrics_text()
    shown = repr(idem) + str(idem) + "".join(str(e) + repr(e) + str(e.args) for e in errors)
    assert WEBHOOK_SECRET not in shown and "Idempotency" in repr(idem) and "memory" in repr(idem)
    with pytest.raises(harness.ConfigError, match="^signature: not configured"):
        harness.Idempotency().verify(now, body, sig)
    with pytest.raises(harness.ConfigError, match="^body: expected bytes or str, got int"):
        idem.verify(now, 5, sig)


def test_a_signature_secret_from_the_environment(monkeypatch):
    monkeypatch.setenv("HARNESS_PY_WEBHOOK_SECRET", WEBHOOK_SECRET)
    by_env = harness.Idempotency({"signature": {"secret": {"env": "HARNESS_PY_WEBHOOK_SECRET"}}})
    by_value = harness.Idempotency({"signature": {"secret": {"value": WEBHOOK_SECRET}}})
    assert by_env.sign("1700000000", b"x") == by_value.sign("1700000000", b"x")
    monkeypatch.delenv("HARNESS_PY_WEBHOOK_SECRET")
    with pytest.raises(harness.ConfigError, match="signature.secret"):
        harness.Idempotency({"signature": {"secret": {"env": "HARNESS_PY_WEBHOOK_SECRET"}}})


# ---- the async form -------------------------------------------------------------------------


def test_async_run_awaits_the_handler_once_and_duplicates_get_the_stored_result():
    async def go():
        idem = harness.AsyncIdempotency({"lease_ms": 20000})
        key = idem.key("acme", "order.created", "async-1")
        calls = []
        gate = asyncio.Event()

        async def handler():
            calls.append(1)
            await gate.wait()
            return {"order": 42}

        first = asyncio.ensure_future(idem.run(key, handler))
        while not calls:
            await asyncio.sleep(0.005)
        with pytest.raises(harness.DuplicateInFlightError) as info:
            await idem.run(key, handler)
        assert info.value.retry_after_ms > 0
        gate.set()
        assert await first == {"order": 42}
        assert await idem.run(key, handler) == {"order": 42}
        # A plain function works too, and the block form.
        assert await idem.run(idem.key("a", "b", "plain"), lambda: [1, (2, 3)]) == [1, [2, 3]]
        async with idem.claim(key) as c:
            assert c.done and c.result == {"order": 42}
        return len(calls)

    assert asyncio.run(go()) == 1


def test_async_handler_exception_and_cancel_fail_the_key_so_a_redelivery_runs():
    async def go():
        idem = harness.AsyncIdempotency({"lease_ms": 60000})
        key = idem.key("acme", "invoice.paid", "async-boom")

        async def boom():
            raise RuntimeError("handler failed")

        with pytest.raises(RuntimeError, match="handler failed"):
            await idem.run(key, boom)
        assert await idem.run(key, lambda: "again") == "again"

        # Cancelled mid-handler: the key is failed (not held for the whole lease).
        key2 = idem.key("acme", "invoice.paid", "async-cancel")
        running = asyncio.Event()

        async def forever():
            running.set()
            await asyncio.sleep(3600)

        task = asyncio.ensure_future(idem.run(key2, forever))
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await idem.run(key2, lambda: "after cancel") == "after cancel"

        # A result that is not JSON: ConfigError, and the key is failed.
        key3 = idem.key("acme", "invoice.paid", "async-set")
        with pytest.raises(harness.ConfigError, match="^result: "):
            await idem.run(key3, lambda: {1})
        async with idem.claim(key3) as c:
            assert not c.done
            c.result = "stored"
        return c.result, idem.metrics_text()

    result, metrics = asyncio.run(go())
    assert result == "stored"
    assert 'harness_idempotency_total{outcome="failed"} 3' in metrics


# ---- on a real redis-server -----------------------------------------------------------------


def test_two_receivers_on_one_redis_share_the_state(redis):
    a = harness.Idempotency({"redis_url": redis.url, "lease_ms": 20000})
    b = harness.Idempotency({"redis_url": redis.url, "lease_ms": 20000})
    key = a.key("t", "e", _unique("shared"))
    assert "redis" in repr(a) and "127.0.0.1" not in repr(a), "no URL (it may hold a password) in repr"
    with a.claim(key) as c:
        assert not c.done
        with pytest.raises(harness.DuplicateInFlightError):
            b.run(key, lambda: pytest.fail("must not run"))
        c.result = {"by": "a"}
    assert b.run(key, lambda: pytest.fail("must not run")) == {"by": "a"}

    async def go():
        ab = harness.AsyncIdempotency({"redis_url": redis.url})
        return await ab.run(key, lambda: pytest.fail("must not run"))

    assert asyncio.run(go()) == {"by": "a"}


CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys, threading, time
    import harness

    url, key, mode, start_at, n = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    ran = []
    results, dups, other = {}, 0, []

    def record(outcome):
        global dups
        if isinstance(outcome, harness.DuplicateInFlightError):
            dups += 1
        elif isinstance(outcome, BaseException):
            other.append(repr(outcome))
        else:
            text = json.dumps(outcome, sort_keys=True)
            results[text] = results.get(text, 0) + 1

    warm_key = key + ":warm-up:" + str(os.getpid())  # connect to Redis before the race
    if mode == "sync":
        idem = harness.Idempotency({"redis_url": url, "lease_ms": 20000})
        idem.run(warm_key, lambda: 0)
        time.sleep(max(0.0, start_at - time.time()))

        def handler():
            ran.append(1)
            time.sleep(0.5)
            return {"by": os.getpid(), "mode": "sync"}

        lock = threading.Lock()

        def deliver():
            try:
                out = idem.run(key, handler)
            except BaseException as e:
                out = e
            with lock:
                record(out)

        threads = [threading.Thread(target=deliver) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        idem = harness.AsyncIdempotency({"redis_url": url, "lease_ms": 20000})
        asyncio.run(idem.run(warm_key, lambda: 0))
        time.sleep(max(0.0, start_at - time.time()))

        async def handler():
            ran.append(1)
            await asyncio.sleep(0.5)
            return {"by": os.getpid(), "mode": "async"}

        async def main():
            outs = await asyncio.gather(*(idem.run(key, handler) for _ in range(n)), return_exceptions=True)
            for out in outs:
                record(out)

        asyncio.run(main())
    print("RESULT " + json.dumps({"ran": len(ran), "results": results, "dups": dups, "other": other}))
    """
)


def test_the_same_message_from_three_processes_runs_its_handler_once(redis):
    key = harness.Idempotency().key("fleet", "order.created", _unique("m"))
    per_child = 20
    start_at = time.time() + 2.0  # every child is up and connected by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, redis.url, key, mode, str(start_at), str(per_child)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mode in ("sync", "async", "sync")
    ]
    ran, answered, dups, values = 0, 0, 0, set()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
        assert line, f"no result line:\n{out}\n{err}"
        r = json.loads(line[len("RESULT "):])
        assert r["other"] == [], r
        ran += r["ran"]
        dups += r["dups"]
        answered += sum(r["results"].values())
        values.update(r["results"])
    assert ran == 1, "the handler ran exactly once across the three processes"
    assert answered + dups == 3 * per_child, "every caller got the stored result or DuplicateInFlightError"
    assert len(values) == 1, f"one stored result: {values}"
    # After the fleet finished, a late redelivery gets the one stored result.
    late = harness.Idempotency({"redis_url": redis.url}).run(key, lambda: pytest.fail("must not run"))
    assert json.dumps(late, sort_keys=True) in values


def test_with_the_store_down_process_runs_the_handler_and_reject_raises():
    down = RedisServer()
    url = down.url
    down.stop()
    runs = []
    process = harness.Idempotency({"redis_url": url, "on_store_down": "process"})
    with process.claim("harness:idem:t:e:down") as c:
        assert not c.done and not c.deduplicated
        runs.append(1)
        c.result = "ran"
    assert c.result == "ran"
    assert process.run("harness:idem:t:e:down", lambda: runs.append(1) or "ran again") == "ran again"
    assert len(runs) == 2, "no dedup while the store is down"
    assert 'harness_idempotency_total{outcome="store_down_processed"} 2' in process.metrics_text()

    reject = harness.Idempotency({"redis_url": url})
    with pytest.raises(harness.HarnessError) as info:
        reject.run("harness:idem:t:e:down", lambda: pytest.fail("must not run"))
    e = info.value
    assert (type(e), e.code) == (harness.HarnessError, "store_unavailable")
    assert url not in str(e) + repr(reject)

    async def go():
        areject = harness.AsyncIdempotency({"redis_url": url})
        with pytest.raises(harness.HarnessError) as info:
            await areject.run("harness:idem:t:e:down", lambda: pytest.fail("must not run"))
        aprocess = harness.AsyncIdempotency({"redis_url": url, "on_store_down": "process"})
        return info.value.code, await aprocess.run("harness:idem:t:e:down", lambda: "async ran")

    assert asyncio.run(go()) == ("store_unavailable", "async ran")


def test_a_sync_claim_waits_for_the_store_without_holding_the_gil(upstream):
    # The blackhole accepts no connection: the claim waits for the core's store timeout.
    addr = upstream.urls()["{blackhole}"][len("http://"):]
    idem = harness.Idempotency({"redis_url": f"redis://{addr}/0", "on_store_down": "process"})
    ticks, waiting, stop = [0], threading.Event(), threading.Event()

    def spin():
        while not stop.is_set():
            if waiting.is_set():
                ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    waiting.set()
    t0 = time.monotonic()
    try:
        assert idem.run("harness:idem:t:e:gil", lambda: "ran") == "ran"
    finally:
        elapsed = time.monotonic() - t0
        stop.set()
        t.join()
    assert elapsed >= 0.15, f"the claim did wait for the store ({elapsed:.3f}s)"
    assert ticks[0] >= 20, f"another thread ran {ticks[0]} times in {elapsed:.3f}s: the GIL was held"


def test_the_native_receiver_is_documented_in_its_stub():
    from pathlib import Path

    from harness import _native

    native_stub = (Path(harness.__file__).parent / "_native.pyi").read_text()
    for cls in (_native.Idempotency, _native.Lease):
        assert cls.__doc__ and f"class {cls.__name__}:" in native_stub
        for member in (n for n in dir(cls) if not n.startswith("_")):
            assert getattr(cls, member).__doc__, f"{cls.__name__}.{member}"
            assert f"def {member}(" in native_stub, f"{cls.__name__}.{member} missing from _native.pyi"
