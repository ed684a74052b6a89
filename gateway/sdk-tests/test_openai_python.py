"""The official OpenAI Python SDK pointed at `harness serve`: chat, streaming, a failover
mid-stream, errors in the OpenAI shape, the model list, embeddings (float and base64) and tool
calls (buffered, streamed, from a Gemini route)."""

import asyncio

import openai
import pytest

MESSAGES = [{"role": "user", "content": "Say hello"}]


def client(world, key=None, **kw):
    return openai.OpenAI(base_url=world.base_url, api_key=key or world.keys["ann"], timeout=30, **kw)


def test_chat_completion_has_content_model_and_usage(world):
    r = client(world).chat.completions.create(model="chat", messages=MESSAGES)
    assert r.object == "chat.completion"
    assert r.choices[0].message.content == world.providers["chat-a"]["content"]
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "model-a"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (12, 8, 20)


def test_route_slash_model_pins_the_model(world):
    r = client(world).chat.completions.create(model="chat/model-b", messages=MESSAGES)
    assert r.choices[0].message.content == world.providers["chat-b"]["content"]
    assert r.model == "model-b"


def test_streamed_deltas_join_to_the_providers_answer(world):
    stream = client(world).chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == world.providers["chat-a"]["content"]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_stream_cut_mid_answer_fails_over_unseen(world):
    cut_before = world.provider_log("relay-a")["count"]
    stream = client(world).chat.completions.create(model="relay", messages=MESSAGES, stream=True)
    # `mid_stream: hold` (the route's default) restarts on provider b before the caller sees a chunk.
    chunks = list(stream)
    assert not any((c.model_extra or {}).get("harness") for c in chunks), "no restart chunk reached the caller"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == world.providers["relay-b"]["content"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert world.provider_log("relay-a")["count"] > cut_before, "provider a was tried first and cut its stream"


def test_async_client_chats_and_streams(world):
    async def main():
        async with openai.AsyncOpenAI(base_url=world.base_url, api_key=world.keys["ann"], timeout=30) as c:
            r = await c.chat.completions.create(model="chat", messages=MESSAGES)
            stream = await c.chat.completions.create(model="chat/model-b", messages=MESSAGES, stream=True)
            text = "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])
            return r, text

    r, text = asyncio.run(main())
    assert r.choices[0].message.content == world.providers["chat-a"]["content"]
    assert text == world.providers["chat-b"]["content"]


def test_a_wrong_key_is_an_authentication_error(world):
    with pytest.raises(openai.AuthenticationError) as e:
        client(world, key="sk-wrong").chat.completions.create(model="chat", messages=MESSAGES)
    assert e.value.status_code == 401
    assert e.value.code == "invalid_api_key"
    assert e.value.type == "invalid_request_error"


def test_every_provider_failing_is_a_503_with_the_harness_kind(world):
    with pytest.raises(openai.InternalServerError) as e:
        client(world, max_retries=0).chat.completions.create(model="down", messages=MESSAGES)
    assert e.value.status_code == 503
    assert e.value.body["harness_kind"] == "NoHealthyProviderError"
    assert e.value.type == "service_unavailable_error"
    assert len(e.value.body["trace_id"]) == 32


def test_a_rate_limited_caller_gets_a_rate_limit_error(world):
    rita = client(world, key=world.keys["rita"], max_retries=0)
    assert rita.chat.completions.create(model="chat", messages=MESSAGES).choices[0].message.content
    with pytest.raises(openai.RateLimitError) as e:
        rita.chat.completions.create(model="chat", messages=MESSAGES)
    assert e.value.status_code == 429
    assert e.value.body["harness_kind"] == "RateLimitedError"
    assert e.value.response.headers.get("retry-after")


def test_models_lists_the_callers_routes_and_models(world):
    ids = [m.id for m in client(world).models.list()]
    assert ids == ["chat", "chat/model-a", "chat/model-b", "down", "down/down-model-a", "down/down-model-b",
                   "emb", "emb/embed-1", "gem", "gem/gemini-x",
                   "relay", "relay/relay-model-a", "relay/relay-model-b", "tools", "tools/tools-model"]
    assert [m.id for m in client(world, key=world.keys["rita"]).models.list()] == ["chat", "chat/model-a", "chat/model-b"]


# ---- embeddings and tools ----

def expected_vector(text, dims):
    """The upstream's deterministic vector: element k is (len(text) + k / 4) / 8."""
    return [(len(text) + k * 0.25) / 8.0 for k in range(dims)]


def test_embeddings_as_floats(world):
    texts = ["hello", "embeddings!"]
    r = client(world).embeddings.create(model="emb", input=texts, encoding_format="float")
    assert r.object == "list"
    assert r.model == "embed-1"
    assert [d.index for d in r.data] == [0, 1]
    for d, t in zip(r.data, texts):
        assert d.embedding == pytest.approx(expected_vector(t, 4))
    assert (r.usage.prompt_tokens, r.usage.total_tokens) == (5, 5)


def test_embeddings_as_base64_decoded_by_the_sdk(world):
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    r = client(world).embeddings.create(model="emb", input="hello", dimensions=3)
    assert len(r.data) == 1
    assert r.data[0].embedding == pytest.approx(expected_vector("hello", 3))
    assert world.provider_log("emb")["requests"][-1]["body"]["dimensions"] == 3
    r = client(world).embeddings.create(model="emb", input=["a", "bb"], encoding_format="base64")
    assert isinstance(r.data[0].embedding, str), "asked for base64 explicitly, the SDK hands it over as sent"


def test_token_array_inputs_are_a_bad_request_naming_input(world):
    with pytest.raises(openai.BadRequestError) as e:
        client(world).embeddings.create(model="emb", input=[[1, 2, 3]])
    assert e.value.status_code == 400
    assert "`input`" in e.value.message and "token arrays" in e.value.message


def test_tool_calls_buffered(world):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    r = client(world).chat.completions.create(model="tools", messages=MESSAGES, tools=tools, tool_choice="required")
    assert r.choices[0].finish_reason == "tool_calls"
    call = r.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "get_weather", '{"city":"Paris","unit":"c"}')
    assert r.choices[0].message.content is None
    assert world.provider_log("tools-a")["requests"][-1]["body"]["tools"] == tools


def test_tool_calls_streamed_join_into_the_call(world):
    stream = client(world).chat.completions.create(model="tools", messages=MESSAGES, stream=True,
                                                   tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    pieces = [tc for c in stream if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert pieces[0].id == "call_1" and pieces[0].function.name == "get_weather"
    assert "".join(p.function.arguments or "" for p in pieces) == '{"city":"Paris","unit":"c"}'
    assert {p.index for p in pieces} == {0}


def test_tool_calls_from_a_gemini_route(world):
    r = client(world).chat.completions.create(model="gem", messages=MESSAGES,
                                              tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    assert r.choices[0].message.content == world.providers["gem"]["content"]
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert r.usage.prompt_tokens_details.cached_tokens == 10
