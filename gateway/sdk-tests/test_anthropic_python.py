"""The official Anthropic Python SDK pointed at `harness serve` (`/v1/messages`): routes whose
providers are a Gemini (`adapter: gemini`) and an OpenAI-compatible server answer as Claude
would, buffered and streamed, with tool use; errors arrive as the SDK's typed exceptions."""

import anthropic
import pytest

TOOLS = [{
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]},
}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def client(world, key=None, **kw):
    # The SDK appends /v1/messages to the base URL and sends the key as x-api-key.
    return anthropic.Anthropic(base_url=world.base_url.removesuffix("/v1"), api_key=key or world.keys["ann"], timeout=30, **kw)


def test_a_gemini_route_answers_with_text_and_tool_use(world):
    m = client(world).messages.create(model="gem", max_tokens=256, system="Be brief.", tools=TOOLS,
                                      tool_choice={"type": "auto"}, messages=ASK)
    assert m.type == "message" and m.role == "assistant"
    assert m.model == "gemini-x"
    assert m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text", "tool_use"]
    assert m.content[0].text == world.providers["gem"]["content"]
    assert m.content[1].name == "get_weather"
    assert m.content[1].input == {"city": "Paris"}
    assert m.stop_reason == "tool_use"
    # Anthropic counts the cache read apart from the input tokens.
    assert (m.usage.input_tokens, m.usage.output_tokens, m.usage.cache_read_input_tokens) == (20, 9, 10)
    # The SDK's next turn: the tool's result, answered again through the route.
    tool_use = m.content[1]
    follow = client(world).messages.create(model="gem", max_tokens=256, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "18C and sunny"}]},
    ])
    assert follow.stop_reason == "tool_use"
    sent = world.provider_log("gem")["requests"][-1]["body"]
    parts = [p for c in sent["contents"] for p in c["parts"]]
    assert {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}} in parts
    assert any(p.get("functionResponse", {}).get("name") == "get_weather" for p in parts), sent


def test_an_openai_compatible_route_answers_a_forced_tool(world):
    m = client(world).messages.create(model="tools", max_tokens=100, tools=TOOLS,
                                      tool_choice={"type": "tool", "name": "get_weather"}, messages=ASK)
    assert [b.type for b in m.content] == ["tool_use"]
    assert (m.content[0].id, m.content[0].input) == ("call_1", {"city": "Paris", "unit": "c"})
    assert m.stop_reason == "tool_use"
    sent = world.provider_log("tools-a")["requests"][-1]["body"]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["tools"][0]["function"]["parameters"] == TOOLS[0]["input_schema"]


def test_a_plain_text_answer(world):
    m = client(world).messages.create(model="chat", max_tokens=50, messages=[{"role": "user", "content": "Say hello"}])
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == world.providers["chat-a"]["content"]
    assert m.stop_reason == "end_turn"
    assert (m.usage.input_tokens, m.usage.output_tokens) == (12, 8)


def test_streamed_text_and_tool_use_from_a_gemini_route(world):
    with client(world).messages.stream(model="gem", max_tokens=256, tools=TOOLS, messages=ASK) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == world.providers["gem"]["content"]
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[0].text == text
    assert final.content[1].name == "get_weather"
    assert final.content[1].input == {"city": "Paris"}
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens == 9


def test_streamed_tool_use_pieces_from_an_openai_compatible_route(world):
    with client(world).messages.stream(model="tools", max_tokens=100, tools=TOOLS, messages=ASK) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    partial = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert partial == world.providers["tools-a"]["tool_calls"][0]["arguments"]
    assert [(b.type, b.id, b.input) for b in final.content] == [("tool_use", "call_1", {"city": "Paris", "unit": "c"})]
    assert final.stop_reason == "tool_use"


def test_errors_are_the_sdks_typed_exceptions(world):
    with pytest.raises(anthropic.AuthenticationError) as e:
        client(world, key="sk-wrong").messages.create(model="chat", max_tokens=5, messages=ASK)
    assert e.value.status_code == 401
    assert e.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.NotFoundError) as e:
        client(world).messages.create(model="nope", max_tokens=5, messages=ASK)
    assert e.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as e:
        client(world).messages.create(model="chat", max_tokens=5, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}])
    assert "messages[0].content[0].type" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.APIStatusError) as e:
        client(world, max_retries=0).messages.create(model="down", max_tokens=5, messages=ASK)
    assert e.value.status_code == 503
    assert e.value.body["error"]["type"] == "overloaded_error"
    assert len(e.value.body["request_id"]) == 32
    rita = client(world, key=world.keys["rita"], max_retries=0)
    with pytest.raises(anthropic.PermissionDeniedError):
        rita.messages.create(model="gem", max_tokens=5, messages=ASK)
