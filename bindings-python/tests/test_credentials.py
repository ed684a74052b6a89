"""Credentials from Python: host token providers (sync and async), single-flight refresh at
expiry, a provider that raises, the state API, and no token value anywhere it could leak."""

import asyncio
import logging
import threading
import time

import pytest

import harness


def callback_config(upstream, refresh=None, **extra):
    auth = {"type": "callback", **({"refresh": refresh} if refresh else {})}
    return {
        "client": {"name": "pytest"},
        "log": {"enabled": False},
        "services": {"svc": {"base_url": upstream.url, "auth": auth, "retry": {"max_retries": 0}, **extra}},
    }


def oauth2_config(upstream, name):
    auth = {
        "type": "oauth2_client_credentials",
        "token_url": f"{upstream.url}/s/{name}-token/oauth/token",
        "client_id": {"value": "client-1"},
        "client_secret": {"value": "client-secret-xyz"},
    }
    return {
        "client": {"name": "pytest"},
        "log": {"enabled": False},
        "services": {"svc": {"base_url": upstream.url, "auth": auth, "bulkhead": {"max_concurrency": 1000}}},
    }


def authorizations(upstream, name):
    return [r["headers"].get("authorization") for r in upstream.log(name)]


# ---- single-flight at expiry ---------------------------------------------------------------


def test_200_concurrent_requests_at_expiry_make_one_oauth2_token_call(upstream):
    upstream.script("cred_expiry", [{"status": 200}])
    upstream.script(
        "cred_expiry-token",
        [{"json": {"access_token": "tok-first", "expires_in": 1}, "delay_ms": 50}, {"json": {"access_token": "tok-second", "expires_in": 3600}, "delay_ms": 50}],
    )

    async def main():
        async with harness.AsyncClient(oauth2_config(upstream, "cred_expiry")) as client:
            assert (await client.get("svc", "/s/cred_expiry/x")).status == 200
            await asyncio.sleep(1.2)  # past the 1 s token's expiry
            results = await asyncio.gather(*[client.get("svc", "/s/cred_expiry/x") for _ in range(200)])
            assert [r.status for r in results] == [200] * 200

    asyncio.run(main())
    assert len(upstream.log("cred_expiry-token")) == 2, "one call for the first token, exactly one at expiry"
    auth = authorizations(upstream, "cred_expiry")
    assert auth[0] == "Bearer tok-first" and auth[1:] == ["Bearer tok-second"] * 200


def test_200_concurrent_requests_at_expiry_call_an_async_provider_once(upstream):
    upstream.script("cred_expiry_cb", [{"status": 200}])
    calls = []

    async def provider():
        calls.append(time.monotonic())
        await asyncio.sleep(0.05)  # slow enough that every request arrives while it runs
        return {"token": f"cb-tok-{len(calls)}", "expires_in": 1}

    async def main():
        cfg = callback_config(upstream, bulkhead={"max_concurrency": 1000})
        async with harness.AsyncClient(cfg) as client:
            client.set_token_provider("svc", provider)
            await client.get("svc", "/s/cred_expiry_cb/x")
            await asyncio.sleep(1.2)
            results = await asyncio.gather(*[client.get("svc", "/s/cred_expiry_cb/x") for _ in range(200)])
            assert [r.status for r in results] == [200] * 200

    asyncio.run(main())
    assert len(calls) == 2, f"expected 1 call at expiry (2 in all), got {len(calls)}"
    assert set(authorizations(upstream, "cred_expiry_cb")[1:]) == {"Bearer cb-tok-2"}


# ---- providers written in Python -----------------------------------------------------------


def test_a_sync_provider_runs_off_the_calling_thread_and_its_token_is_sent(upstream):
    upstream.script("cred_sync", [{"status": 200}])
    threads = []

    def provider():
        threads.append(threading.current_thread())
        return {"token": "sync-tok", "expires_in": 3600}

    with harness.Client(callback_config(upstream)) as client:
        client.set_token_provider("svc", provider)
        assert client.get("svc", "/s/cred_sync/x").status == 200
        assert client.get("svc", "/s/cred_sync/x").status == 200
    assert len(threads) == 1, "the token is cached"
    assert threads[0] is not threading.main_thread()
    assert authorizations(upstream, "cred_sync") == ["Bearer sync-tok"] * 2


def test_an_async_provider_runs_on_the_loop_of_set_token_provider(upstream):
    upstream.script("cred_async", [{"status": 200}])
    seen = {}

    async def provider():
        seen["loop"] = asyncio.get_running_loop()
        await asyncio.sleep(0.01)
        return ("async-tok", 3600)  # the tuple form

    async def main():
        async with harness.AsyncClient(callback_config(upstream)) as client:
            client.set_token_provider("svc", provider)
            assert (await client.get("svc", "/s/cred_async/x")).status == 200
            assert seen["loop"] is asyncio.get_running_loop()

    asyncio.run(main())
    assert authorizations(upstream, "cred_async") == ["Bearer async-tok"]


def test_an_async_provider_on_a_sync_client_without_a_loop_runs_under_asyncio_run(upstream):
    upstream.script("cred_async_sync", [{"status": 200}])

    async def provider():
        await asyncio.sleep(0)
        return {"token": "no-loop-tok"}  # no expires_in: it does not expire

    with harness.Client(callback_config(upstream)) as client:
        client.set_token_provider("svc", provider)
        assert client.get("svc", "/s/cred_async_sync/x").status == 200
        (state,) = client.credentials_state()
        assert state["status"] == "valid" and state["expires_at_ms"] is None
    assert authorizations(upstream, "cred_async_sync") == ["Bearer no-loop-tok"]


def test_set_token_provider_refuses_an_unknown_or_non_callback_service_and_a_non_callable(upstream, config):
    with harness.Client(config()) as plain:
        with pytest.raises(harness.ConfigError, match="type: callback"):
            plain.set_token_provider("svc", lambda: ("t", None))
        with pytest.raises(harness.ConfigError, match="unknown service"):
            plain.set_token_provider("nope", lambda: ("t", None))
        with pytest.raises(harness.ConfigError, match="callable"):
            plain.set_token_provider("svc", "not a function")


# ---- failing providers ---------------------------------------------------------------------


def test_a_provider_that_raises_is_an_auth_error_and_the_client_recovers(upstream):
    upstream.script("cred_raise", [{"status": 200}])

    def broken():
        raise RuntimeError("vault is sealed")

    with harness.Client(callback_config(upstream)) as client:
        client.set_token_provider("svc", broken)
        with pytest.raises(harness.AuthError) as info:
            client.get("svc", "/s/cred_raise/x")
        assert "RuntimeError: vault is sealed" in info.value.message
        (state,) = client.credentials_state()
        assert "vault is sealed" in state["last_error"]
        client.set_token_provider("svc", lambda: {"token": "fixed-tok", "expires_in": 3600})
        assert client.get("svc", "/s/cred_raise/x").status == 200
    assert authorizations(upstream, "cred_raise") == ["Bearer fixed-tok"]


def test_an_async_provider_that_raises_is_an_auth_error(upstream):
    upstream.script("cred_araise", [{"status": 200}])

    async def broken():
        await asyncio.sleep(0)
        raise ValueError("no such role")

    async def main():
        async with harness.AsyncClient(callback_config(upstream)) as client:
            client.set_token_provider("svc", broken)
            with pytest.raises(harness.AuthError, match="ValueError: no such role"):
                await client.get("svc", "/s/cred_araise/x")

            async def good():
                return {"token": "good-tok", "expires_in": 60}

            client.set_token_provider("svc", good)
            assert (await client.get("svc", "/s/cred_araise/x")).status == 200

    asyncio.run(main())


@pytest.mark.parametrize(
    "answer, says",
    [
        ("bare-string-secret", "returned str"),
        ({"value": "x"}, 'without "token"'),
        ({"token": 42}, "of type int"),
        ({"token": "shape-tok", "expires_in": "soon"}, "expires_in of type str"),
        (("shape-tok", -5), "expected a positive number of seconds, got -5"),
        (("shape-tok", 0), "expected a positive number of seconds, got 0"),
        (None, "returned NoneType"),
    ],
)
def test_a_bad_answer_shape_is_an_auth_error_naming_what_was_expected(upstream, answer, says):
    with harness.Client(callback_config(upstream)) as client:
        client.set_token_provider("svc", lambda: answer)
        with pytest.raises(harness.AuthError) as info:
            client.get("svc", "/s/cred_shape/x")
    text = f"{info.value.message} {info.value!s} {info.value!r}"
    assert says in text and '{"token": str' in text
    assert "bare-string-secret" not in text and "shape-tok" not in text


@pytest.mark.parametrize("lifetime", [9223372036854775807, 1e19, 1e300, float("inf")])
def test_a_provider_lifetime_past_any_clock_is_held_not_a_crash(upstream, lifetime):
    # Regression: a lifetime of ~9.2e18 s or more panicked the refresh task.
    upstream.script("cred_life", [{"status": 200}])
    with harness.Client(callback_config(upstream)) as client:
        calls = []

        def provider():
            calls.append(1)
            return {"token": "tok-long-lived", "expires_in": lifetime}

        client.set_token_provider("svc", provider)
        for _ in range(3):
            assert client.get("svc", "/s/cred_life/x").status == 200
        assert len(calls) == 1
        assert client.credentials_state()[0]["status"] == "valid"


def test_a_provider_slower_than_the_refresh_timeout_is_an_auth_error(upstream):
    def slow():
        time.sleep(1)
        return ("late-tok", 60)

    with harness.Client(callback_config(upstream, refresh={"timeout_ms": 200})) as client:
        client.set_token_provider("svc", slow)
        start = time.monotonic()
        with pytest.raises(harness.AuthError, match="did not answer within 200 ms"):
            client.get("svc", "/s/cred_slow/x")
        assert time.monotonic() - start < 0.9


# ---- redaction -----------------------------------------------------------------------------

SECRETS = ["sekrit-tok", "client-secret-xyz"]  # every provider token starts with sekrit-tok


def _run_leaky_session(upstream, client, events):
    """Requests that succeed, a 401 refreshed and replayed, and a second 401 echoing the token."""
    client.add_listener(events.append)
    counter = iter(range(1, 100))
    client.set_token_provider("svc", lambda: {"token": f"sekrit-tok-{next(counter)}", "expires_in": 3600})
    upstream.script("cred_leak", [{"status": 200}, {"status": 401}, {"status": 200}, {"status": 401}, {"status": 401, "json": {"message": "token sekrit-tok-3 rejected"}}])
    assert client.get("svc", "/s/cred_leak/x").status == 200
    assert client.get("svc", "/s/cred_leak/x").status == 200  # 401 -> refresh -> replay
    with pytest.raises(harness.AuthError) as info:
        client.get("svc", "/s/cred_leak/x")  # 401 -> refresh -> a second 401
    client.flush()
    return info.value


def _assert_clean(*texts):
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {text[:300]!r}"


def test_no_token_in_python_log_records_events_errors_or_state(upstream, caplog):
    cfg = callback_config(upstream)
    cfg["log"] = {"enabled": True, "sink": "python"}
    cfg["services"]["other"] = {"base_url": upstream.url, "auth": oauth2_config(upstream, "cred_leak")["services"]["svc"]["auth"]}
    events = []
    with caplog.at_level(logging.DEBUG), harness.Client(cfg) as client:
        err = _run_leaky_session(upstream, client, events)
        states = client.credentials_state()
        metrics = client.metrics()
        text_client = f"{client!r} {client!s}"
    sent = authorizations(upstream, "cred_leak")
    assert sent == ["Bearer sekrit-tok-1", "Bearer sekrit-tok-1", "Bearer sekrit-tok-2", "Bearer sekrit-tok-2", "Bearer sekrit-tok-3"], "the tokens were really sent"
    records = [f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records]
    assert any("harness" in r for r in records)
    assert events and any(e.type == "request_finished" for e in events)
    assert {s["service"] for s in states} == {"svc", "other"}
    assert all(set(s) >= {"service", "type", "status", "expires_at_ms", "last_refresh_ms", "last_error", "keys"} for s in states)
    _assert_clean(
        *records,
        *(repr(e) + repr(e.to_dict()) for e in events),
        err.message,
        str(err),
        repr(err),  # (err.body is the downstream's raw answer, as sent: not Harness output)
        repr(states),
        metrics,
        text_client,
    )


def test_no_token_on_stderr_log_lines(upstream, capfd):
    cfg = callback_config(upstream)
    cfg["log"] = {"enabled": True, "sink": "stderr"}
    events = []
    with harness.Client(cfg) as client:
        _run_leaky_session(upstream, client, events)
    err = capfd.readouterr().err
    assert '"service":"svc"' in err, "the stderr sink wrote the request lines"
    _assert_clean(err, *(repr(e.to_dict()) for e in events))


def test_credentials_state_reports_pools_by_name_or_index_never_the_key(upstream):
    cfg = {
        "log": {"enabled": False},
        "services": {
            "llm": {"base_url": upstream.url, "auth": {"type": "header", "header": "x-api-key", "keys": [{"value": "pool-key-AAA", "name": "first"}, {"value": "pool-key-BBB"}]}},
            "orders": {"base_url": upstream.url, "auth": {"type": "bearer", "token": {"value": "static-tok-CCC"}}},
        },
    }
    with harness.Client(cfg) as client:
        states = client.credentials_state()
    assert [s["service"] for s in states] == ["llm", "orders"]
    assert [s["type"] for s in states] == ["header", "bearer"]
    assert len(states[0]["keys"]) == 2 and "first" in repr(states[0]["keys"])
    for secret in ("pool-key-AAA", "pool-key-BBB", "static-tok-CCC"):
        assert secret not in repr(states)
