"""Embeddings and host adapters from Python, against the upstream's simulated providers
(tests/upstream/src/provider.rs, formats chosen by path): `embed` on a route of kind
embeddings (batches, vectors as array('f') in input order, usage and cost), and an in-house
format written in Python (sync and `async def`) on a route that fails over to Gemini.
Mirrors core/tests/adapters.rs."""

import asyncio
import json
from array import array

import pytest

import harness

SECRET = "sk-adapters-secret-5d1e"
GEM_SECRET = "gk-adapters-secret-9b2c"
TEXTS = ["a", "bb", "ccc", "dddd", "eeeee"]
HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def expected(text, dims):
    """The upstream's deterministic vector (tests/upstream/src/formats/embeddings.rs)."""
    return [(len(text) + k * 0.25) / 8 for k in range(dims)]


@pytest.fixture
def sim(upstream, request):
    """Simulated providers named after the test: `sim.set(id, spec)`, `sim.log(id)`, `sim.service(id, auth)`."""
    prefix = request.node.name.replace("[", "-").replace("]", "")[:60]

    class Sim:
        def set(self, pid, spec):
            upstream.provider(f"{prefix}-{pid}", {**spec, "reset": spec.get("reset", True)})

        def log(self, pid):
            return upstream.provider_log(f"{prefix}-{pid}")

        def service(self, pid, auth):
            return {
                "base_url": f"{upstream.url}/llm/{prefix}-{pid}",
                "timeouts": {"response_ms": 3000, "idle_ms": 2000},
                "retry": {"jitter": False, "base_delay_ms": 5, "max_delay_ms": 20},
                "auth": auth,
            }

    return Sim()


BEARER = {"type": "bearer", "token": {"value": SECRET}}


# ---- embeddings ----------------------------------------------------------------------------


def embed_config(sim, route_kind="embeddings", **provider):
    entry = {"id": "oa", "service": "oa", "model": "e", "weight": 1, "max_batch": 2, "price": {"input_per_1k": 0.1, "output_per_1k": 0.0}, **provider}
    route = {"kind": route_kind, "adapter": "openai-compatible", "providers": [entry]}
    return {"client": {"name": "pytest-embed"}, "log": {"enabled": False}, "services": {"oa": sim.service("oa", BEARER)}, "routes": {"embed": route}}


def check_embedding(r, sim):
    assert isinstance(r, harness.EmbedResponse)
    assert (r.count, r.dimensions, r.batches, len(r), len(r.vectors)) == (5, 3, 3, 5, 5)
    for i, t in enumerate(TEXTS):
        v = r.vectors[i]
        assert type(v) is array and v.typecode == "f" and v.itemsize == 4
        assert list(v) == expected(t, 3), (i, list(v))
    assert list(r) == r.vectors and r[4] is r.vectors[4]
    # The flat buffer holds the same floats, little-endian, vector after vector.
    flat = array("f")
    flat.frombytes(r.data)
    assert list(flat) == [x for t in TEXTS for x in expected(t, 3)]
    # ceil(chars / 4) tokens per text, summed over every batch: 1+1+1+1+2, priced per batch.
    assert r.usage is not None and r.usage.prompt_tokens == 6
    assert r.cost == pytest.approx(6 * 0.1 / 1000, abs=1e-12)
    assert (r.route, r.provider, r.model, r.attempts) == ("embed", "oa", "e", 3)
    assert len(r.trace_id) == 32 and r.elapsed_ms > 0
    log = sim.log("oa")
    assert log["count"] == 3
    # The batches go out side by side (in any order), at most 2 inputs each.
    assert sorted(q["body"]["input"] for q in log["requests"]) == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    for q in log["requests"]:
        assert q["body"]["dimensions"] == 3 and q["body"]["model"] == "e" and q["path"].endswith("/v1/embeddings")
        assert q["headers"]["authorization"] == f"Bearer {SECRET}"


def test_embed_batches_inputs_and_returns_float32_arrays_in_input_order(sim):
    # The provider refuses more than 2 inputs per request; the config says so and the call is split.
    sim.set("oa", {"max_batch": 2, "dimensions": 6})
    with harness.Client(embed_config(sim)) as client:
        r = client.embed("embed", TEXTS, 3)
    check_embedding(r, sim)
    # Each vector is its own array: changing one leaves the others and the buffer alone.
    r.vectors[0][0] = 99.0
    assert r.vectors[1][0] == expected("bb", 1)[0] and r.data[:4] != array("f", [99.0]).tobytes()


def test_embed_through_the_async_client(sim):
    sim.set("oa", {"max_batch": 2, "dimensions": 6})

    async def main():
        async with harness.AsyncClient(embed_config(sim)) as client:
            # A tuple of texts is taken too; `dimensions` by keyword.
            return await client.embed("embed", tuple(TEXTS), dimensions=3)

    check_embedding(asyncio.run(main()), sim)


def test_embed_without_dimensions_gets_the_providers_own_length(sim):
    sim.set("oa", {"dimensions": 5})
    with harness.Client(embed_config(sim, max_batch=None)) as client:
        r = client.embed("embed", ["hello", "world!"])
    assert (r.count, r.dimensions, r.batches) == (2, 5, 1)
    assert [list(v) for v in r.vectors] == [expected("hello", 5), expected("world!", 5)]


def test_bad_embed_calls_are_config_errors_naming_the_field(sim):
    sim.set("oa", {})
    with harness.Client(embed_config(sim)) as client:
        for inputs, message in [
            ([], "inputs: expected at least one text to embed"),
            ("abc", "inputs: expected a list of strings, got str"),
            ({"a": 1}, "inputs: expected a list of strings, got dict"),
            (None, "inputs: expected a list of strings, got NoneType"),
            (["ok", 3], "inputs[1]: expected a string, got int"),
            (["ok", ""], "inputs[1]: an empty text cannot be embedded"),
        ]:
            with pytest.raises(harness.ConfigError) as e:
                client.embed("embed", inputs)
            assert e.value.message.startswith(message), (inputs, e.value.message)
        for dims, message in [("3", "dimensions: expected an integer, got str"), (True, "dimensions: expected an integer, got bool"), (0, "dimensions: expected an integer >= 1")]:
            with pytest.raises(harness.ConfigError) as e:
                client.embed("embed", ["x"], dims)
            assert e.value.message.startswith(message), (dims, e.value.message)
        with pytest.raises(harness.ConfigError, match="route: unknown route"):
            client.embed("nope", ["x"])
    assert sim.log("oa")["count"] == 0

    async def main():
        async with harness.AsyncClient(embed_config(sim)) as client:
            with pytest.raises(harness.ConfigError, match="inputs: expected at least one"):
                await client.embed("embed", [])

    asyncio.run(main())


def test_embed_on_a_chat_route_is_a_config_error(sim):
    sim.set("oa", {})
    with harness.Client(embed_config(sim, route_kind="chat", max_batch=None)) as client:
        with pytest.raises(harness.ConfigError) as e:
            client.embed("embed", ["x"])
    assert e.value.message == "routes.embed.kind: embed needs a route of kind embeddings"


def test_no_secret_in_the_embed_answer_or_its_errors(sim):
    sim.set("oa", {"dimensions": 4})
    with harness.Client(embed_config(sim)) as client:
        r = client.embed("embed", ["hello"])
        assert SECRET not in repr(r) and SECRET not in str(r)
        assert "count=1" in repr(r) and "dimensions=4" in repr(r)
        sim.set("oa", {"fail_rate": 1.0, "fail_status": 401, "error_message": "bad key"})
        with pytest.raises(harness.HarnessError) as e:
            client.embed("embed", ["hello"])
    for text in (repr(e.value), str(e.value), e.value.message, repr(e.value.provider_errors)):
        assert SECRET not in text, text


# ---- host adapters -------------------------------------------------------------------------


class InHouse:
    """The in-house model server's format (`/inhouse/generate`), written in Python."""

    def __init__(self):
        self.seen = []

    def build_request(self, request):
        self.seen.append(("build_request", request))
        prompt = "\n".join(m["content"] for m in request["request"]["messages"] if isinstance(m.get("content"), str))
        body = {"prompt": prompt, "stream": request["stream"]}
        if request["request"].get("max_tokens") is not None:
            body["max_new_tokens"] = request["request"]["max_tokens"]
        return {"path": "/inhouse/generate", "body": body, "headers": {"x-tenant": "t1"}}

    def parse_response(self, response):
        self.seen.append(("parse_response", response))
        body = json.loads(response["body"]) if response["body"] else {}
        if response["status"] != 200:
            kind = body.get("failure", {}).get("kind", "busy")
            return {"error": {"code": "overloaded" if kind == "busy" else "invalid_request", "message": kind}}
        tokens = body["tokens"]
        return {
            "content": body["output"]["text"],
            "finish_reason": "length" if body["done_reason"] == "length" else "stop",
            "usage": {"prompt_tokens": tokens["in"], "completion_tokens": tokens["out"]},
        }

    def parse_stream_event(self, event):
        self.seen.append(("parse_stream_event", event))
        data = json.loads(event["data"])
        if "failure" in data:
            return {"error": {"code": "overloaded", "message": data["failure"]["detail"]}}
        if data.get("end"):
            tokens = data["tokens"]
            return {"done": True, "finish_reason": "stop", "usage": {"prompt_tokens": tokens["in"], "completion_tokens": tokens["out"]}}
        return {"content": data["token"]}


class AsyncInHouse:
    """The same format with `async def` methods (they run on the loop `register_adapter` saw)."""

    def __init__(self):
        self.sync = InHouse()
        self.loops = set()

    async def build_request(self, request):
        await asyncio.sleep(0)
        self.loops.add(asyncio.get_running_loop())
        return self.sync.build_request(request)

    async def parse_response(self, response):
        await asyncio.sleep(0)
        return self.sync.parse_response(response)

    async def parse_stream_event(self, event):
        return self.sync.parse_stream_event(event)


class Raises(InHouse):
    def build_request(self, request):
        raise ValueError("bad")


def adapter_config(sim):
    services = {
        "house": sim.service("house", BEARER),
        "gem": sim.service("gem", {"type": "header", "header": "x-goog-api-key", "keys": [{"value": GEM_SECRET}]}),
    }
    price = {"input_per_1k": 1.0, "output_per_1k": 2.0}
    providers = [
        {"id": "house", "service": "house", "model": "house-model", "adapter": "inhouse", "weight": 1, "price": price},
        {"id": "gem", "service": "gem", "model": "gem-model", "adapter": "gemini", "weight": 1, "price": price},
    ]
    route = {"adapter": "openai-compatible", "strategy": "priority", "providers": providers}
    return {"client": {"name": "pytest-adapters"}, "log": {"enabled": False}, "services": services, "routes": {"chat": route}}


def streamed_text(stream):
    text, done = "", None
    for c in stream:
        if c.kind == "delta":
            text += c.content
        elif c.kind == "done":
            done = c
    return text, done


def no_secret_seen(adapter):
    seen = json.dumps(getattr(adapter, "sync", adapter).seen)
    assert SECRET not in seen and GEM_SECRET not in seen


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_python_adapter_reaches_an_in_house_server_streams_and_fails_over(sim, kind):
    sim.set("house", {"content": "from the house model", "prompt_tokens": 7, "completion_tokens": 4})
    sim.set("gem", {"content": "from gemini"})
    adapter = InHouse() if kind == "sync" else AsyncInHouse()
    with harness.Client(adapter_config(sim)) as client:
        # Not registered yet: the provider is refused (never sent to) and the route fails over.
        assert client.chat("chat", HELLO).provider == "gem"
        assert sim.log("house")["count"] == 0
        client.register_adapter("inhouse", adapter)
        r = client.chat("chat", HELLO, max_tokens=16)
        assert (r.provider, r.content, r.finish_reason) == ("house", "from the house model", "stop")
        assert r.usage is not None and (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (7, 4, 11)
        assert r.cost == pytest.approx(7 / 1000 + 8 / 1000, abs=1e-9)
        # The answer is handed on in OpenAI's shape whoever answered.
        assert json.loads(r.raw)["choices"][0]["message"]["content"] == "from the house model"
        sent = sim.log("house")["requests"][0]
        assert sent["path"].endswith("/inhouse/generate")
        assert sent["body"] == {"prompt": "Be brief.\nhi", "stream": False, "max_new_tokens": 16}
        # The service's auth applies to the adapter's request (the upstream logs only known key headers).
        assert sent["headers"]["authorization"] == f"Bearer {SECRET}"
        # Streamed through the adapter.
        text, done = streamed_text(client.chat_stream("chat", HELLO))
        assert text == "from the house model"
        assert done is not None and done.finish_reason == "stop" and done.usage is not None and done.usage.completion_tokens == 4
        assert sim.log("house")["requests"][1]["body"]["stream"] is True
        # The in-house server is busy: the adapter gives the error its code and gemini answers.
        sim.set("house", {"fail_rate": 1.0, "fail_status": 503})
        r = client.chat("chat", HELLO)
        assert (r.provider, r.content) == ("gem", "from gemini")
        assert sim.log("house")["count"] >= 1
        gem = sim.log("gem")["requests"][-1]
        assert gem["path"].endswith("/v1beta/models/gem-model:generateContent") and gem["headers"]["x-goog-api-key"] == GEM_SECRET
    no_secret_seen(adapter)


def test_an_async_adapter_runs_on_the_async_clients_loop(sim):
    sim.set("house", {"content": "async house answer", "prompt_tokens": 3, "completion_tokens": 3})
    sim.set("gem", {})
    adapter = AsyncInHouse()

    async def main():
        async with harness.AsyncClient(adapter_config(sim)) as client:
            client.register_adapter("inhouse", adapter)
            r = await client.chat("chat", HELLO)
            text = ""
            async for c in client.chat_stream("chat", HELLO):
                if c.kind == "delta":
                    text += c.content
            return r, text, asyncio.get_running_loop()

    r, text, loop = asyncio.run(main())
    assert (r.provider, r.content, text) == ("house", "async house answer", "async house answer")
    # The coroutines ran on the caller's loop, not on loops of their own.
    assert adapter.loops == {loop}


def test_a_raising_adapter_is_an_error_naming_it_and_the_step_and_the_route_fails_over(sim):
    sim.set("house", {})
    sim.set("gem", {"content": "from gemini"})
    with harness.Client(adapter_config(sim)) as client:
        client.register_adapter("inhouse", Raises())
        assert client.chat("chat", HELLO).provider == "gem"
        assert sim.log("house")["count"] == 0
        sim.set("gem", {"fail_rate": 1.0, "fail_status": 503})
        with pytest.raises(harness.NoHealthyProviderError) as e:
            client.chat("chat", HELLO)
    err = e.value
    assert "adapter `inhouse` raised in build_request: ValueError: bad" in str(err), str(err)
    assert dict(err.provider_errors)["house"].endswith("adapter `inhouse` raised in build_request: ValueError: bad"), err.provider_errors
    for text in (repr(err), str(err), repr(err.provider_errors)):
        assert SECRET not in text and GEM_SECRET not in text, text


def test_an_async_adapter_that_raises_or_returns_no_json_is_named_too(sim):
    sim.set("house", {})
    sim.set("gem", {"fail_rate": 1.0, "fail_status": 503})

    class AsyncRaises(AsyncInHouse):
        async def build_request(self, request):
            raise KeyError("prompt")

    class NotJson(InHouse):
        def parse_response(self, response):
            return {"content": float("nan")}

    async def main():
        async with harness.AsyncClient(adapter_config(sim)) as client:
            client.register_adapter("inhouse", AsyncRaises())
            with pytest.raises(harness.NoHealthyProviderError) as e1:
                await client.chat("chat", HELLO)
            client.register_adapter("inhouse", NotJson())
            with pytest.raises(harness.NoHealthyProviderError) as e2:
                await client.chat("chat", HELLO)
            return e1.value, e2.value

    e1, e2 = asyncio.run(main())
    assert "adapter `inhouse` raised in build_request: KeyError: 'prompt'" in str(e1), str(e1)
    assert "adapter `inhouse` raised in parse_response: ValueError: Out of range float values are not JSON compliant" in str(e2), str(e2)


def test_register_adapter_refuses_built_in_names_bad_names_and_missing_methods(sim):
    class NoStream:
        def build_request(self, request):
            return {}

        def parse_response(self, response):
            return {}

    with harness.Client(adapter_config(sim)) as client:
        for name in ("anthropic", "openai-compatible", "a b", ""):
            with pytest.raises(harness.ConfigError) as e:
                client.register_adapter(name, InHouse())
            assert e.value.message.startswith("name: a host adapter's name"), e.value.message
        with pytest.raises(harness.ConfigError, match="name: expected a string, got int"):
            client.register_adapter(3, InHouse())  # type: ignore[arg-type]
        with pytest.raises(harness.ConfigError) as e:
            client.register_adapter("inhouse", NoStream())  # type: ignore[arg-type]
        assert e.value.message.startswith("adapter.parse_stream_event: missing"), e.value.message
        with pytest.raises(harness.ConfigError, match="adapter.build_request: missing"):
            client.register_adapter("inhouse", object())  # type: ignore[arg-type]
