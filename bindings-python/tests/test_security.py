"""Hostile input and hostile upstreams, as seen from Python: JSON bodies exactly as
json.dumps writes them, lone surrogates, nesting limits, the new error kinds, and the
peak memory of a large body."""

import asyncio
import collections
import enum
import json
import subprocess
import sys
import textwrap
import time

import pytest

import harness

LONE = "\ud800"


def sent(upstream, name):
    return [r["body"] for r in upstream.log(name)]


def nested(depth, inner=0):
    v = inner
    for _ in range(depth):
        v = [v]
    return v


def post_both(config, **kwargs):
    """The outcome of the same POST with the sync and the async client."""
    out = []
    with harness.Client(config()) as c:
        try:
            out.append(c.post("svc", "/bench", **kwargs))
        except harness.HarnessError as e:
            out.append(e)

    async def go():
        async with harness.AsyncClient(config()) as a:
            try:
                return await a.post("svc", "/bench", **kwargs)
            except harness.HarnessError as e:
                return e

    out.append(asyncio.run(go()))
    return out


# ---- JSON bodies as json.dumps writes them -------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


class Loud(float):
    def __repr__(self):
        return "LOUD"


def test_json_body_is_byte_for_byte_what_json_dumps_writes(upstream, config):
    value = {
        "z": 1,
        "a": [0.1, 1e16, 1e-07, -0.0, 2.5, 1e300, Loud(1.5)],
        "big": [2**63 - 1, -(2**63), 2**64, 10**30, -(10**30)],
        "keys": {1: "int", 2.5: "float", False: "f", None: "n", "s": "str", 2**70: "big"},
        "enum": Color.RED,
        "sub": Name("named"),
        "tuple": (1, "two", None, False),
        "ordered": collections.OrderedDict([("y", 1), ("x", 2)]),
        "text": 'quote " backslash \\ nl \n cr \r tab \t bs \b ff \f ctl \x01 \x1f del \x7f é \u2028 😀',
    }
    upstream.script("dumps", [{"status": 200}])
    with harness.Client(config()) as c:
        c.post("svc", "/s/dumps/x", json=value)
    [body] = sent(upstream, "dumps")
    assert body == json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def test_key_order_is_kept(upstream, config):
    upstream.script("order", [{"status": 200, "times": 2}])
    with harness.Client(config()) as c:
        c.post("svc", "/s/order/x", json={"z": 1, "a": 2, "m": {"b": 1, "a": 0}})

    async def go():
        async with harness.AsyncClient(config()) as a:
            await a.post("svc", "/s/order/x", json={"z": 1, "a": 2})

    asyncio.run(go())
    assert sent(upstream, "order") == ['{"z":1,"a":2,"m":{"b":1,"a":0}}', '{"z":1,"a":2}']


def test_big_integers_are_sent_exactly(upstream, config):
    upstream.script("bigint", [{"status": 200}])
    with harness.Client(config()) as c:
        c.post("svc", "/s/bigint/x", json={"a": 2**64, "b": 10**30, "c": [-(2**64) - 1]})
    assert sent(upstream, "bigint") == ['{"a":18446744073709551616,"b":1000000000000000000000000000000,"c":[-18446744073709551617]}']


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_config_errors(upstream, config, bad):
    upstream.script("nan", [{"status": 200}])
    for value in (bad, {"a": [1, bad]}, {bad: 1}):
        for e in post_both(config, json=value):
            assert isinstance(e, harness.ConfigError), e
            assert e.message.startswith("json: ") and "is not a JSON number" in e.message, e.message
    assert upstream.log("nan") == []


def test_error_names_where_the_bad_value_is(config):
    e = post_both(config, json={"items": [{"ok": 1}, {"price": float("nan")}]})[0]
    assert str(e).startswith("json: nan is not a JSON number") and "json.items[1].price" in str(e), str(e)


@pytest.mark.parametrize(
    "bad, named",
    [({1, 2}, "set"), (frozenset([1]), "frozenset"), (b"bytes", "bytes"), (object(), "object"), (1j, "complex"), ({(1, 2): "v"}, "tuple")],
)
def test_values_json_dumps_refuses_are_config_errors(config, bad, named):
    with pytest.raises(TypeError):
        json.dumps(bad)
    for e in post_both(config, json={"a": bad}):
        assert isinstance(e, harness.ConfigError), e
        assert e.message.startswith("json: "), e.message
        assert f"of type {named} " in e.message or f"not {named} " in e.message, e.message


def test_integer_past_pythons_digit_limit_is_a_config_error(config):
    if not hasattr(sys, "get_int_max_str_digits"):
        pytest.skip("no integer digit limit before Python 3.11")
    huge = 10 ** (sys.get_int_max_str_digits() + 1)
    with pytest.raises(ValueError):
        json.dumps(huge)
    for e in post_both(config, json=[huge]):
        assert isinstance(e, harness.ConfigError) and e.message.startswith("json: "), e


# ---- lone surrogates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, field",
    [
        (("svc" + LONE, "POST", "/x"), {}, "service"),
        (("svc", "PO" + LONE, "/x"), {}, "method"),
        (("svc", "POST", "/x" + LONE), {}, "path"),
        (("svc", "POST", "/x"), {"endpoint": "/e" + LONE}, "endpoint"),
        (("svc", "POST", "/x"), {"headers": {"x-a" + LONE: "v"}}, "headers"),
        (("svc", "POST", "/x"), {"headers": {"x-a": "v" + LONE}}, "headers.x-a"),
        (("svc", "POST", "/x"), {"headers": [("x-a", "v" + LONE)]}, "headers.x-a"),
        (("svc", "POST", "/x"), {"params": {"q": "v" + LONE}}, "params.q"),
        (("svc", "POST", "/x"), {"params": {"q": ["ok", LONE]}}, "params.q"),
        (("svc", "POST", "/x"), {"idempotency_key": "k" + LONE}, "idempotency_key"),
        (("svc", "POST", "/x"), {"traceparent": LONE}, "traceparent"),
        (("svc", "POST", "/x"), {"principal": "u" + LONE}, "principal"),
        (("svc", "POST", "/x"), {"json": {"a": "v" + LONE}}, "json"),
        (("svc", "POST", "/x"), {"json": {"k" + LONE: 1}}, "json"),
        (("svc", "POST", "/x"), {"json": ["\udc00"]}, "json"),
        (("svc", "POST", "/x"), {"content": "text" + LONE}, "content"),
    ],
)
def test_lone_surrogate_is_a_config_error_naming_the_argument(upstream, config, args, kwargs, field):
    def check(e):
        assert isinstance(e, harness.ConfigError), repr(e)
        assert e.message.startswith(field + ": ") and "lone surrogate" in e.message, e.message

    with harness.Client(config()) as c:
        with pytest.raises(harness.HarnessError) as info:
            c.request(*args, **kwargs)
        check(info.value)

    async def go():
        async with harness.AsyncClient(config()) as a:
            with pytest.raises(harness.HarnessError) as info:
                await a.request(*args, **kwargs)
            return info.value

    check(asyncio.run(go()))


def test_paired_surrogates_and_non_ascii_text_are_fine(upstream, config):
    upstream.script("astral", [{"status": 200}])
    with harness.Client(config()) as c:
        c.post("svc", "/s/astral/x", json={"emoji": "😀", "é": "ü"})
    assert json.loads(sent(upstream, "astral")[0]) == {"emoji": "😀", "é": "ü"}


# ---- nesting -------------------------------------------------------------------------------


def test_json_nested_to_the_limit_is_sent(upstream, config):
    upstream.script("deep512", [{"status": 200}])
    with harness.Client(config()) as c:
        assert c.post("svc", "/s/deep512/x", json=nested(512)).status == 200
    assert sent(upstream, "deep512") == ["[" * 512 + "0" + "]" * 512]


@pytest.mark.parametrize("depth", [513, 20_000])
def test_json_nested_past_the_limit_is_a_config_error_not_a_crash(config, depth):
    for value in (nested(depth), nested(depth - 1, {"a": 1})):
        start = time.perf_counter()
        for e in post_both(config, json=value):
            assert isinstance(e, harness.ConfigError), e
            assert e.message == "json: nested deeper than 512 levels", e.message
        assert time.perf_counter() - start < 1


def test_self_referencing_json_is_a_config_error(config):
    loop_list: list = []
    loop_list.append(loop_list)
    loop_dict: dict = {}
    loop_dict["me"] = loop_dict
    for value in (loop_list, loop_dict):
        for e in post_both(config, json=value):
            assert isinstance(e, harness.ConfigError) and "nested deeper than 512" in e.message, e


def test_config_dict_nested_100k_deep_is_a_config_error_at_once(upstream):
    deep: dict = {}
    cur = deep
    for _ in range(100_000):
        cur["k"] = {}
        cur = cur["k"]
    cfg = {"services": {"svc": {"base_url": upstream.url, "deep": deep}}}
    for make in (harness.Client, harness.AsyncClient):
        start = time.perf_counter()
        with pytest.raises(harness.ConfigError, match="config: nested deeper than 512 levels"):
            make(cfg)
        assert time.perf_counter() - start < 1


@pytest.mark.parametrize("name, text", [("deep.yaml", "a: " + "[" * 100_000), ("deep.json", '{"a":' + "[" * 100_000)])
def test_config_file_nested_100k_deep_is_a_config_error_at_once(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(harness.ConfigError, match="nested deeper than 512 levels"):
        harness.Client(path)
    assert time.perf_counter() - start < 1


def test_config_dict_values_follow_the_same_rules(upstream):
    base = {"base_url": upstream.url}
    with pytest.raises(harness.ConfigError) as info:
        harness.Client({"services": {"svc": {**base, "retry": {"budget_ratio": float("nan")}}}})
    assert str(info.value).startswith("config: nan is not a JSON number") and "services.svc.retry.budget_ratio" in str(info.value)
    with pytest.raises(harness.ConfigError) as info:
        harness.Client({"services": {"svc": {**base, "headers": {"x-a": object()}}}})
    assert "object of type object" in str(info.value) and "services.svc.headers.x-a" in str(info.value)
    with pytest.raises(harness.ConfigError, match="lone surrogate"):
        harness.Client({"services": {"svc": {"base_url": upstream.url + LONE}}})
    # Mappings other than dict, and tuples, are still plain structures.
    cfg = collections.OrderedDict(log={"enabled": False}, services={"svc": {**base, "retry": collections.OrderedDict(max_retries=0)}})
    with harness.Client(cfg) as c:
        assert c.get("svc", "/bench").status == 200


# ---- the new error kinds -------------------------------------------------------------------


def test_protocol_and_too_large_errors_are_harness_errors(upstream, config):
    assert issubclass(harness.ProtocolError, harness.HarnessError)
    assert issubclass(harness.ResponseTooLargeError, harness.HarnessError)
    upstream.script("notHttp", [{"raw": "SSH-2.0-OpenSSH_9.6\r\n\r\n"}])
    upstream.script("tooBig", [{"body_bytes": 4096}])
    with harness.Client(config(limits={"max_response_bytes": 1024}, retry={"max_retries": 0})) as c:
        with pytest.raises(harness.ProtocolError) as info:
            c.get("svc", "/s/notHttp/x")
        assert info.value.kind == "ProtocolError" and info.value.attempts == 1
        with pytest.raises(harness.ResponseTooLargeError) as info:
            c.get("svc", "/s/tooBig/x")
        assert info.value.kind == "ResponseTooLargeError" and "max_response_bytes" in str(info.value)


# ---- peak memory of a large body -----------------------------------------------------------

BIG = 256 << 20
SLACK = 48 << 20

_RSS_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    import harness

    url, mode, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = {
        "log": {"enabled": False},
        "services": {"svc": {
            "base_url": url,
            "limits": {"max_response_bytes": 300 << 20},
            "timeouts": {"response_ms": 60000, "request_ms": 120000},
        }},
    }

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    def report(r, before):
        grown = peak() - before
        ok = len(r.content) == size and r.content[:1] == b"x" and r.content[-1:] == b"x" and type(r.content) is bytes
        print(json.dumps({"grown": grown, "ok": ok}))

    if mode == "sync":
        with harness.Client(cfg) as c:
            c.get("svc", "/bench")  # the runtime, the pool and the first allocations
            before = peak()
            report(c.get("svc", "/s/bigbody/x"), before)
    else:
        async def main():
            async with harness.AsyncClient(cfg) as c:
                await c.get("svc", "/bench")
                before = peak()
                report(await c.get("svc", "/s/bigbody/x"), before)
        asyncio.run(main())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB on Linux")
@pytest.mark.parametrize("mode, chunked", [("sync", False), ("async", False), ("sync", True)])
def test_a_body_of_n_bytes_costs_at_most_n_plus_a_constant_in_peak_rss(upstream, mode, chunked):
    upstream.script("bigbody", [{"body_bytes": BIG, "chunked": chunked}])
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, upstream.url, mode, str(BIG)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert result["grown"] <= BIG + SLACK, f"peak RSS grew {result['grown'] >> 20} MiB for a {BIG >> 20} MiB body"
