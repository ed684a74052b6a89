"""Mock mode from host code (`client.mock`, `clear_mocks`) and fault injection from config,
through the real runtime: mocks need no upstream; faults meet the real loopback upstream."""

import asyncio
import time

import pytest

import harness

# Port 9 (discard) on loopback: nothing listens, so a request that reaches the network fails fast.
NOWHERE = "http://127.0.0.1:9"


def offline(**svc):
    """A config whose only service, `orders`, points nowhere."""
    return {"client": {"name": "mocks"}, "log": {"enabled": False}, "services": {"orders": {"base_url": NOWHERE, **svc}}}


def test_mock_answers_with_the_captured_id_latest_rule_first_until_cleared():
    with harness.Client(offline(retry={"max_retries": 0})) as c:
        c.mock("orders", "GET", "/orders/{id}", json={"id": "{id}", "state": "paid", "n": [1, None]})
        r = c.get("orders", "/orders/42")
        assert (r.status, r.attempts, r.json()) == (200, 1, {"id": "42", "state": "paid", "n": [1, None]})
        assert r.headers["content-type"] == "application/json"

        # A later, more specific rule wins; the earlier one still answers the rest.
        c.mock("orders", "GET", "/orders/7", status=404, body="order {id} gone", headers={"x-mock": "yes"})
        with pytest.raises(harness.HttpStatusError) as e:
            c.get("orders", "/orders/7")
        assert e.value.status == 404 and e.value.body == b"order {id} gone"
        assert c.get("orders", "/orders/8").json()["id"] == "8"

        # Any method (`*`), a text body with a capture, the answer's headers.
        c.mock("orders", "*", "/notes/{id}", status=201, body="note {id}", headers=[("x-mock", "1"), ("x-mock", "2")])
        r = c.post("orders", "/notes/n1", json={"text": "hi"})
        assert (r.status, r.text) == (201, "note n1")

        with pytest.raises(harness.ConfigError) as e:
            c.delete("orders", "/orders/42")
        assert "DELETE /orders/42" in e.value.message and "orders" in e.value.message

        c.clear_mocks("orders")
        with pytest.raises(harness.ConnectError):
            c.get("orders", "/orders/42")


def test_mocks_outlive_a_reload_and_clear_mocks_without_a_service_clears_all():
    cfg = offline(retry={"max_retries": 0})
    cfg["services"]["users"] = {"base_url": NOWHERE}
    with harness.Client(cfg) as c:
        c.mock("orders", "GET", "/orders/{id}", json={"id": "{id}"})
        c.mock("users", "", "*", json={"user": True})
        c.reload({**cfg, "client": {"name": "mocks-reloaded"}})
        assert c.get("orders", "/orders/1").json() == {"id": "1"}
        assert c.post("users", "/anything/at/all").json() == {"user": True}
        c.clear_mocks()
        with pytest.raises(harness.ConnectError):
            c.get("orders", "/orders/1")


def test_async_client_mock_is_a_plain_method_and_events_and_metrics_still_run():
    async def go():
        events = []
        async with harness.AsyncClient(offline()) as a:
            a.add_listener(events.append)
            assert a.mock("orders", "GET", "/orders/{id}", json={"id": "{id}"}) is None
            r = await a.get("orders", "/orders/5")
            with pytest.raises(harness.ConfigError, match="GET /missing"):
                await a.get("orders", "/missing")
            a.flush()
            assert a.clear_mocks("orders") is None
            return r, events, a.metrics()

    r, events, metrics = asyncio.run(go())
    assert r.json() == {"id": "5"}
    finished = [e for e in events if e.type == "request_finished"]
    assert [(e.service, e.status) for e in finished][0] == ("orders", 200)
    assert finished[1].error_kind == "ConfigError"
    assert 'service="orders"' in metrics and "harness_requests_total" in metrics


def test_a_mock_slower_than_the_response_timeout_is_retried_then_times_out():
    cfg = offline(timeouts={"response_ms": 50}, retry={"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": False})
    with harness.Client(cfg) as c:
        c.mock("orders", "GET", "/slow", json={"late": True}, latency_ms=400)
        started = time.monotonic()
        with pytest.raises(harness.TimeoutError) as e:
            c.get("orders", "/slow")
        assert (e.value.phase, e.value.attempts) == ("response", 3)
        # Three 50 ms attempts, not three 400 ms sleeps (generous: a busy 2-core machine).
        assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "args, kwargs, field",
    [
        (("nope", "GET", "/x"), {}, "mock: unknown service `nope`"),
        (("orders", "GET", "orders"), {}, "mock.match.path"),
        (("orders", "G ET", "/x"), {}, "mock.match.method"),
        (("orders", "GET", "/x"), {"status": 99}, "mock.status"),
        (("orders", "GET", "/x"), {"status": 70000}, "mock.status"),
        (("orders", "GET", "/x"), {"status": "200"}, "mock.status: expected an integer, got str"),
        (("orders", "GET", "/x"), {"status": True}, "mock.status: expected an integer, got bool"),
        (("orders", "GET", "/x"), {"latency_ms": -1}, "mock.latency_ms"),
        (("orders", "GET", "/x"), {"latency_ms": 600_001}, "mock.latency_ms"),
        (("orders", "GET", "/x"), {"json": {"a": 1}, "body": "b"}, "mock: give `json` or `body`, not both"),
        (("orders", "GET", "/x"), {"json": {"a": [float("nan")]}}, "mock.json"),
        (("orders", "GET", "/x"), {"json": {1, 2}}, "mock.json"),
        (("orders", "GET", "/x"), {"body": b"bytes"}, "mock.body: expected a string"),
        (("orders", "GET", "/x"), {"headers": {"bad header": "v"}}, "mock.headers.bad header"),
        (("orders", "GET", "/x"), {"headers": {"x": 1}}, "mock.headers.x: expected a string"),
        ((1, "GET", "/x"), {}, "service: expected a string"),
        (("orders", "GET", "/\ud800"), {}, "path"),
    ],
)
def test_bad_mock_input_is_a_config_error_naming_the_field(args, kwargs, field):
    with harness.Client(offline(retry={"max_retries": 0})) as c:
        with pytest.raises(harness.ConfigError) as e:
            c.mock(*args, **kwargs)
        assert e.value.message.startswith(field) or field in e.value.message, e.value.message
        # Nothing was installed: the service still reaches for the network.
        with pytest.raises(harness.ConnectError):
            c.get("orders", "/x")


def test_clear_mocks_rejects_a_non_string_service():
    with harness.Client(offline()) as c:
        with pytest.raises(harness.ConfigError, match="service: expected a string"):
            c.clear_mocks(3)


def test_an_injected_503_is_an_http_status_error_marked_in_the_record_and_counted(upstream):
    cfg = {
        "client": {"name": "faults"},
        "log": {"enabled": False},
        "faults": {"enabled": True, "seed": 1, "rules": [{"service": "svc", "rate": 1.0, "fault": "status", "status": 503}]},
        "services": {"svc": {"base_url": upstream.url, "retry": {"max_retries": 1, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": False}}},
    }
    upstream.script("faulted", [{"status": 200, "times": 10}])
    events = []
    with harness.Client(cfg) as c:
        c.add_listener(events.append)
        with pytest.raises(harness.HttpStatusError) as e:
            c.get("svc", "/s/faulted/x")
        assert (e.value.status, e.value.code, e.value.attempts) == (503, "injected_fault", 2)
        c.flush()
        metrics = c.metrics()
    finished = [e.to_dict() for e in events if e.type == "request_finished"]
    assert len(finished) == 1 and finished[0]["fault"] == "status" and finished[0]["status"] == 503
    assert 'harness_faults_injected_total{service="svc",fault="status"} 2' in metrics
    assert upstream.log("faulted") == []  # injected at the transport: nothing reached the upstream


def test_records_without_a_fault_have_none(upstream, config):
    upstream.script("unfaulted", [{"status": 200}])
    events = []
    with harness.Client(config()) as c:
        c.add_listener(events.append)
        c.get("svc", "/s/unfaulted/x")
        c.flush()
    (finished,) = [e for e in events if e.type == "request_finished"]
    assert finished.to_dict().get("fault") is None
