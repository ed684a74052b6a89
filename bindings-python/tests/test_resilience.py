"""Adaptive resilience through the binding: `breaker_details` (sliding window, ramp),
`bulkhead_limit`, and hedging's metrics, against the real loopback upstream. The
behaviour itself is the core's (and its tests'); these pin what crosses into Python."""

import asyncio
import re
import time

import pytest

import harness

FLAKY = [{"status": 503}, {"status": 200}, {"status": 200}] * 10  # 30% failures, never two in a row
NO_RETRY = {"max_retries": 0}


class Calls:
    """Runs calls on a `Client`, or on an `AsyncClient` through one event loop kept for the test."""

    def __init__(self, client):
        self.client = client
        self.loop = asyncio.new_event_loop() if isinstance(client, harness.AsyncClient) else None

    def __call__(self, method, path, **kw):
        if self.loop is None:
            return self.client.request("svc", method, path, **kw)
        return self.loop.run_until_complete(self.client.request("svc", method, path, **kw))

    def outcome(self, method, path):
        """`200`, or the name of the error the call raised."""
        try:
            return self(method, path).status
        except harness.HarnessError as e:
            return type(e).__name__

    def close(self):
        if self.loop is None:
            self.client.close()
        else:
            self.loop.run_until_complete(self.client.aclose())
            self.loop.close()


@pytest.fixture(params=[harness.Client, harness.AsyncClient], ids=["sync", "async"])
def calls(request):
    opened = []

    def make(cfg):
        c = Calls(request.param(cfg))
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


def test_sliding_window_breaker_opens_on_its_failure_rate_and_details_follow_the_window(upstream, config, calls):
    upstream.script("rs_window", FLAKY)
    breaker = {"mode": "sliding_window", "window": {"type": "count", "size": 10}, "minimum_calls": 10, "failure_rate_threshold": 0.3}
    c = calls(config(retry=NO_RETRY, breaker=breaker))
    details = lambda: c.client.breaker_details("svc", "GET", "/s/rs_window/x")  # noqa: E731
    assert details() == {
        "service": "svc",
        "endpoint": "/s/rs_window/x",
        "method": "GET",
        "state": "closed",
        "phase": "closed",
        "admit_ratio": 1.0,
        "calls": 0,
        "failure_rate": 0.0,
        "slow_call_rate": 0.0,
    }
    outcomes = [c.outcome("GET", "/s/rs_window/x") for _ in range(6)]
    assert outcomes == ["HttpStatusError", 200, 200] * 2
    d = details()
    assert (d["state"], d["phase"], d["calls"]) == ("closed", "closed", 6)
    assert d["failure_rate"] == pytest.approx(2 / 6)
    assert isinstance(d["calls"], int) and isinstance(d["failure_rate"], float)
    outcomes = [c.outcome("GET", "/s/rs_window/x") for _ in range(3)]
    d = details()
    # 3 of 9 is past the 0.3 threshold, but the window needs minimum_calls (10) first.
    assert (outcomes, d["state"], d["calls"]) == (["HttpStatusError", 200, 200], "closed", 9)
    assert d["failure_rate"] == pytest.approx(3 / 9)
    assert c.outcome("GET", "/s/rs_window/x") == "HttpStatusError"  # the 10th: 4 of 10 failed
    d = details()
    assert (d["state"], d["phase"], d["admit_ratio"]) == ("open", "open", 0.0)
    assert c.client.breaker_state("svc", "GET", "/s/rs_window/x") == "open"
    with pytest.raises(harness.CircuitOpenError) as info:
        c("GET", "/s/rs_window/x")
    assert (info.value.service, info.value.attempts) == ("svc", 0)
    assert upstream.stats("rs_window")["requests"] == 10


def test_consecutive_breaker_stays_closed_on_failures_that_never_follow_each_other(upstream, config, calls):
    upstream.script("rs_consecutive", FLAKY)
    c = calls(config(retry=NO_RETRY, breaker={"failure_threshold": 3}))
    outcomes = [c.outcome("GET", "/s/rs_consecutive/x") for _ in range(15)]
    assert outcomes == ["HttpStatusError", 200, 200] * 5
    d = c.client.breaker_details("svc", "GET", "/s/rs_consecutive/x")
    assert (d["state"], d["phase"], d["admit_ratio"]) == ("closed", "closed", 1.0)
    assert upstream.stats("rs_consecutive")["requests"] == 15


def test_half_open_ramp_admits_its_fraction_of_calls(upstream, config, calls):
    upstream.script("rs_ramp", [{"status": 503}, {"status": 200}])
    breaker = {"failure_threshold": 1, "open_ms": 200, "half_open": {"probes": 1, "ramp": [0.5, 1.0], "step_ms": 2000}}
    c = calls(config(retry=NO_RETRY, breaker=breaker))
    assert c.outcome("GET", "/s/rs_ramp/x") == "HttpStatusError"
    assert c.client.breaker_details("svc", "GET", "/s/rs_ramp/x")["state"] == "open"
    time.sleep(0.3)  # past open_ms
    assert c.outcome("GET", "/s/rs_ramp/x") == 200  # the probe
    d = c.client.breaker_details("svc", "GET", "/s/rs_ramp/x")
    assert (d["state"], d["phase"], d["admit_ratio"]) == ("half_open", "ramping", 0.5)
    start = time.monotonic()
    outcomes = [c.outcome("GET", "/s/rs_ramp/x") for _ in range(10)]
    assert time.monotonic() - start < 2.0, "the 10 calls must fit in the ramp's first step"
    assert (outcomes.count(200), outcomes.count("CircuitOpenError")) == (5, 5), outcomes
    assert upstream.stats("rs_ramp")["requests"] == 2 + 5


def test_breaker_details_checks_its_arguments(config, calls):
    c = calls(config())
    with pytest.raises(harness.ConfigError, match="^service:"):
        c.client.breaker_details(1, "GET", "/x")
    with pytest.raises(harness.ConfigError, match="^endpoint:"):
        c.client.breaker_details("svc", "GET", "/x", endpoint=b"/x")
    d = c.client.breaker_details("svc", "get", "/orders/42", endpoint="/orders/{id}")
    assert (d["endpoint"], d["method"], d["state"]) == ("/orders/{id}", "GET", "closed")


def test_bulkhead_limit_fixed_adaptive_and_unknown_service(upstream, calls):
    services = {
        "fixed": {"base_url": upstream.url, "bulkhead": {"max_concurrency": 7}},
        "adaptive": {"base_url": upstream.url, "bulkhead": {"adaptive": {"algorithm": "vegas", "initial": 20}}},
    }
    c = calls({"log": {"enabled": False}, "services": services})
    assert c.client.bulkhead_limit("fixed") == 7
    assert c.client.bulkhead_limit("adaptive") == 20  # before any traffic
    with pytest.raises(harness.ConfigError, match="^service: unknown service") as info:
        c.client.bulkhead_limit("nope")
    assert isinstance(info.value, harness.HarnessError)
    with pytest.raises(harness.ConfigError, match="^service:"):
        c.client.bulkhead_limit(None)
    assert re.search(r'^harness_bulkhead_limit\{service="fixed"\} 7$', c.client.metrics(), re.M)


def _counter(metrics: str, name: str, service: str) -> float:
    m = re.search(rf'^{name}\{{service="{service}"\}} (\S+)$', metrics, re.M)
    return float(m.group(1)) if m else 0.0


def test_hedged_gets_reach_the_upstream_twice_and_a_plain_post_never(upstream, config):
    upstream.script("rs_hedge", [{"status": 200, "delay_ms": 200}])
    upstream.script("rs_hedge_post", [{"status": 200, "delay_ms": 200}])
    cfg = config(retry=NO_RETRY, hedge={"after_ms": 20, "budget_ratio": 1.0})

    async def go():
        async with harness.AsyncClient(cfg) as a:
            for _ in range(5):  # 25 GETs, 5 at a time: each deposits budget, hedges spend it
                await asyncio.gather(*(a.get("svc", "/s/rs_hedge/x") for _ in range(5)))
            await asyncio.gather(*(a.post("svc", "/s/rs_hedge_post/x", json={"n": i}) for i in range(5)))
            return a.metrics()

    metrics = asyncio.run(go())
    assert _counter(metrics, "harness_hedges_sent_total", "svc") > 0, metrics
    # A sample only once a hedge won (rare here: the first attempt's answer is due first).
    assert _counter(metrics, "harness_hedges_won_total", "svc") <= _counter(metrics, "harness_hedges_sent_total", "svc")
    assert upstream.stats("rs_hedge")["requests"] > 25
    assert upstream.stats("rs_hedge_post")["requests"] == 5, "a POST without an idempotency key is never hedged"

    with harness.Client(cfg) as c:  # the sync client: the same, one at a time
        upstream.script("rs_hedge_sync", [{"status": 200, "delay_ms": 200}])
        for _ in range(3):
            assert c.get("svc", "/s/rs_hedge_sync/x").status == 200
        assert _counter(c.metrics(), "harness_hedges_sent_total", "svc") > 0
        assert upstream.stats("rs_hedge_sync")["requests"] > 3
