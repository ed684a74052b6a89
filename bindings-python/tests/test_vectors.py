"""Runs every shared scenario vector (tests/vectors/scenarios.json) through the
Python API, once with the sync Client and once with the AsyncClient. Routing scenarios
(`providers`, `route`, `chat`, `routing_state`, `set_weight`) use the chat API and the
simulated model providers; `interceptors` are registered with `add_interceptor` (plain
functions on the sync client, `async def` ones on the async client)."""

import asyncio
import copy
import json
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import harness
from conftest import REPO

VECTORS = Path(os.environ.get("HARNESS_VECTORS", REPO / "tests" / "vectors" / "scenarios.json"))
BASE = {"client": {"name": "vectors"}, "log": {"enabled": False}, "services": {"svc": {"base_url": "{upstream}"}}}


def _load():
    # A missing file fails the suite (no silent skip): collection errors are failures.
    scenarios = json.loads(VECTORS.read_text())["scenarios"]
    assert scenarios, f"{VECTORS} has no scenarios"
    return scenarios


SCENARIOS = _load()


def merge(base, over):
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(out.get(k), v)
        return out
    return copy.deepcopy(over)


def substitute(v, urls):
    if isinstance(v, str):
        for k, u in urls.items():
            v = v.replace(k, u)
        return v
    if isinstance(v, list):
        return [substitute(x, urls) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x, urls) for k, x in v.items()}
    return v


def nested(depth):
    """`depth` lists around 0, built without recursion."""
    v = 0
    for _ in range(depth):
        v = [v]
    return v


def call_kwargs(name, call):
    headers = call.get("headers")
    kw = {
        "endpoint": call.get("endpoint"),
        # A list of [name, value] pairs repeats names; the API takes (name, value) tuples.
        "headers": [tuple(p) for p in headers] if isinstance(headers, list) else headers,
        "idempotency_key": call.get("idempotency_key"),
        "timeout_ms": call.get("timeout_ms"),
        "traceparent": call.get("traceparent"),
    }
    if "json_depth" in call:
        kw["json"] = nested(call["json_depth"])
    elif "json" in call:
        kw["json"] = call["json"]
    elif "body" in call:
        kw["content"] = call["body"]
    return (call.get("service", "svc"), call["method"], f"/s/{name}{call['path']}"), kw


# Keywords of chat() itself: a chat parameter of that name goes in extra_body.
CHAT_KEYWORDS = {"extra_headers", "extra_body", "timeout_ms", "traceparent"}


def chat_args(call):
    """`(route, messages)` and the keyword arguments of a chat call (`client.chat(route, messages, **params)`)."""
    chat = call["chat"]
    params = dict(chat.get("params", {}))
    extra = {k: params.pop(k) for k in list(params) if k in CHAT_KEYWORDS}
    headers = call.get("headers")
    kw = {
        **params,
        "extra_body": extra or None,
        "extra_headers": [tuple(p) for p in headers] if isinstance(headers, list) else headers,
        "timeout_ms": call.get("timeout_ms"),
        "traceparent": call.get("traceparent"),
    }
    return (call["route"], chat["messages"]), kw


def route_request_args(call):
    """A plain request that names a route as its service (the path is not prefixed)."""
    args, kw = call_kwargs("", call)
    return (call["route"], call["method"], call["path"]), kw


class Outcome:
    """What one call gave: a Response (or ChatResponse, Streamed, ChatStreamed) or an
    exception, and its wall time."""

    def __init__(self, result, elapsed_ms):
        self.result = result
        self.elapsed_ms = elapsed_ms

    @property
    def error(self):
        return self.result if isinstance(self.result, BaseException) else None

    @property
    def label(self):
        if self.error is None:
            return str(getattr(self.result, "status", 200))
        if isinstance(self.error, harness.HarnessError):
            return self.error.kind
        return "CancelledError" if isinstance(self.error, (asyncio.CancelledError, _SyncCancel)) else repr(self.error)


class Streamed:
    """A streamed call's response, with the body read (all of it, or `read_chunks` chunks)."""

    def __init__(self, r, body):
        self.status, self.headers, self.attempts, self.trace_id = r.status, r.headers, r.attempts, r.trace_id
        self.body = body


class ChatStreamed:
    """A chat stream read to its end (or `read_chunks` chunks): the answer after the last
    `restart`, the chunk kinds, and who answered according to the `done` chunk."""

    def __init__(self, stream, chunks):
        self.trace_id = stream.trace_id
        self.chunks = chunks
        content = []
        for c in chunks:
            if c.kind == "restart":
                content = []
            elif c.kind == "delta":
                content.append(c.content)
        self.content = "".join(content)
        done = chunks[-1] if chunks and chunks[-1].kind == "done" else None
        for k in ("provider", "model", "finish_reason", "usage", "cost", "tool_calls"):
            setattr(self, k, getattr(done, k, None))

    @property
    def chunk_kinds(self):
        kinds = []
        for c in self.chunks:
            if not (c.kind in ("delta", "tool_call") and kinds and kinds[-1] == c.kind):
                kinds.append(c.kind)
        return kinds


_MISSING = object()


def check_routed(exp, res, he, fail):
    """The routing `expect` keys: who answered, how, and what the error says about providers."""
    for k in ("provider", "model", "fallback", "finish_reason", "content", "tool_calls"):
        if k in exp:
            got = _MISSING if res is None else getattr(res, k, _MISSING)
            if got is _MISSING or got != exp[k]:
                fail(f"expected {k} {exp[k]!r}, got {'no ' + k if got is _MISSING else repr(got)} ({he!r})")
    if "usage" in exp:
        usage = getattr(res, "usage", None)
        got = None if usage is None else {k: getattr(usage, k) for k in exp["usage"]}
        if got != exp["usage"]:
            fail(f"expected usage {exp['usage']}, got {usage} ({he!r})")
    if "cost" in exp:
        cost = getattr(res, "cost", None)
        if cost is None or abs(cost - exp["cost"]) > 1e-9:
            fail(f"expected cost {exp['cost']}, got {cost} ({he!r})")
    if "attempts_by_provider" in exp:
        got = getattr(res, "attempts_by_provider", None)
        if got is None or [list(p) for p in got] != exp["attempts_by_provider"]:
            fail(f"expected attempts by provider {exp['attempts_by_provider']}, got {got} ({he!r})")
    if "chunk_kinds" in exp:
        got = getattr(res, "chunk_kinds", None)
        if got != exp["chunk_kinds"]:
            fail(f"expected chunk kinds {exp['chunk_kinds']}, got {got} ({he!r})")
    if "provider_errors" in exp:
        got = None if he is None else [p for p, _ in he.provider_errors]
        if got != exp["provider_errors"]:
            fail(f"expected provider errors for {exp['provider_errors']}, got {None if he is None else he.provider_errors} ({he!r})")
    if "error_provider" in exp and getattr(he, "provider", None) != exp["error_provider"]:
        fail(f"expected the error's provider {exp['error_provider']!r}, got {getattr(he, 'provider', None)!r} ({he!r})")


def check_cache(exp, res, err, fail):
    """`from_cache` and `cache` (the stamp's outcome, or None) on a Response or a ChatResponse."""
    if "from_cache" not in exp and "cache" not in exp:
        return
    if res is None:
        fail(f"expected from_cache/cache, the call failed: {err!r}")
        return
    if "from_cache" in exp and res.from_cache is not exp["from_cache"]:
        fail(f"expected from_cache {exp['from_cache']}, got {res.from_cache} (cache {res.cache})")
    got = None if res.cache is None else res.cache["outcome"]
    if "cache" in exp and got != exp["cache"]:
        fail(f"expected cache {exp['cache']!r}, got {got!r}")


def routing_state_call(client, name, i, call, errors):
    """`{"routing_state": route, "expect": {"providers": {id: {field: value, "last_error_contains": text}}}}`."""
    state = client.routing_state(call["routing_state"])
    by_id = {p["id"]: p for p in state["providers"]}
    for pid, want in call["expect"].get("providers", {}).items():
        got = by_id.get(pid)
        if got is None:
            errors.append(f"{name} call {i}: routing state has no provider {pid!r}: {state}")
            continue
        for k, v in want.items():
            if k == "last_error_contains":
                if v not in (got["last_error"] or ""):
                    errors.append(f"{name} call {i}: {pid} last_error {got['last_error']!r} lacks {v!r}")
            elif got.get(k, _MISSING) != v:
                errors.append(f"{name} call {i}: {pid} {k}: expected {v!r}, got {got.get(k, 'nothing')!r}")


def set_weight_call(client, name, i, call, errors):
    """`{"set_weight": [route, id, weight], "expect": {} or {"error": ..., "message": ...}}`."""
    exp, fail = call["expect"], lambda what: errors.append(f"{name} call {i}: {what}")  # noqa: E731
    try:
        version = client.set_weight(*call["set_weight"])
    except Exception as e:  # noqa: BLE001 - the outcome is what we check
        if "error" not in exp or not isinstance(e, harness.HarnessError) or e.kind != exp["error"]:
            fail(f"set_weight expected {exp or 'success'}, got {e!r}")
        elif "message" in exp and exp["message"] not in e.message:
            fail(f"set_weight error {e.message!r} lacks {exp['message']!r}")
        return
    if "error" in exp:
        fail(f"set_weight expected {exp['error']}, it succeeded")
    elif version != client.config_version:
        fail(f"set_weight returned version {version}, the client has {client.config_version}")


def reload_call(client, upstream, name, i, call, errors):
    """A `reload` call: base deep-merged with the object (not the scenario's config)."""
    exp, fail = call["expect"], lambda what: errors.append(f"{name} call {i}: {what}")  # noqa: E731
    try:
        version = client.reload(substitute(merge(BASE, call["reload"]), placeholders(upstream, name)))
    except Exception as e:  # noqa: BLE001 - the outcome is what we check
        if "error" not in exp or not isinstance(e, harness.HarnessError) or e.kind != exp["error"]:
            fail(f"reload expected {exp or 'success'}, got {e!r}")
        elif "message" in exp and exp["message"] not in e.message:
            fail(f"reload error {e.message!r} lacks {exp['message']!r}")
        return
    if "error" in exp:
        fail(f"reload expected {exp['error']}, it succeeded")
    elif version != client.config_version:
        fail(f"reload returned version {version}, the client has {client.config_version}")


def check_result(name, i, call, o, errors):
    exp = call["expect"]
    fail = lambda what: errors.append(f"{name} call {i}: {what}")  # noqa: E731
    err, res = o.error, (None if o.error is not None else o.result)
    if "status" in exp and (res is None or getattr(res, "status", None) != exp["status"]):
        fail(f"expected status {exp['status']}, got {err!r}")
    if "error" in exp and o.label != exp["error"]:
        fail(f"expected {exp['error']}, got {res if err is None else repr(err)}")
    he = err if isinstance(err, harness.HarnessError) else None
    if "phase" in exp and getattr(he, "phase", None) != exp["phase"]:
        fail(f"expected phase {exp['phase']}, got {getattr(he, 'phase', None)}")
    if "error_status" in exp and getattr(he, "status", None) != exp["error_status"]:
        fail(f"expected error status {exp['error_status']}, got {getattr(he, 'status', None)}")
    if "code" in exp and getattr(he, "code", None) != exp["code"]:
        fail(f"expected code {exp['code']}, got {getattr(he, 'code', None)}")
    if "message" in exp and (he is None or exp["message"] not in he.message):
        fail(f"expected message containing {exp['message']!r}, got {getattr(he, 'message', None)!r}")
    if "message_excludes" in exp:
        x = exp["message_excludes"]
        if he is None or x in he.message or x in str(he) or x in repr(he):
            fail(f"expected an error whose message excludes {x!r}, got {err!r}")
    if "message_max_chars" in exp:
        n = len(he.message) if he is not None else None
        if n is None or n > exp["message_max_chars"]:
            fail(f"expected a message of at most {exp['message_max_chars']} characters, got {n}")
    if "error_body_len" in exp:
        body = getattr(he, "_body", None)
        if body is None or len(body) != exp["error_body_len"]:
            fail(f"expected an error body of {exp['error_body_len']} bytes, got {None if body is None else len(body)}")
    if "body" in exp:
        got = res.body.decode("utf-8", errors="replace") if isinstance(res, Streamed) else None
        if got != exp["body"]:
            fail(f"expected body {exp['body']!r}, got {got!r} ({err!r})")
    for k, want in exp.get("headers", {}).items():
        got = res.headers.get_list(k) if res is not None and hasattr(res, "headers") else []
        if got != want:
            fail(f"response header {k}: expected {want}, got {got}")
    if "retry_after_ms" in exp and getattr(he, "retry_after_ms", None) != exp["retry_after_ms"]:
        fail(f"expected retry_after_ms {exp['retry_after_ms']}, got {getattr(he, 'retry_after_ms', None)}")
    if "trace_id" in exp and (res is None or res.trace_id != exp["trace_id"]):
        fail(f"expected trace id {exp['trace_id']}, got {getattr(res, 'trace_id', None)}")
    check_routed(exp, res, he, fail)
    if not call.get("stream"):
        check_cache(exp, res, err, fail)
    if "attempts" in exp:
        got = getattr(res, "attempts", None) if res is not None else getattr(he, "attempts", None)
        if got != exp["attempts"]:
            fail(f"expected {exp['attempts']} attempts, got {got} ({err!r})")
    if "min_ms" in exp and o.elapsed_ms < exp["min_ms"]:
        fail(f"took {o.elapsed_ms:.1f} ms, expected at least {exp['min_ms']}")
    if "max_ms" in exp and o.elapsed_ms > exp["max_ms"]:
        fail(f"took {o.elapsed_ms:.1f} ms, expected at most {exp['max_ms']}")


def check_breaker(name, i, call, client, errors):
    exp = call["expect"]
    if "breaker" in exp:
        got = client.breaker_state(call.get("service", "svc"), call["method"], f"/s/{name}{call['path']}", call.get("endpoint"))
        if got != exp["breaker"]:
            errors.append(f"{name} call {i}: expected breaker {exp['breaker']}, got {got}")
    if "rate_limit" in exp:
        every = client.rate_limits()
        got = next((s for s in every if s["service"] == call.get("service", "svc")), {})
        for k, want in exp["rate_limit"].items():
            value = got.get("paused_ms", 0) > 0 if k == "paused" else got.get(k)
            if value != want:
                errors.append(f"{name} call {i}: expected rate limit {k} {want}, got {value} (of {every})")


def check_outcomes(name, i, call, outcomes, errors):
    want = call["expect"].get("outcomes")
    if want is not None:
        got = dict(Counter(o.label for o in outcomes))
        if got != want:
            errors.append(f"{name} call {i}: expected outcomes {want}, got {got}")


def check_upstream(upstream, name, exp, errors):
    """`exp` against the log of script `name` (the scenario's `upstream`, or `token_upstream`
    against `{name}-token`)."""
    reqs = upstream.log(name)
    fail = lambda what: errors.append(f"{name} upstream: {what}")  # noqa: E731
    if "requests" in exp and len(reqs) != exp["requests"]:
        fail(f"expected {exp['requests']} requests, got {len(reqs)}")
    if "methods" in exp and [r["method"] for r in reqs] != exp["methods"]:
        fail(f"expected methods {exp['methods']}, got {[r['method'] for r in reqs]}")
    if "bodies" in exp and [r["body"] for r in reqs] != exp["bodies"]:
        fail(f"expected bodies {exp['bodies']}, got {[r['body'] for r in reqs]}")
    for r in reqs:
        h = r["headers"]
        for k in exp.get("headers_present", []):
            if k not in h:
                fail(f"header {k} missing")
        for k in exp.get("header_absent", []):
            if k in h:
                fail(f"header {k} should be absent")
        for k, v in exp.get("header_equals", {}).items():
            if h.get(k) != v:
                fail(f"header {k}: expected {v!r}, got {h.get(k)!r}")
        for k, want in exp.get("header_values", {}).items():
            got = [v for n, v in r["header_list"] if n == k]
            if got != want:
                fail(f"header {k}: expected values {want}, got {got}")
        for k, v in exp.get("header_prefix", {}).items():
            if not h.get(k, "").startswith(v):
                fail(f"header {k}: expected prefix {v!r}, got {h.get(k)!r}")
    for k, want in exp.get("header_sequence", {}).items():
        got = [r["headers"].get(k) for r in reqs]
        if got != want:
            fail(f"header {k} by request: expected {want}, got {got}")
    if "min_gap_ms" in exp:
        for a, b in zip(reqs, reqs[1:]):
            if b["at_ms"] - a["at_ms"] < exp["min_gap_ms"]:
                fail(f"requests {b['at_ms'] - a['at_ms']:.1f} ms apart, expected at least {exp['min_gap_ms']}")


def placeholders(upstream, name):
    """Config placeholders, in replacement order: `{token_url}` and `{llm}` first (they hold the others)."""
    return {"{token_url}": "{upstream}/s/{name}-token/oauth/token", "{llm}": "{upstream}/llm/{name}-", **upstream.urls(), "{name}": name, "{vectors}": str(VECTORS.parent)}


def scenario_config(upstream, scenario):
    return substitute(merge(BASE, scenario.get("config", {})), placeholders(upstream, scenario["name"]))


def install_scripts(upstream, scenario):
    """The scenario's script, its OAuth2 token endpoint (`{name}-token`) and its simulated
    model providers (`{name}-{id}`, each starting with a clear log) when it has them."""
    upstream.script(scenario["name"], scenario["steps"])
    if "token_steps" in scenario:
        upstream.script(f"{scenario['name']}-token", scenario["token_steps"])
    for pid, spec in scenario.get("providers", {}).items():
        upstream.provider(f"{scenario['name']}-{pid}", {**spec, "reset": True})


def check_provider_upstream(upstream, name, exp, errors):
    """`provider_upstream`: each provider's request count, first body and first last message."""
    for pid, want in exp.items():
        log = upstream.provider_log(f"{name}-{pid}")
        fail = lambda what: errors.append(f"{name} provider {pid}: {what}")  # noqa: E731
        if "requests" in want and log["count"] != want["requests"]:
            fail(f"expected {want['requests']} requests, got {log['count']}")
        first = log["requests"][0]["body"] if log["requests"] else None
        for k, v in want.get("first_body", {}).items():
            got = _MISSING if first is None else first.get(k, _MISSING)
            if got != v:
                fail(f"first body {k}: expected {v!r}, got {'nothing' if got is _MISSING else repr(got)}")
        if "first_last_message" in want:
            got = first["messages"][-1] if first and first.get("messages") else None
            if got != want["first_last_message"]:
                fail(f"first request's last message: expected {want['first_last_message']}, got {got}")


def check_upstreams(upstream, scenario, errors):
    name = scenario["name"]
    if "upstream" in scenario:
        check_upstream(upstream, name, scenario["upstream"], errors)
    if "token_upstream" in scenario:
        check_upstream(upstream, f"{name}-token", scenario["token_upstream"], errors)
    if "provider_upstream" in scenario:
        check_provider_upstream(upstream, name, scenario["provider_upstream"], errors)


def check_config_error(upstream, scenario, make):
    """A scenario with `config_error`: building the client must fail with a ConfigError saying it."""
    name, want = scenario["name"], scenario["config_error"]
    try:
        make(scenario_config(upstream, scenario)).close()
    except harness.ConfigError as e:
        errors = [] if want in e.message else [f"{name}: expected a ConfigError containing {want!r}, got {e}"]
        x = scenario.get("config_error_excludes")
        if x is not None and (x in str(e) or x in repr(e) or x in e.message):
            errors.append(f"{name}: the config error shows {x!r}: {e!r}")
        return errors
    except Exception as e:  # noqa: BLE001 - the outcome is what we check
        return [f"{name}: expected a ConfigError containing {want!r}, got {e!r}"]
    return [f"{name}: expected a ConfigError containing {want!r}, the client was built"]


# ---- declarative interceptors (tests/README.md "Interceptor scenarios") ---------------------


def _json_contains(have, want):
    if isinstance(have, dict) and isinstance(want, dict):
        return all(k in have and _json_contains(have[k], v) for k, v in want.items())
    return have == want


def _changes(b, request):
    if "raise" in b:
        raise ValueError(b["raise"])
    out = {}
    headers = dict(b.get("headers", {}))
    if "attempt_header" in b:
        headers[b["attempt_header"]] = "none" if request.attempt is None else str(request.attempt)
    if headers:
        out["headers"] = headers
    for k in ("query", "path"):
        if k in b:
            out[k] = b[k]
    if "json_set" in b:
        out["json"] = {**(request.json if isinstance(request.json, dict) else {}), **b["json_set"]}
    return out or None


def _verdict(a, response):
    if "raise" in a:
        raise ValueError(a["raise"])
    want = a.get("reject_when_json")
    if want is not None and _json_contains(response.json, want):
        raise harness.Reject("rejected by the vector", retryable=a.get("retryable", False), code=a.get("code"))


def vector_interceptor(spec, asynchronous):
    """`before` and `after` built from a scenario's declarative interceptor: plain functions
    (a blocking sleep on the interceptor's own thread) for the sync client, `async def` ones
    (an asyncio sleep on the loop) for the async client."""
    b, a = spec.get("before"), spec.get("after")
    if asynchronous:

        async def abefore(request):
            if "sleep_ms" in b:
                await asyncio.sleep(b["sleep_ms"] / 1000)
            return _changes(b, request)

        async def aafter(response):
            _verdict(a, response)

        return (abefore if b is not None else None), (aafter if a is not None else None)

    def before(request):
        if "sleep_ms" in b:
            time.sleep(b["sleep_ms"] / 1000)
        return _changes(b, request)

    def after(response):
        _verdict(a, response)

    return (before if b is not None else None), (after if a is not None else None)


def add_interceptors(client, scenario, asynchronous):
    """Registers the scenario's `interceptors`, in order, right after the client is built."""
    for spec in scenario.get("interceptors", []):
        before, after = vector_interceptor(spec, asynchronous)
        client.add_interceptor(
            before, after, name=spec["name"], level=spec.get("level"), services=spec.get("services"), want_body=spec.get("want_body", False)
        )


# ---- sync client ---------------------------------------------------------------------------


class _SyncCancel(BaseException):
    """Raised by a SIGALRM handler: the sync client's host-side cancel (the Ctrl-C path)."""


def _sync_invoke(client, name, call):
    """The call's blocking API: a chat answer, a request naming a route, or a plain request."""
    if "chat" in call:
        args, kw = chat_args(call)
        return client.chat(*args, **kw)
    args, kw = route_request_args(call) if "route" in call else call_kwargs(name, call)
    return client.request(*args, **kw)


def _sync_call(client, name, call, cancel_ms=None):
    start = time.perf_counter()
    try:
        if cancel_ms is None:
            result = _sync_invoke(client, name, call)
        else:
            # The blocking call checks signals every 50 ms; the handler's exception drops the Rust task.
            def on_alarm(signum, frame):
                raise _SyncCancel()

            old = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, cancel_ms / 1000)
            try:
                result = _sync_invoke(client, name, call)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    except BaseException as e:  # noqa: BLE001 - the outcome is what we check
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


def _sync_chat_stream(client, call):
    args, kw = chat_args(call)
    limit = call.get("read_chunks")
    start = time.perf_counter()
    try:
        with client.chat_stream(*args, **kw) as s:
            chunks = []
            for chunk in s:
                chunks.append(chunk)
                if limit is not None and len(chunks) >= limit:
                    break  # leaving the loop cancels the answer
        result = ChatStreamed(s, chunks)
    except BaseException as e:  # noqa: BLE001 - the outcome is what we check
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


def _sync_stream(client, name, call):
    if "chat" in call:
        return _sync_chat_stream(client, call)
    args, kw = call_kwargs(name, call)
    limit = call.get("read_chunks")
    start = time.perf_counter()
    try:
        with client.stream(*args, **kw) as r:
            chunks = []
            for chunk in r.iter_bytes():
                chunks.append(chunk)
                if limit is not None and len(chunks) >= limit:
                    break  # leaving the block frees the connection and the permit
        result = Streamed(r, b"".join(chunks))
    except BaseException as e:  # noqa: BLE001 - the outcome is what we check
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


def _settle_bulkhead_sync(name, i, call, client, errors):
    exp = call["expect"]
    if "bulkhead_in_use" in exp:
        svc, deadline = call.get("service", "svc"), time.monotonic() + 1
        got = client.bulkhead_in_use(svc)
        while got != exp["bulkhead_in_use"] and time.monotonic() < deadline:
            time.sleep(0.005)
            got = client.bulkhead_in_use(svc)
        if got != exp["bulkhead_in_use"]:
            errors.append(f"{name} call {i}: expected {exp['bulkhead_in_use']} bulkhead permits in use, got {got}")


def run_sync(upstream, scenario):
    install_scripts(upstream, scenario)
    if "config_error" in scenario:
        return check_config_error(upstream, scenario, harness.Client)
    name, errors = scenario["name"], []
    background = []
    with harness.Client(scenario_config(upstream, scenario)) as client, ThreadPoolExecutor(max_workers=256) as pool:
        add_interceptors(client, scenario, asynchronous=False)
        for i, call in enumerate(scenario["calls"]):
            if "wait_ms" in call:
                time.sleep(call["wait_ms"] / 1000)
            if "reload" in call:
                reload_call(client, upstream, name, i, call, errors)
                continue
            if "routing_state" in call:
                routing_state_call(client, name, i, call, errors)
                continue
            if "set_weight" in call:
                set_weight_call(client, name, i, call, errors)
                continue
            cancel = call.get("cancel_after_ms")
            if call.get("stream") and (cancel is not None or call.get("background") or call.get("parallel")):
                pytest.fail(f"{name} call {i}: the runner streams only foreground single calls")
            if cancel is not None and (call.get("background") or call.get("parallel")):
                pytest.fail(f"{name} call {i}: the sync runner cancels only foreground single calls")
            if call.get("background"):
                background.append((i, call, pool.submit(_sync_call, client, name, call)))
                continue
            if "parallel" in call:
                futs = [pool.submit(_sync_call, client, name, call) for _ in range(call["parallel"])]
                check_outcomes(name, i, call, [f.result() for f in futs], errors)
            elif call.get("stream"):
                check_result(name, i, call, _sync_stream(client, name, call), errors)
            else:
                check_result(name, i, call, _sync_call(client, name, call, cancel), errors)
            check_breaker(name, i, call, client, errors)
            _settle_bulkhead_sync(name, i, call, client, errors)
        for i, call, fut in background:
            check_result(name, i, call, fut.result(), errors)
            check_breaker(name, i, call, client, errors)
            _settle_bulkhead_sync(name, i, call, client, errors)
    check_upstreams(upstream, scenario, errors)
    return errors


# ---- async client --------------------------------------------------------------------------


def _async_invoke(client, name, call):
    """The call's coroutine: a chat answer, a request naming a route, or a plain request."""
    if "chat" in call:
        args, kw = chat_args(call)
        return client.chat(*args, **kw)
    args, kw = route_request_args(call) if "route" in call else call_kwargs(name, call)
    return client.request(*args, **kw)


async def _async_call(client, name, call, cancel_ms=None):
    start = time.perf_counter()
    task = asyncio.ensure_future(_async_invoke(client, name, call))
    try:
        if cancel_ms is not None:
            done, _ = await asyncio.wait({task}, timeout=cancel_ms / 1000)
            if not done:
                task.cancel()  # the host-side cancel: drops the Rust future
        result = await task
    except BaseException as e:  # noqa: BLE001
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


async def _async_chat_stream(client, call):
    args, kw = chat_args(call)
    limit = call.get("read_chunks")
    start = time.perf_counter()
    try:
        chunks = []
        stream = client.chat_stream(*args, **kw)
        async for chunk in stream:
            chunks.append(chunk)
            if limit is not None and len(chunks) >= limit:
                break
        result = ChatStreamed(stream, chunks)
    except BaseException as e:  # noqa: BLE001
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


async def _async_stream(client, name, call):
    if "chat" in call:
        return await _async_chat_stream(client, call)
    args, kw = call_kwargs(name, call)
    limit = call.get("read_chunks")
    start = time.perf_counter()
    try:
        async with client.stream(*args, **kw) as r:
            chunks = []
            async for chunk in r.aiter_bytes():
                chunks.append(chunk)
                if limit is not None and len(chunks) >= limit:
                    break
        result = Streamed(r, b"".join(chunks))
    except BaseException as e:  # noqa: BLE001
        result = e
    return Outcome(result, (time.perf_counter() - start) * 1000)


async def _settle_bulkhead_async(name, i, call, client, errors):
    exp = call["expect"]
    if "bulkhead_in_use" in exp:
        svc, deadline = call.get("service", "svc"), time.monotonic() + 1
        got = client.bulkhead_in_use(svc)
        while got != exp["bulkhead_in_use"] and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            got = client.bulkhead_in_use(svc)
        if got != exp["bulkhead_in_use"]:
            errors.append(f"{name} call {i}: expected {exp['bulkhead_in_use']} bulkhead permits in use, got {got}")


async def run_async(upstream, scenario):
    install_scripts(upstream, scenario)
    if "config_error" in scenario:
        return check_config_error(upstream, scenario, harness.AsyncClient)
    name, errors = scenario["name"], []
    background = []
    async with harness.AsyncClient(scenario_config(upstream, scenario)) as client:
        add_interceptors(client, scenario, asynchronous=True)
        for i, call in enumerate(scenario["calls"]):
            if "wait_ms" in call:
                await asyncio.sleep(call["wait_ms"] / 1000)
            if "reload" in call:
                reload_call(client, upstream, name, i, call, errors)
                continue
            if "routing_state" in call:
                routing_state_call(client, name, i, call, errors)
                continue
            if "set_weight" in call:
                set_weight_call(client, name, i, call, errors)
                continue
            cancel = call.get("cancel_after_ms")
            if call.get("stream") and (cancel is not None or call.get("background") or call.get("parallel")):
                pytest.fail(f"{name} call {i}: the runner streams only foreground single calls")
            if call.get("background"):
                background.append((i, call, asyncio.ensure_future(_async_call(client, name, call, cancel))))
                await asyncio.sleep(0)  # let it start before the next call
                continue
            if "parallel" in call:
                outs = await asyncio.gather(*[_async_call(client, name, call, cancel) for _ in range(call["parallel"])])
                check_outcomes(name, i, call, outs, errors)
            elif call.get("stream"):
                check_result(name, i, call, await _async_stream(client, name, call), errors)
            else:
                check_result(name, i, call, await _async_call(client, name, call, cancel), errors)
            check_breaker(name, i, call, client, errors)
            await _settle_bulkhead_async(name, i, call, client, errors)
        for i, call, fut in background:
            check_result(name, i, call, await fut, errors)
            check_breaker(name, i, call, client, errors)
            await _settle_bulkhead_async(name, i, call, client, errors)
    check_upstreams(upstream, scenario, errors)
    return errors


IDS = [s["name"] for s in SCENARIOS]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_vector_sync(upstream, scenario):
    assert threading.current_thread() is threading.main_thread()  # SIGALRM cancels need it
    errors = run_sync(upstream, scenario)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_vector_async(upstream, scenario):
    errors = asyncio.run(run_async(upstream, scenario))
    assert not errors, "\n".join(errors)


def test_every_scenario_is_collected():
    assert len(SCENARIOS) >= 30, f"{VECTORS} has only {len(SCENARIOS)} scenarios"
