"""Interceptors from Python against the loopback upstream: what `before` changes reaches the
upstream; an attempt interceptor runs on every attempt and an application one once; `after`
turns a 200 carrying an error code into a (retried) failure with `harness.Reject`; raising,
hanging and hostile interceptors are `InterceptorError`s that send nothing and leave the
client healthy; a blocking interceptor holds up only its own calls; sync and `async def`
forms on both clients. Mirrors core/tests/interceptors.rs."""

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import harness


def cfg(upstream, **extra):
    """Services `svc` (3 quick retries) and `other` on the upstream; `extra` merged at the top."""
    services = {
        "svc": {"base_url": upstream.url, "retry": {"max_retries": 3, "base_delay_ms": 1, "max_delay_ms": 5}},
        "other": {"base_url": upstream.url},
    }
    for name, over in extra.pop("services", {}).items():
        services[name] = {**services[name], **over}
    return {"client": {"name": "pytest-icpt"}, "log": {"enabled": False}, "services": services, **extra}


# ---- changes reach the upstream ------------------------------------------------------------


def test_before_changes_headers_query_and_json_as_the_upstream_sees_them(upstream):
    upstream.script("icpt_chg", [{"json": {"ok": True}}])
    seen, answers = [], []

    def tenant(request):
        seen.append(request)
        body = dict(request.json)
        body["tenant"] = "acme"
        return {"headers": {"x-tenant": "acme", "x-drop": None}, "query": {"region": "eu"}, "json": body}

    def log_answer(response):
        answers.append(response)

    with harness.Client(cfg(upstream)) as c:
        assert c.add_interceptor(tenant, log_answer) == "tenant"
        r = c.post("svc", "/s/icpt_chg/orders", json={"order": 7}, headers={"x-drop": "1", "X-Keep": "2"}, params={"page": "2"})
    assert r.status == 200
    (q,) = seen
    assert isinstance(q, harness.InterceptedRequest)
    assert (q.name, q.level, q.method, q.service, q.path) == ("tenant", "application", "POST", "svc", "/s/icpt_chg/orders")
    assert (q.attempt, q.provider, q.trace_id) == (None, None, r.trace_id)
    assert q.query == [("page", "2")]
    assert q.json == {"order": 7} and json.loads(q.body) == {"order": 7}
    assert q.header("x-keep") == "2" and ("x-drop", "1") in [(k.lower(), v) for k, v in q.headers]
    (log,) = upstream.log("icpt_chg")
    assert log["headers"]["x-tenant"] == "acme" and log["headers"]["x-keep"] == "2"
    assert "x-drop" not in log["headers"]
    assert log["path"] == "/s/icpt_chg/orders?page=2&region=eu"
    assert json.loads(log["body"]) == {"order": 7, "tenant": "acme"}
    # `after` saw the answer, without its body (not asked for).
    (a,) = answers
    assert isinstance(a, harness.InterceptedResponse)
    assert (a.status, a.body, a.json, a.trace_id, a.name) == (200, None, None, r.trace_id, "tenant")
    assert (a.header("Content-Type") or "").startswith("application/json") and a.elapsed_ms > 0


def test_before_replaces_the_body_with_bytes_and_the_path(upstream):
    upstream.script("icpt_raw", [{"json": {"ok": True}}])
    upstream.script("icpt_raw2", [{"json": {"ok": True}}])
    seen = []

    def rewrite(request):
        seen.append(request.body)
        return {"body": request.body.upper() + b"\x00\xff", "path": "/s/icpt_raw2/moved"}

    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(rewrite, level="attempt")
        assert c.put("svc", "/s/icpt_raw/x", content=b"plain text", headers={"content-type": "text/plain"}).status == 200
    assert seen == [b"plain text"]
    assert upstream.log("icpt_raw") == []
    (log,) = upstream.log("icpt_raw2")
    assert log["path"] == "/s/icpt_raw2/moved"
    assert log["body"].startswith("PLAIN TEXT")


def test_want_body_shows_after_the_answer(upstream):
    upstream.script("icpt_body", [{"json": {"n": 1}}])
    got = []
    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(after=lambda r: got.append((r.status, r.json, r.body)), want_body=True)
        c.get("svc", "/s/icpt_body/x")
    assert got == [(200, {"n": 1}, b'{"n":1}')]


# ---- levels --------------------------------------------------------------------------------


def test_an_attempt_interceptor_runs_on_every_retry_and_an_application_one_once(upstream):
    upstream.script("icpt_lvl", [{"status": 503, "times": 2}, {"json": {"ok": True}}])
    app, attempts = [], []

    def once(request):
        app.append(request.attempt)

    def per_attempt(request):
        attempts.append(request.attempt)
        return {"headers": {"x-attempt": str(request.attempt)}}

    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(once)
        c.add_interceptor(per_attempt, level="attempt")
        r = c.get("svc", "/s/icpt_lvl/x")
    assert (r.status, r.attempts) == (200, 3)
    assert app == [None]
    assert attempts == [1, 2, 3]
    assert [q["headers"]["x-attempt"] for q in upstream.log("icpt_lvl")] == ["1", "2", "3"]


def test_the_config_sets_a_level_by_name(upstream):
    upstream.script("icpt_cfglvl", [{"status": 503, "times": 2}, {"json": {"ok": True}}])
    calls = []
    with harness.Client(cfg(upstream, interceptors={"levels": {"counted": "application"}})) as c:
        c.add_interceptor(lambda q: calls.append(q.level), name="counted", level="attempt")
        assert c.get("svc", "/s/icpt_cfglvl/x").attempts == 3
    assert calls == ["application"]


# ---- after: Reject -------------------------------------------------------------------------


def partner_check(response):
    """A partner that answers errors with 200 and an error code in the body."""
    code = (response.json or {}).get("errCode")
    if code == "BUSY":
        raise harness.Reject("partner busy", retryable=True, code="BUSY")
    if code is not None:
        raise harness.Reject(f"partner error {code}", code=code)


def test_a_200_with_an_error_code_becomes_a_retried_failure(upstream):
    upstream.script("icpt_busy", [{"json": {"errCode": "BUSY"}}, {"json": {"result": 1}}])
    upstream.script("icpt_busy2", [{"json": {"errCode": "BUSY"}}])
    upstream.script("icpt_denied", [{"json": {"errCode": "DENIED"}}])
    upstream.script("icpt_post", [{"json": {"errCode": "BUSY"}}, {"json": {"ok": 1}}])
    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(after=partner_check, level="attempt", want_body=True)
        r = c.get("svc", "/s/icpt_busy/x")
        assert (r.status, r.attempts, r.json()) == (200, 2, {"result": 1})
        # Always busy: retried up to max_retries, then the InterceptorError with its code.
        with pytest.raises(harness.InterceptorError) as e:
            c.get("svc", "/s/icpt_busy2/x")
        assert (e.value.code, e.value.status, e.value.attempts) == ("BUSY", 200, 4)
        assert "interceptor `partner_check` after" in e.value.message and "partner busy" in e.value.message
        # Not retryable: one attempt.
        with pytest.raises(harness.InterceptorError) as e:
            c.get("svc", "/s/icpt_denied/x")
        assert (e.value.code, e.value.attempts) == ("DENIED", 1)
        # A POST that was answered is not resent: the retry rules hold.
        with pytest.raises(harness.InterceptorError) as e:
            c.post("svc", "/s/icpt_post/x")
        assert e.value.attempts == 1
    assert len(upstream.log("icpt_busy2")) == 4 and len(upstream.log("icpt_post")) == 1


def test_reject_is_an_exception_with_its_fields():
    r = harness.Reject("nope", retryable=True, code="X")
    assert isinstance(r, Exception) and str(r) == "nope"
    assert (r.message, r.retryable, r.code) == ("nope", True, "X")
    assert harness.Reject("m").retryable is False and harness.Reject("m").code is None
    assert "Reject" in harness.__all__ and "InterceptorError" in harness.__all__
    assert harness.InterceptorError("x").kind == "InterceptorError"


# ---- failures: typed, nothing sent, the client stays healthy --------------------------------


def _raises(request):
    raise ValueError("no tenant in context")


def _hangs(request):
    time.sleep(3)


def _reject_before(request):
    raise harness.Reject("not here")


HOSTILE = [
    (_raises, "raised", "ValueError: no tenant in context"),
    (_hangs, "timeout", "did not return within 200 ms"),
    (_reject_before, "raised", "Reject: not here"),
    (lambda q: {"headers": {"Content-Length": "5"}}, "invalid", "headers.Content-Length"),
    (lambda q: {"headers": {"host": "evil.example"}}, "invalid", "headers.host"),
    (lambda q: {"headers": {"Transfer-Encoding": "chunked"}}, "invalid", "headers.Transfer-Encoding"),
    (lambda q: {"path": "/s/icpt_h/../../__admin/log/icpt_h"}, "invalid", "path"),
    (lambda q: {"path": "/s/icpt_h/%2e%2e/x"}, "invalid", "path"),
    (lambda q: {"headers": {"x-a": "1\r\nx-b: 2"}}, "invalid", "headers.x-a"),
    (lambda q: {"body": b"x" * 4096}, "invalid", "limits.max_request_bytes"),
    (lambda q: {"json": "x" * 4096}, "invalid", "limits.max_request_bytes"),
    (lambda q: {"nope": 1}, "invalid", "unknown change `nope`"),
    (lambda q: "yes", "invalid", "a string"),
    (lambda q: {"headers": {"x-n": object()}}, "raised", "TypeError"),
]


@pytest.mark.parametrize("level", ["application", "attempt"])
def test_raising_hanging_and_hostile_interceptors_send_nothing(upstream, level):
    upstream.script("icpt_h", [{"json": {"ok": True}}])
    config = cfg(upstream, interceptors={"timeout_ms": 200}, services={"svc": {"limits": {"max_request_bytes": 1024}}})
    with harness.Client(config) as c:
        for i, (fn, code, text) in enumerate(HOSTILE):
            name = c.add_interceptor(fn, name=f"hostile-{i}", level=level)
            t = time.perf_counter()
            with pytest.raises(harness.InterceptorError) as e:
                c.get("svc", "/s/icpt_h/x")
            took = time.perf_counter() - t
            assert e.value.code == code, (i, e.value)
            assert f"interceptor `{name}` before: " in e.value.message and text in e.value.message, (i, e.value.message)
            assert e.value.attempts == 0, (i, "nothing was sent")
            assert took < 2, (i, took)
            assert c.remove_interceptor(name) and not c.remove_interceptor(name)
        assert upstream.log("icpt_h") == [], "no refused call reached the upstream"
        # Healthy: nothing held, the breaker closed, the next call goes through.
        assert c.get("svc", "/s/icpt_h/x").status == 200
        assert c.bulkhead_in_use("svc") == 0 and c.breaker_state("svc", "GET", "/s/icpt_h/x") == "closed"


def test_a_raising_after_fails_the_call(upstream):
    upstream.script("icpt_ar", [{"json": {"ok": True}}])

    def after_raises(response):
        raise KeyError("x")

    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(after=after_raises)
        with pytest.raises(harness.InterceptorError) as e:
            c.get("svc", "/s/icpt_ar/x")
    assert e.value.code == "raised" and "interceptor `after_raises` after: raised KeyError" in e.value.message


# ---- host threads: a slow interceptor holds only its own calls -----------------------------


def _os_thread_name():
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def test_a_blocking_interceptor_holds_only_its_own_calls(upstream):
    upstream.script("icpt_slow", [{"json": {"ok": True}}])
    threads = set()

    def slow(request):
        threads.add((threading.get_native_id(), _os_thread_name()))
        time.sleep(1)

    with harness.Client(cfg(upstream, interceptors={"timeout_ms": 5000})) as c, ThreadPoolExecutor(8) as pool:
        c.add_interceptor(slow, services="svc")
        t = time.perf_counter()
        slow_calls = [pool.submit(c.get, "svc", "/s/icpt_slow/x") for _ in range(6)]
        time.sleep(0.05)
        # Calls to another service are not held up meanwhile.
        for _ in range(20):
            assert c.get("other", "/s/icpt_slow/y").status == 200
        assert time.perf_counter() - t < 0.8, time.perf_counter() - t
        assert [f.result().status for f in slow_calls] == [200] * 6
        took = time.perf_counter() - t
    # The six ran side by side, each on a thread of its own (not a caller's, not an engine worker).
    assert 1 <= took < 2.5, took
    assert len({tid for tid, _ in threads}) == 6, threads
    names = {name for _, name in threads}
    assert names == {"harness-interce"} or names == {None}, names  # Linux keeps 15 characters


def test_async_interceptors_on_the_async_client(upstream):
    upstream.script("icpt_async", [{"json": {"errCode": "BUSY"}}, {"json": {"ok": True}}])
    upstream.script("icpt_async_other", [{"json": {"ok": True}}])
    loops = []

    async def tag(request):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        return {"headers": {"x-tag": f"a{request.attempt}"}}

    async def check(response):
        loops.append(asyncio.get_running_loop())
        if (response.json or {}).get("errCode") == "BUSY":
            raise harness.Reject("busy", retryable=True, code="BUSY")

    async def slow(request):
        await asyncio.sleep(1)

    async def main():
        async with harness.AsyncClient(cfg(upstream, interceptors={"timeout_ms": 5000})) as c:
            assert c.add_interceptor(tag, check, level="attempt", want_body=True, services=["svc"]) == "tag"
            c.add_interceptor(slow, services=["other"], name="slow.other")
            r = await c.get("svc", "/s/icpt_async/x")
            assert (r.status, r.attempts) == (200, 2)
            # An async interceptor that waits 1 s holds up its own call, not the loop.
            t = time.perf_counter()
            pending = asyncio.ensure_future(c.get("other", "/s/icpt_async_other/x"))
            ticks = 0
            while not pending.done():
                await asyncio.sleep(0.01)
                ticks += 1
            assert (await pending).status == 200 and time.perf_counter() - t >= 0.95
            assert ticks > 20
            return asyncio.get_running_loop()

    loop = asyncio.run(main())
    # The coroutines ran on the loop that was running at add_interceptor.
    assert loops and all(x is loop for x in loops)
    assert [q["headers"]["x-tag"] for q in upstream.log("icpt_async")] == ["a1", "a2"]


def test_an_async_interceptor_on_the_sync_client_runs_without_a_loop(upstream):
    upstream.script("icpt_async_sync", [{"json": {"ok": True}}])

    async def tag(request):
        await asyncio.sleep(0)
        return {"headers": {"x-tag": "from-asyncio-run"}}

    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(tag)
        assert c.get("svc", "/s/icpt_async_sync/x").status == 200
    assert upstream.log("icpt_async_sync")[0]["headers"]["x-tag"] == "from-asyncio-run"


# ---- secrets -------------------------------------------------------------------------------


def test_a_secret_header_is_scrubbed_from_the_error(upstream):
    key = "partner-key-9f8e7d6c5b4a"
    # The upstream echoes the key back in its error.
    upstream.script("icpt_sec", [{"status": 400, "json": {"error": {"message": f"bad key {key}", "code": "bad_key"}}}])
    with harness.Client(cfg(upstream)) as c:
        c.add_interceptor(lambda q: {"headers": {"x-partner-key": key}, "secret": ["x-partner-key"]}, name="partner-auth", level="attempt")
        with pytest.raises(harness.HttpStatusError) as e:
            c.get("svc", "/s/icpt_sec/x")
    assert upstream.log("icpt_sec")[0]["headers"]["x-partner-key"] == key
    text = f"{e.value} {e.value!r} {e.value.message} {(e.value.body or b'').decode()}"
    assert key not in text, text


# ---- registration --------------------------------------------------------------------------


def test_names_services_and_bad_arguments(upstream):
    upstream.script("icpt_reg", [{"json": {"ok": True}}])
    order = []
    with harness.Client(cfg(upstream)) as c:
        assert c.add_interceptor(lambda q: order.append("lambda")) == "lambda"
        assert c.add_interceptor(lambda q: order.append("first")) == "lambda"  # replaced in its place
        assert c.add_interceptor(lambda q: order.append("second"), name="a.b-c_d") == "a.b-c_d"
        assert c.add_interceptor(lambda q: order.append("other"), name="only-other", services=["other"]) == "only-other"

        class Tagger:
            def __call__(self, request):
                order.append("tagger")

        assert c.add_interceptor(Tagger()) == "Tagger"
        c.get("svc", "/s/icpt_reg/x")
        assert order == ["first", "second", "tagger"]
        assert c.remove_interceptor("lambda") and not c.remove_interceptor("lambda")
        with pytest.raises(harness.ConfigError, match="before: expected a callable"):
            c.add_interceptor(42)
        with pytest.raises(harness.ConfigError, match="give `before`, `after` or both"):
            c.add_interceptor()
        with pytest.raises(harness.ConfigError, match="level: expected `application` or `attempt`"):
            c.add_interceptor(lambda q: None, level="sometimes")
        with pytest.raises(harness.ConfigError, match="name: an interceptor's name"):
            c.add_interceptor(lambda q: None, name="has space")
        with pytest.raises(harness.ConfigError, match=r"services\[1\]: expected a string"):
            c.add_interceptor(lambda q: None, services=["svc", 3])
        with pytest.raises(harness.ConfigError, match="services"):
            c.add_interceptor(lambda q: None, services=5)
    with pytest.raises(harness.HarnessError):
        c.add_interceptor(lambda q: None)  # a closed client takes no more
