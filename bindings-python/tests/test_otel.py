"""The host's active OpenTelemetry span is the parent of Harness's span (README "OpenTelemetry").

A real SDK tracer starts the host spans; the loopback upstream records the `traceparent` each
call sent downstream. The core makes its own span a child: same trace id, a new span id.
"""

import asyncio
import os
import re
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import harness

TRACER = TracerProvider().get_tracer("harness-tests")
EXPLICIT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HELLO = [{"role": "user", "content": "hi"}]
CHAT_ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]}


def ids(span):
    ctx = span.get_span_context()
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def sent(upstream, script):
    """`(version, trace id, span id, flags)` of each `traceparent` the upstream received."""
    out = []
    for r in upstream.log(script):
        m = re.fullmatch(r"(00)-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})", r["headers"]["traceparent"])
        assert m, r["headers"]["traceparent"]
        out.append(m.groups())
    return out


def test_request_in_a_span_continues_its_trace(upstream, config):
    upstream.script("otel_req", [{"status": 200}])
    with harness.Client(config()) as c:
        with TRACER.start_as_current_span("host") as span:
            r = c.get("svc", "/s/otel_req/a")
    trace_id, span_id = ids(span)
    assert r.trace_id == trace_id
    [(_, sent_trace, sent_span, flags)] = sent(upstream, "otel_req")
    assert sent_trace == trace_id and sent_span != span_id and flags == "01"


def test_error_in_a_span_carries_its_trace_id(upstream, config):
    upstream.script("otel_err", [{"status": 503}])
    with harness.Client(config(retry={"max_retries": 1, "jitter": False, "base_delay_ms": 1})) as c:
        with TRACER.start_as_current_span("host") as span:
            with pytest.raises(harness.HttpStatusError) as info:
                c.get("svc", "/s/otel_err/a")
    trace_id, span_id = ids(span)
    assert info.value.trace_id == trace_id and info.value.attempts == 2
    # Every attempt (each its own span id in the core) is in the host's trace.
    assert [(t, s != span_id) for _, t, s, _ in sent(upstream, "otel_err")] == [(trace_id, True)] * 2


def test_outside_a_span_each_call_starts_a_fresh_trace(upstream, config):
    upstream.script("otel_none", [{"status": 200}])
    with harness.Client(config()) as c:
        with TRACER.start_as_current_span("host") as span:
            pass
        first, second = c.get("svc", "/s/otel_none/a"), c.get("svc", "/s/otel_none/b")
    host_trace, _ = ids(span)
    assert len({first.trace_id, second.trace_id, host_trace}) == 3
    assert [t for _, t, _, _ in sent(upstream, "otel_none")] == [first.trace_id, second.trace_id]


def test_an_explicit_traceparent_wins(upstream, config):
    upstream.script("otel_explicit", [{"status": 200}])
    explicit_trace = EXPLICIT.split("-")[1]
    with harness.Client(config()) as c:
        with TRACER.start_as_current_span("host") as span:
            by_argument = c.get("svc", "/s/otel_explicit/a", traceparent=EXPLICIT)
            by_header = c.get("svc", "/s/otel_explicit/b", headers={"TraceParent": EXPLICIT})
            by_pair = c.get("svc", "/s/otel_explicit/c", headers=[("x-a", "1"), ("traceparent", EXPLICIT)])
            # A one-shot iterable of pairs is read for a traceparent and still sent whole.
            by_generator = c.get("svc", "/s/otel_explicit/d", headers=(p for p in [("x-a", "1"), ("x-b", "2")]))
    host_trace, _ = ids(span)
    assert by_argument.trace_id == by_header.trace_id == by_pair.trace_id == explicit_trace
    assert by_generator.trace_id == host_trace
    log = upstream.log("otel_explicit")
    assert [t for _, t, _, _ in sent(upstream, "otel_explicit")] == [explicit_trace] * 3 + [host_trace]
    assert (log[3]["headers"]["x-a"], log[3]["headers"]["x-b"]) == ("1", "2")


def test_a_remote_parent_and_an_unsampled_span(upstream, config):
    """A span context extracted from an incoming request (remote, not recording) is a parent too,
    and the sampled flag goes downstream as the host decided it."""
    upstream.script("otel_remote", [{"status": 200}])
    remote = trace.SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=True, trace_flags=trace.TraceFlags(0))
    unsampled = TracerProvider(sampler=ALWAYS_OFF).get_tracer("harness-tests-off")
    with harness.Client(config()) as c:
        with trace.use_span(trace.NonRecordingSpan(remote)):
            r = c.get("svc", "/s/otel_remote/a")
        with unsampled.start_as_current_span("host") as span:
            s = c.get("svc", "/s/otel_remote/b")
    assert not span.get_span_context().trace_flags.sampled
    assert r.trace_id == "0af7651916cd43dd8448eb211c80319c" and s.trace_id == ids(span)[0]
    assert [(t, f) for _, t, _, f in sent(upstream, "otel_remote")] == [(r.trace_id, "00"), (s.trace_id, "00")]


def test_streams_in_a_span(upstream, config):
    upstream.script("otel_stream", [{"body": "a\nb\n"}])
    with harness.Client(config()) as c:
        with TRACER.start_as_current_span("host") as span:
            with c.stream("svc", "GET", "/s/otel_stream/a") as r:
                assert r.read() == b"a\nb\n" and r.trace_id == ids(span)[0]

    async def go():
        async with harness.AsyncClient(config()) as a:
            with TRACER.start_as_current_span("host-async") as span:
                async with a.stream("svc", "GET", "/s/otel_stream/b") as r:
                    assert await r.aread() == b"a\nb\n"
                    return r.trace_id, ids(span)[0]

    got, want = asyncio.run(go())
    assert got == want
    assert [t for _, t, _, _ in sent(upstream, "otel_stream")] == [ids(span)[0], want]


def test_async_tasks_each_carry_their_own_span(upstream, config):
    upstream.script("otel_async", [{"status": 200, "delay_ms": 50}])

    async def one(a, name):
        with TRACER.start_as_current_span(name) as span:
            r = await a.get("svc", f"/s/otel_async/{name}")
        return r.trace_id, ids(span)[0]

    async def go():
        async with harness.AsyncClient(config()) as a:
            # Concurrent requests, each in its own task's context.
            pairs = await asyncio.gather(*(one(a, f"t{i}") for i in range(4)))
            outside = await a.get("svc", "/s/otel_async/outside")
        return pairs, outside

    pairs, outside = asyncio.run(go())
    assert all(got == want for got, want in pairs) and len({want for _, want in pairs}) == 4
    assert outside.trace_id not in {want for _, want in pairs}
    by_path = {r["path"].rsplit("/", 1)[1]: r["headers"]["traceparent"].split("-")[1] for r in upstream.log("otel_async")}
    assert {f"t{i}": want for i, (_, want) in enumerate(pairs)}.items() <= by_path.items()


def test_chat_calls_in_a_span(upstream):
    # One provider on a scripted path (its log shows the headers), the other on the simulated provider (streams).
    upstream.script("otel_chat", [{"json": CHAT_ANSWER}])
    upstream.provider("otel-chat-sim", {"content": "one two", "reset": True})
    cfg = {
        "client": {"name": "pytest-otel"},
        "log": {"enabled": False},
        "services": {"scripted-svc": {"base_url": f"{upstream.url}/s/otel_chat"}, "sim-svc": {"base_url": f"{upstream.url}/llm/otel-chat-sim"}},
        "routes": {
            "scripted": {"adapter": "openai-compatible", "providers": [{"id": "p", "service": "scripted-svc", "model": "m", "weight": 1}]},
            "sim": {"adapter": "openai-compatible", "providers": [{"id": "p", "service": "sim-svc", "model": "m", "weight": 1}]},
        },
    }
    with harness.Client(cfg) as c:
        with TRACER.start_as_current_span("host") as span:
            answer = c.chat("scripted", HELLO)
            with c.chat_stream("sim", HELLO) as stream:
                chunks = [ch.content for ch in stream if ch.kind == "delta"]
            streamed = stream.trace_id
        explicit = c.chat("scripted", HELLO, traceparent=EXPLICIT)
    trace_id, span_id = ids(span)
    assert answer.content == "hello" and "".join(chunks).strip() == "one two"
    assert answer.trace_id == streamed == trace_id and explicit.trace_id == EXPLICIT.split("-")[1]
    [first, second] = sent(upstream, "otel_chat")
    assert first[1] == trace_id and first[2] != span_id and second[1] == explicit.trace_id

    async def go():
        async with harness.AsyncClient(cfg) as a:
            with TRACER.start_as_current_span("host-async") as span:
                answer = await a.chat("scripted", HELLO)
                stream = a.chat_stream("sim", HELLO)
            # An async chat stream is sent when first iterated: it keeps the context of the call.
            async with stream:
                _ = [ch async for ch in stream]
            return answer.trace_id, stream.trace_id, ids(span)[0]

    got_answer, got_stream, want = asyncio.run(go())
    assert got_answer == got_stream == want


def test_without_opentelemetry_calls_are_unchanged(upstream):
    """`opentelemetry` is optional: with it unimportable, harness imports, calls work and start
    their own traces, and the failed import is tried once only."""
    upstream.script("otel_absent", [{"status": 200}])
    code = f"""
import sys
sys.modules["opentelemetry"] = None  # `import opentelemetry...` raises ImportError
import harness
from harness import _otel
cfg = {{"log": {{"enabled": False}}, "services": {{"svc": {{"base_url": {upstream.url!r}}}}}}}
with harness.Client(cfg) as c:
    a = c.get("svc", "/s/otel_absent/a")
    assert _otel._get_current_span is None
    b = c.get("svc", "/s/otel_absent/b", traceparent={EXPLICIT!r})
print(a.trace_id, b.trace_id)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ})
    assert out.returncode == 0, out.stderr
    fresh, explicit = out.stdout.split()
    assert re.fullmatch(r"[0-9a-f]{32}", fresh) and explicit == EXPLICIT.split("-")[1]
    assert [t for _, t, _, _ in sent(upstream, "otel_absent")] == [fresh, explicit]


# ---- OTLP export: the core's spans reach a collector, children of the host's span ----------


def otel_config(upstream, **svc):
    """One service (`svc`) and one route (`chat`), exporting spans to the upstream's OTLP receiver."""
    return {
        "client": {"name": "pytest-otel"},
        "log": {"enabled": False},
        "otel": {"endpoint": upstream.url, "sample_ratio": 1.0, "delay_ms": 50, "service_name": "pytest-otel-export"},
        "services": {"svc": {"base_url": upstream.url, **svc}, "sim-svc": {"base_url": f"{upstream.url}/llm/otel-export-sim"}},
        "routes": {"chat": {"adapter": "openai-compatible", "providers": [{"id": "sim", "service": "sim-svc", "model": "m", "weight": 1}]}},
    }


def harness_span(spans, parent):
    """The one exported span whose parent is `parent` (the host span), and its children (the attempts)."""
    [root] = [s for s in spans if s["parent_span_id"] == parent]
    children = sorted((s for s in spans if s["parent_span_id"] == root["span_id"]), key=lambda s: s["attributes"]["harness.attempt"])
    return root, children


def test_exported_spans_are_children_of_the_host_span(upstream):
    upstream.script("otel_export", [{"status": 503}, {"status": 200}])
    retry = {"max_retries": 1, "jitter": False, "base_delay_ms": 1}
    with harness.Client(otel_config(upstream, retry=retry)) as c:
        with TRACER.start_as_current_span("host") as span:
            r = c.get("svc", "/s/otel_export/42", endpoint="/s/otel_export/{id}")
    trace_id, span_id = ids(span)
    assert r.trace_id == trace_id and r.attempts == 2

    root, attempts = harness_span(upstream.otlp_spans(trace_id, 3), span_id)
    assert (root["trace_id"], root["kind"], root["name"]) == (trace_id, 3, "GET /s/otel_export/{id}"), root
    assert root["service_name"] == "pytest-otel-export"
    a = root["attributes"]
    assert (a["harness.service"], a["harness.endpoint"], a["harness.attempts"]) == ("svc", "/s/otel_export/{id}", 2), a
    assert (a["http.request.method"], a["url.template"], a["http.response.status_code"]) == ("GET", "/s/otel_export/{id}", 200)
    # One child per attempt; each attempt's span id is the one sent downstream.
    assert [(s["attributes"]["harness.attempt"], s["attributes"]["http.response.status_code"]) for s in attempts] == [(1, 503), (2, 200)]
    assert [s for _, _, s, _ in sent(upstream, "otel_export")] == [s["span_id"] for s in attempts]


def test_async_calls_and_chat_export_spans_under_the_tasks_span(upstream):
    upstream.script("otel_export_async", [{"status": 200}])
    upstream.provider("otel-export-sim", {"content": "hi", "reset": True})

    async def go():
        async with harness.AsyncClient(otel_config(upstream)) as a:
            with TRACER.start_as_current_span("host-async") as span:
                await a.get("svc", "/s/otel_export_async/a")
                answer = await a.chat("chat", HELLO)
        return span, answer

    span, answer = asyncio.run(go())
    trace_id, span_id = ids(span)
    assert answer.trace_id == trace_id
    spans = upstream.otlp_spans(trace_id, 4)
    roots = sorted((s for s in spans if s["parent_span_id"] == span_id), key=lambda s: s["name"])
    assert [(s["name"], s["kind"], s["attributes"]["harness.service"]) for s in roots] == [
        ("GET /s/otel_export_async/a", 3, "svc"),
        ("POST /v1/chat/completions", 3, "chat"),
    ], roots
    chat = roots[1]["attributes"]
    assert (chat["harness.route"], chat["harness.provider"], chat["harness.model"]) == ("chat", "sim", "m")
    for root in roots:
        assert [s for s in spans if s["parent_span_id"] == root["span_id"]], f"no attempt span under {root['name']}"
