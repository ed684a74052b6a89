"""Routing across providers from Python: chat and chat streams on the upstream's simulated
OpenAI-compatible providers (tests/upstream/src/provider.rs), routing state and weights,
failover mid-stream, errors that list each provider, events, and cancellation."""

import asyncio
import logging
import time

import pytest

import harness

HELLO = [{"role": "user", "content": "Say hello, please."}]
ANSWER = "one two three four five"
SECRET = "sk-routing-secret-7f3a9c"


@pytest.fixture
def providers(upstream, request):
    """`providers(primary={...}, backup={...})`: sets the simulated providers (named after
    the test, logs cleared) and returns a config with one service per provider and route `chat`."""
    prefix = request.node.name.replace("[", "-").replace("]", "")[:60]

    def make(route=None, service=None, prices=None, **specs):
        services, entries = {}, []
        for pid, spec in specs.items():
            upstream.provider(f"{prefix}-{pid}", {**spec, "reset": True})
            services[pid] = {
                "base_url": f"{upstream.url}/llm/{prefix}-{pid}",
                "retry": {"jitter": False, "base_delay_ms": 10, "max_delay_ms": 50},
                **(service or {}),
            }
            entry = {"id": pid, "service": pid, "model": f"{pid}-model", "weight": 1}
            if prices and pid in prices:
                entry["price"] = prices[pid]
            entries.append(entry)
        routes = {"chat": {"adapter": "openai-compatible", "strategy": "priority", "providers": entries, **(route or {})}}
        return {"client": {"name": "pytest-routing"}, "log": {"enabled": False}, "services": services, "routes": routes}

    make.set = lambda pid, spec: upstream.provider(f"{prefix}-{pid}", spec)
    make.log = lambda pid: upstream.provider_log(f"{prefix}-{pid}")
    return make


def wait_for(predicate, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


# ---- chat ----------------------------------------------------------------------------------


def test_chat_answers_with_provider_model_usage_and_cost(providers):
    cfg = providers(primary={"content": ANSWER, "prompt_tokens": 1000, "completion_tokens": 500}, prices={"primary": {"input_per_1k": 0.1, "output_per_1k": 0.2}})
    with harness.Client(cfg) as client:
        r = client.chat("chat", HELLO, temperature=0.5, max_tokens=64)
    assert isinstance(r, harness.ChatResponse)
    assert (r.content, r.finish_reason, r.route, r.provider, r.model) == (ANSWER, "stop", "chat", "primary", "primary-model")
    assert r.usage == harness.Usage(1000, 500, 1500, 0, 0) and r.usage.total_tokens == 1500
    assert r.cost == pytest.approx(0.2, abs=1e-9)
    assert (r.attempts, r.attempts_by_provider, r.fallback, r.stale) == (1, [("primary", 1)], None, False)
    assert len(r.trace_id) == 32 and r.elapsed_ms > 0
    assert b'"choices"' in r.raw
    assert "primary" in repr(r) and ANSWER not in repr(r)
    body = providers.log("primary")["requests"][0]["body"]
    assert (body["model"], body["temperature"], body["max_tokens"], body["messages"]) == ("primary-model", 0.5, 64, HELLO)


def test_chat_fails_over_and_normalises_params_per_provider(providers):
    cfg = providers(primary={"fail_rate": 1.0, "fail_status": 503}, backup={"content": "from backup"})
    cfg["routes"]["chat"]["providers"][1]["params"] = {"temperature": {"range": [0.0, 1.0]}, "max_tokens_field": "max_completion_tokens"}
    with harness.Client(cfg) as client:
        r = client.chat("chat", HELLO, temperature=1.5, max_tokens=32)
    assert (r.content, r.provider, r.attempts, r.attempts_by_provider) == ("from backup", "backup", 3, [("primary", 2), ("backup", 1)])
    backup = providers.log("backup")["requests"][0]["body"]
    assert (backup["temperature"], backup["max_completion_tokens"], "max_tokens" in backup) == (1.0, 32, False)


def test_async_chat_answers_the_same(providers):
    cfg = providers(primary={"content": ANSWER, "prompt_tokens": 3, "completion_tokens": 5})

    async def main():
        async with harness.AsyncClient(cfg) as client:
            return await client.chat("chat", HELLO, extra_body={"timeout_ms": 7}, extra_headers={"x-tenant": "t1"}, timeout_ms=5000)

    r = asyncio.run(main())
    assert (r.content, r.provider, r.model, r.usage) == (ANSWER, "primary", "primary-model", harness.Usage(3, 5, 8, 0, 0))
    # extra_body carries a parameter whose name is a keyword of chat() itself.
    assert providers.log("primary")["requests"][0]["body"]["timeout_ms"] == 7


def test_chat_arguments_are_checked_and_name_the_field(providers):
    with harness.Client(providers(primary={})) as client:
        with pytest.raises(harness.ConfigError, match=r"params.temperature"):
            client.chat("chat", HELLO, temperature=float("nan"))
        with pytest.raises(harness.ConfigError, match=r"^messages\[0\].role"):
            client.chat("chat", [{"content": "no role"}])
        with pytest.raises(harness.ConfigError, match=r"^messages: expected a non-empty list"):
            client.chat("chat", [])
        with pytest.raises(harness.ConfigError, match=r"params.stream"):
            client.chat("chat", HELLO, stream=True)
        with pytest.raises(harness.ConfigError, match=r"params.top_p: given both"):
            client.chat("chat", HELLO, top_p=0.1, extra_body={"top_p": 0.2})
        with pytest.raises(harness.ConfigError, match=r"^route: unknown route `nope`"):
            client.chat("nope", HELLO)
        with pytest.raises(harness.ConfigError, match=r"^route: expected a string"):
            client.chat(42, HELLO)
        with pytest.raises(harness.ConfigError, match=r"^extra_headers"):
            client.chat("chat", HELLO, extra_headers=42)
    assert providers.log("primary")["count"] == 0


def test_a_plain_request_naming_a_route_says_who_answered(providers, config):
    cfg = providers(primary={"fail_rate": 1.0, "fail_status": 503}, backup={"prompt_tokens": 2, "completion_tokens": 3}, route={"same_provider_retries": 0})
    with harness.Client(cfg) as client:
        r = client.post("chat", "/v1/chat/completions", json={"messages": HELLO})
    assert (r.status, r.route, r.provider, r.model, r.attempts_by_provider) == (200, "chat", "backup", "backup-model", [("primary", 1), ("backup", 1)])
    assert (r.usage, r.cost, r.fallback, r.stale) == (harness.Usage(2, 3, 5, 0, 0), None, None, False)
    assert "provider=backup" in repr(r)
    # A plain service has no routing attributes.
    plain = harness.Response(200, [], b"", 1.0, 1, "t")
    assert (plain.route, plain.provider, plain.model, plain.attempts_by_provider, plain.fallback, plain.stale, plain.usage, plain.cost) == (None,) * 8


def test_a_cached_answer_is_served_stale_when_no_provider_can_answer(providers):
    cfg = providers(primary={"content": "fresh"}, route={"same_provider_retries": 0, "fallback": {"cache_ttl_ms": 60000}})
    with harness.Client(cfg) as client:
        assert client.chat("chat", HELLO).stale is False
        providers.set("primary", {"fail_rate": 1.0})
        r = client.chat("chat", HELLO)
        with pytest.raises(harness.NoHealthyProviderError):
            client.chat("chat", [{"role": "user", "content": "never asked before"}])
    assert (r.content, r.fallback, r.stale) == ("fresh", "cache", True)


# ---- chat streams --------------------------------------------------------------------------


def test_chat_stream_gives_deltas_then_done_with_usage_and_cost(providers):
    cfg = providers(primary={"content": ANSWER}, prices={"primary": {"input_per_1k": 1.0, "output_per_1k": 2.0}}, route={"stream": {"mid_stream": "restart"}})
    with harness.Client(cfg) as client:
        with client.chat_stream("chat", HELLO, max_tokens=10) as stream:
            assert stream.route == "chat" and len(stream.trace_id) == 32
            chunks = list(stream)
        assert client.bulkhead_in_use("primary") == 0
    deltas = [c for c in chunks if c.kind == "delta"]
    assert "".join(c.content for c in deltas) == ANSWER and len(deltas) >= 5
    assert all(c.provider == "primary" and c.model == "primary-model" for c in deltas)
    done = chunks[-1]
    assert (done.kind, done.finish_reason, done.provider, done.content) == ("done", "stop", "primary", "")
    assert done.usage.completion_tokens == 5 and done.cost > 0
    assert "done" in repr(done)
    assert providers.log("primary")["requests"][0]["body"]["stream"] is True


def test_async_chat_stream_with_async_for_async_with_and_await(providers):
    cfg = providers(primary={"content": ANSWER})

    async def main():
        async with harness.AsyncClient(cfg) as client:
            plain = [c async for c in client.chat_stream("chat", HELLO)]
            async with client.chat_stream("chat", HELLO) as s:
                entered = [c async for c in s]
            s = await client.chat_stream("chat", HELLO)
            assert s.trace_id is not None
            awaited = [c async for c in s]
            return plain, entered, awaited

    for chunks in asyncio.run(main()):
        assert "".join(c.content for c in chunks if c.kind == "delta") == ANSWER
        assert chunks[-1].kind == "done" and chunks[-1].usage.completion_tokens == 5


@pytest.mark.parametrize("make", [harness.Client, harness.AsyncClient])
def test_a_stream_cut_mid_answer_restarts_on_the_backup(providers, make):
    """restart mode: a restart chunk, then the backup's whole answer; the default hold
    mode: only the backup's answer, the cut never seen."""
    results = {}
    for mode in ("restart", "hold"):
        cfg = providers(primary={"content": ANSWER, "stream": {"cut_after": 2}}, backup={"content": ANSWER}, route={"stream": {"mid_stream": mode}})
        events = []
        if make is harness.Client:
            with make(cfg) as client:
                client.add_listener(events.append)
                chunks = list(client.chat_stream("chat", HELLO))
                client.flush()
        else:

            async def main():
                async with make(cfg) as client:
                    client.add_listener(events.append)
                    out = [c async for c in client.chat_stream("chat", HELLO)]
                    client.flush()
                    return out

            chunks = asyncio.run(main())
        results[mode] = (chunks, [e.to_dict() for e in events if e.type == "stream_restarted"])

    chunks, restarted = results["restart"]
    kinds = [c.kind for c in chunks]
    first_restart = kinds.index("restart")
    assert kinds[:first_restart] == ["delta", "delta"] and kinds[-1] == "done", kinds
    assert "ConnectError" in chunks[first_restart].reason
    after = chunks[first_restart + 1 :]
    assert "".join(c.content for c in after if c.kind == "delta") == ANSWER
    assert all(c.provider == "backup" for c in after)
    assert restarted[0]["from"] == "primary" and restarted[0]["to"] == "backup" and restarted[0]["mode"] == "restart"

    chunks, restarted = results["hold"]
    assert "restart" not in [c.kind for c in chunks]
    assert "".join(c.content for c in chunks if c.kind == "delta") == ANSWER
    assert all(c.provider == "backup" for c in chunks)
    assert restarted[0]["mode"] == "hidden"


def test_a_stall_in_error_mode_raises_a_timeout_naming_the_provider(providers):
    cfg = providers(primary={"content": ANSWER, "stream": {"stall_after": 2}}, backup={}, route={"stream": {"mid_stream": "error"}}, service={"timeouts": {"idle_ms": 300}})
    seen = []
    with harness.Client(cfg) as client:
        with pytest.raises(harness.TimeoutError) as info:
            for chunk in client.chat_stream("chat", HELLO):
                seen.append(chunk.kind)
        assert wait_for(lambda: client.bulkhead_in_use("primary") == 0)
    assert seen == ["delta", "delta"]
    assert (info.value.phase, info.value.provider) == ("idle", "primary")


def test_no_first_chunk_within_ttft_is_a_ttft_timeout(providers):
    cfg = providers(primary={"stream": {"ttft_ms": 3000}}, route={"ttft_ms": 200})
    with harness.Client(cfg) as client:
        with pytest.raises(harness.TimeoutError) as info:
            list(client.chat_stream("chat", HELLO))
    assert (info.value.phase, info.value.provider) == ("ttft", "primary")


def test_leaving_a_chat_stream_early_cancels_it_and_frees_the_permits(providers):
    cfg = providers(primary={"content": ANSWER, "stream": {"delay_ms": 200}}, route={"stream": {"mid_stream": "restart"}})
    with harness.Client(cfg) as client:
        stream = client.chat_stream("chat", HELLO)
        for _ in stream:
            break
        assert wait_for(lambda: client.bulkhead_in_use("primary") == 0)
        with pytest.raises(harness.CancelledError):
            list(stream)
        with client.chat_stream("chat", HELLO):
            pass
        assert wait_for(lambda: client.bulkhead_in_use("primary") == 0)
        stream = client.chat_stream("chat", HELLO)
        stream.close()
        assert wait_for(lambda: client.bulkhead_in_use("primary") == 0)


def test_cancelling_the_task_cancels_an_async_chat_and_its_stream(providers):
    # restart mode passes chunks on as they come (hold would keep them until the end).
    cfg = providers(primary={"latency_ms": 5000}, route={"stream": {"mid_stream": "restart"}})

    async def main():
        async with harness.AsyncClient(cfg) as client:
            task = asyncio.ensure_future(client.chat("chat", HELLO))
            deadline = time.monotonic() + 3
            while client.bulkhead_in_use("primary") == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert client.bulkhead_in_use("primary") == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 1
            while client.bulkhead_in_use("primary") and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert client.bulkhead_in_use("primary") == 0

            got = []

            async def read():
                async for chunk in client.chat_stream("chat", HELLO):
                    got.append(chunk)

            async def until(predicate):
                deadline = time.monotonic() + 3
                while not predicate() and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert predicate()

            # Cancelled while opening (the head is late), then while reading chunks.
            for spec, started in (
                ({"latency_ms": 5000}, lambda: client.bulkhead_in_use("primary") == 1),
                ({"content": ANSWER, "stream": {"delay_ms": 200}}, lambda: len(got) >= 1),
            ):
                providers.set("primary", spec)
                task = asyncio.ensure_future(read())
                await until(started)
                assert client.bulkhead_in_use("primary") == 1
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                deadline = time.monotonic() + 1
                while client.bulkhead_in_use("primary") and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert client.bulkhead_in_use("primary") == 0
            assert 1 <= len(got) < 5

    asyncio.run(main())


# ---- routing state and weights -------------------------------------------------------------


@pytest.mark.parametrize("make", [harness.Client, harness.AsyncClient])
def test_routing_state_and_set_weight(providers, make):
    cfg = providers(
        primary={"fail_rate": 1.0, "fail_status": 503},
        backup={},
        route={"same_provider_retries": 0},
        service={"breaker": {"failure_threshold": 1, "open_ms": 60000}},
    )
    client = make(cfg)
    try:
        run = (lambda c: c) if make is harness.Client else asyncio.run
        assert run(client.chat("chat", HELLO)).provider == "backup"
        state = client.routing_state("chat")
        assert (state["route"], state["strategy"]) == ("chat", "priority")
        primary, backup = state["providers"]
        assert (primary["id"], primary["service"], primary["model"], primary["weight"]) == ("primary", "primary", "primary-model", 1)
        assert (primary["breaker"], primary["in_flight"], backup["breaker"]) == ("open", 0, "closed")
        assert "503" in primary["last_error"] and backup["last_error"] is None
        assert set(primary) >= {"effective_weight", "health", "success_rate", "latency_ewma_ms", "cooling_ms"}

        before = client.config_version
        version = client.set_weight("chat", "backup", 0)
        assert version == client.config_version != before
        assert client.routing_state("chat")["providers"][1]["weight"] == 0
        with pytest.raises(harness.NoHealthyProviderError) as info:
            run(client.chat("chat", HELLO))
        assert [p for p, _ in info.value.provider_errors] == ["primary", "backup"]
        assert "not tried (weight 0)" in dict(info.value.provider_errors)["backup"]

        with pytest.raises(harness.ConfigError, match="unknown provider `nobody`"):
            client.set_weight("chat", "nobody", 1)
        with pytest.raises(harness.ConfigError, match="^route: unknown route"):
            client.set_weight("nope", "backup", 1)
        with pytest.raises(harness.ConfigError, match="^route: unknown route"):
            client.routing_state("nope")
        for bad in (-1, 2**32, 1.5, True, "1"):
            with pytest.raises(harness.ConfigError, match="^weight: expected an integer"):
                client.set_weight("chat", "backup", bad)
        assert client.config_version == version
    finally:
        client.close()


# ---- errors --------------------------------------------------------------------------------


def test_no_healthy_provider_lists_each_providers_error_and_shows_no_secret(providers):
    auth = {"auth": {"type": "bearer", "token": {"value": SECRET}}}
    cfg = providers(primary={"fail_rate": 1.0, "fail_status": 502}, backup={"fail_rate": 1.0, "fail_status": 503}, route={"same_provider_retries": 0}, service=auth)
    with harness.Client(cfg) as client:
        with pytest.raises(harness.NoHealthyProviderError) as info:
            client.chat("chat", HELLO)
        state = client.routing_state("chat")
        with pytest.raises(harness.NoHealthyProviderError) as streamed:
            client.chat_stream("chat", HELLO)
    e = info.value
    assert isinstance(e, harness.HarnessError) and e.kind == "NoHealthyProviderError"
    assert [p for p, _ in e.provider_errors] == ["primary", "backup"]
    assert "502" in e.provider_errors[0][1] and "503" in e.provider_errors[1][1]
    assert all(isinstance(p, tuple) for p in e.provider_errors)
    assert "primary: HttpStatusError" in e.message and e.attempts == 2
    for text in (str(e), repr(e), e.message, repr(e.provider_errors), str(state), str(streamed.value), repr(streamed.value)):
        assert SECRET not in text
    assert [p for p, _ in streamed.value.provider_errors] == ["primary", "backup"]


def test_a_non_retryable_error_names_its_provider(providers):
    cfg = providers(primary={"fail_rate": 1.0, "fail_status": 400, "error_code": "content_policy_violation"}, backup={})
    with harness.Client(cfg) as client:
        with pytest.raises(harness.HttpStatusError) as info:
            client.chat("chat", HELLO)
    e = info.value
    assert (e.status, e.code, e.provider, e.provider_errors, e.attempts) == (400, "content_policy_violation", "primary", [], 1)
    assert "provider=primary" in str(e)
    assert providers.log("backup")["count"] == 0


# ---- events and log records ----------------------------------------------------------------


def test_failover_fallback_and_routed_records_reach_listeners_and_logging(providers, caplog):
    cfg = providers(
        primary={"fail_rate": 1.0, "fail_status": 503, "error_code": "overloaded"},
        backup={"prompt_tokens": 10, "completion_tokens": 10},
        prices={"backup": {"input_per_1k": 1.0, "output_per_1k": 1.0}},
        route={"same_provider_retries": 0},
    )
    cfg["log"] = {"enabled": True, "sink": "python"}
    events = []
    with caplog.at_level(logging.INFO, logger="harness"), harness.Client(cfg) as client:
        client.add_listener(events.append)
        r = client.chat("chat", HELLO)
        client.flush()
    failover = [e for e in events if e.type == "provider_failover"]
    assert len(failover) == 1
    f = failover[0].to_dict()
    assert (f["route"], f["from"], f["to"], f["reason"], f["status"], f["code"], f["trace_id"]) == ("chat", "primary", "backup", "HttpStatusError", 503, "overloaded", r.trace_id)
    finished = [e for e in events if e.type == "request_finished"]
    assert len(finished) == 1
    rec = finished[0]
    assert (rec.route, rec.provider, rec.model, rec.status) == ("chat", "backup", "backup-model", 200)
    assert rec.cost == pytest.approx(0.02)
    assert "fallback" not in rec.to_dict()
    logged = [x for x in caplog.records if x.name == "harness"]
    assert len(logged) == 1 and logged[0].harness_provider == "backup" and logged[0].harness_route == "chat"
    assert "provider=backup" in logged[0].getMessage()


def test_a_static_fallback_is_an_event_and_an_answer_without_provider(providers):
    cfg = providers(primary={"fail_rate": 1.0}, route={"criticality": "non-core", "same_provider_retries": 0, "fallback": {"static": "Busy, try again soon."}})
    events = []
    with harness.Client(cfg) as client:
        client.add_listener(events.append)
        r = client.chat("chat", HELLO)
        client.flush()
    assert (r.content, r.fallback, r.stale, r.provider) == ("Busy, try again soon.", "static", False, None)
    served = [e.to_dict() for e in events if e.type == "fallback_served"]
    assert served == [{"type": "fallback_served", "route": "chat", "kind": "static", "trace_id": r.trace_id}]
