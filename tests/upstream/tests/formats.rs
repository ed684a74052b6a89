//! The simulated providers' wire formats (`src/provider.rs`, `src/formats/`), spoken to
//! with a plain HTTP/1.1 client on a raw socket.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    /// The `data:` payloads of an SSE body, in order.
    fn data(&self) -> Vec<String> {
        self.body.lines().filter_map(|l| l.strip_prefix("data: ")).map(|l| l.trim_end_matches('\r').to_string()).collect()
    }
    /// The `event:` names of an SSE body, in order.
    fn events(&self) -> Vec<String> {
        self.body.lines().filter_map(|l| l.strip_prefix("event: ")).map(str::to_string).collect()
    }
}

/// Sends one request (closing our side after it, so the server closes after answering)
/// and reads the whole answer, un-chunked.
async fn send(addr: std::net::SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").expect("a response head");
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v == "chunked");
    let body = if chunked { unchunk(rest) } else { rest.to_string() };
    Response { status, headers, body }
}

/// Decodes a chunked body (a cut one up to where it stops).
fn unchunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or("");
    }
    out
}

struct Sim {
    up: harness_upstream::Upstream,
}

impl Sim {
    async fn new() -> Sim {
        Sim { up: harness_upstream::start().await.unwrap() }
    }
    async fn provider(&self, name: &str, spec: Value) {
        let r = send(self.up.addr, "POST", &format!("/__admin/provider/{name}"), &[], &spec.to_string()).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    async fn post(&self, path: &str, headers: &[(&str, &str)], body: Value) -> Response {
        send(self.up.addr, "POST", path, headers, &body.to_string()).await
    }
    async fn log(&self, name: &str) -> Value {
        send(self.up.addr, "GET", &format!("/__admin/provider-log/{name}"), &[], "").await.json()
    }
}

const ANTHROPIC: [(&str, &str); 3] = [("x-api-key", "k"), ("anthropic-version", "2023-06-01"), ("content-type", "application/json")];
const GEMINI: [(&str, &str); 1] = [("x-goog-api-key", "g")];
const AZURE: [(&str, &str); 1] = [("api-key", "a")];

fn tools() -> Value {
    json!([{"id": "call_1", "name": "lookup", "arguments": "{\"city\":\"Paris\"}"}])
}

#[tokio::test]
async fn openai_answers_are_unchanged() {
    let sim = Sim::new().await;
    sim.provider("p", json!({"content": "Hi there", "cached_tokens": 2, "finish_reason": "tool_calls", "tool_calls": tools()})).await;
    let body = json!({"model": "m1", "messages": [{"role": "user", "content": "0123456789abcdef"}]});
    let r = sim.post("/llm/p/v1/chat/completions", &[("authorization", "Bearer t")], body.clone()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.json(),
        json!({
            "id": "chatcmpl-p", "object": "chat.completion", "created": 0, "model": "m1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"city\":\"Paris\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6, "prompt_tokens_details": {"cached_tokens": 2}},
        })
    );

    // The stream, byte for byte as before: deltas, the last chunk with usage, [DONE].
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = sim.post("/llm/p/v1/chat/completions", &[], streamed).await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let chunk = |delta: Value, finish: Value, usage: Option<Value>| {
        let mut v = json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 0, "model": "m1",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(u) = usage {
            v["usage"] = u;
        }
        format!("data: {v}\n\n")
    };
    let expected = [
        chunk(json!({"content": "Hi", "role": "assistant"}), Value::Null, None),
        chunk(json!({"content": " there"}), Value::Null, None),
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}), Value::Null, None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}), Value::Null, None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}), Value::Null, None),
        chunk(json!({}), json!("tool_calls"), Some(json!({"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6, "prompt_tokens_details": {"cached_tokens": 2}}))),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    assert_eq!(r.body, expected);

    // Failures as before; error_message replaces the message.
    sim.provider("p", json!({"fail_first": 10, "fail_status": 429, "retry_after": "3"})).await;
    let r = sim.post("/llm/p/v1/chat/completions", &[], body.clone()).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("3"));
    assert_eq!(r.json(), json!({"error": {"code": "status_429", "type": "server_error", "message": "p failed on purpose"}}));
    sim.provider("p", json!({"fail_first": 10, "fail_status": 400, "error_code": "context_length_exceeded", "error_type": "invalid_request_error", "error_message": "too long"})).await;
    let r = sim.post("/llm/p/v1/chat/completions", &[], body.clone()).await;
    assert_eq!(r.json(), json!({"error": {"code": "context_length_exceeded", "type": "invalid_request_error", "message": "too long"}}));

    // A refused prefill, as before.
    sim.provider("p", json!({"accept_prefill": false})).await;
    let prefill = json!({"model": "m1", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Hello"}]});
    let r = sim.post("/llm/p/v1/chat/completions", &[], prefill).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "prefill_unsupported");
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");

    // The log keeps its fields and gains path, format, kind and the known headers.
    let log = sim.log("p").await;
    assert_eq!(log["count"], 5);
    let first = &log["requests"][0];
    assert_eq!(first["n"], 1);
    assert_eq!(first["model"], "m1");
    assert_eq!(first["stream"], false);
    assert_eq!(first["body"], body);
    assert_eq!(first["outcome"], "answer");
    assert!(first["at_ms"].is_f64());
    assert_eq!(first["path"], "/llm/p/v1/chat/completions");
    assert_eq!(first["format"], "openai");
    assert_eq!(first["kind"], "chat");
    assert_eq!(first["headers"], json!({"authorization": "Bearer t"}));
    assert_eq!(log["requests"][2]["outcome"], "fail_429");
    assert_eq!(log["requests"][4]["outcome"], "fail_400");
}

#[tokio::test]
async fn openai_stream_error_at_sends_an_error_event_and_closes() {
    let sim = Sim::new().await;
    sim.provider("p", json!({"content": "a b c", "stream": {"error_at": 1}})).await;
    let r = sim.post("/llm/p/v1/chat/completions", &[], json!({"model": "m", "stream": true, "messages": []})).await;
    let data = r.data();
    assert_eq!(data.len(), 2, "{}", r.body);
    assert_eq!(serde_json::from_str::<Value>(&data[1]).unwrap(), json!({"error": {"message": "Overloaded", "type": "server_error", "code": "overloaded"}}));
}

#[tokio::test]
async fn anthropic_messages_buffered() {
    let sim = Sim::new().await;
    sim.provider("a", json!({"content": "Sure thing", "prompt_tokens": 100, "completion_tokens": 7, "cached_tokens": 60, "finish_reason": "tool_calls", "tool_calls": tools()})).await;
    let body = json!({"model": "claude-x", "max_tokens": 100, "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]});
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({
            "id": "msg_a", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "Sure thing"},
                {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"city": "Paris"}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 0},
        })
    );
    let log = sim.log("a").await;
    let entry = &log["requests"][0];
    assert_eq!(entry["format"], "anthropic");
    assert_eq!(entry["model"], "claude-x");
    assert_eq!(entry["path"], "/llm/a/v1/messages");
    assert_eq!(entry["headers"], json!({"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}));

    // stop and length map to end_turn and max_tokens; a prefill (text blocks) is continued.
    sim.provider("a", json!({"content": "Hello from {name}", "finish_reason": "length"})).await;
    let prefill = json!({"model": "c", "max_tokens": 5, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
    ]});
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, prefill.clone()).await;
    assert_eq!(r.json()["content"], json!([{"type": "text", "text": " from a"}]));
    assert_eq!(r.json()["stop_reason"], "max_tokens");
    assert_eq!(r.json()["usage"]["cache_read_input_tokens"], 0);
    sim.provider("a", json!({"accept_prefill": false})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, prefill).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    assert_eq!(r.json()["type"], "error");
    sim.provider("a", json!({})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, json!({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]})).await;
    assert_eq!(r.json()["stop_reason"], "end_turn");
    assert_eq!(r.json()["content"][0]["text"], "Hello from a");
}

#[tokio::test]
async fn anthropic_messages_stream() {
    let sim = Sim::new().await;
    sim.provider("a", json!({"content": "One two", "prompt_tokens": 10, "cached_tokens": 4, "finish_reason": "tool_calls", "tool_calls": tools()})).await;
    let body = json!({"model": "claude-x", "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(
        r.events(),
        [
            "message_start", "ping",
            "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
            "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
            "message_delta", "message_stop",
        ]
    );
    assert!(!r.body.contains("[DONE]"));
    let data: Vec<Value> = r.data().iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    for (d, e) in data.iter().zip(r.events()) {
        assert_eq!(d["type"], e.as_str());
    }
    let start = &data[0]["message"];
    assert_eq!(start["id"], "msg_a");
    assert_eq!(start["model"], "claude-x");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(start["usage"]["input_tokens"], 6);
    assert_eq!(start["usage"]["output_tokens"], 1);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 4);
    assert_eq!(data[2], json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
    assert_eq!(data[3]["delta"], json!({"type": "text_delta", "text": "One"}));
    assert_eq!(data[4]["delta"], json!({"type": "text_delta", "text": " two"}));
    assert_eq!(data[6], json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {}}}));
    let json_text: String = data[7..9].iter().map(|d| d["delta"]["partial_json"].as_str().unwrap()).collect();
    assert_eq!(data[7]["delta"]["type"], "input_json_delta");
    assert_eq!(json_text, "{\"city\":\"Paris\"}");
    assert_eq!(data[10], json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 2}}));

    // error_at: an overloaded error event before piece 1, then the stream ends.
    sim.provider("a", json!({"content": "One two three", "stream": {"error_at": 1}})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, json!({"model": "c", "max_tokens": 9, "stream": true, "messages": []})).await;
    assert_eq!(r.events(), ["message_start", "ping", "content_block_start", "content_block_delta", "error"]);
    assert_eq!(serde_json::from_str::<Value>(r.data().last().unwrap()).unwrap(), json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));

    // cut_after counts pieces: the head and one word, then the connection closes.
    sim.provider("a", json!({"content": "One two three", "stream": {"cut_after": 1}})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, json!({"model": "c", "max_tokens": 9, "stream": true, "messages": []})).await;
    assert_eq!(r.events(), ["message_start", "ping", "content_block_start", "content_block_delta"]);
}

#[tokio::test]
async fn anthropic_failures_and_refusals() {
    let sim = Sim::new().await;
    sim.provider("a", json!({"fail_first": 10, "fail_status": 529, "retry_after": "2"})).await;
    let body = json!({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]});
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body.clone()).await;
    assert_eq!(r.status, 529);
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(r.json(), json!({"type": "error", "error": {"type": "overloaded_error", "message": "a failed on purpose"}}));
    for (status, kind) in [(429, "rate_limit_error"), (500, "api_error"), (413, "request_too_large"), (404, "not_found_error")] {
        sim.provider("a", json!({"fail_first": 100, "fail_status": status})).await;
        let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body.clone()).await;
        assert_eq!(r.status, status);
        assert_eq!(r.json()["error"]["type"], kind);
    }
    let too_long = "prompt is too long: 250000 tokens > 200000 maximum";
    sim.provider("a", json!({"fail_first": 100, "fail_status": 400, "error_message": too_long})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body.clone()).await;
    assert_eq!(r.json(), json!({"type": "error", "error": {"type": "invalid_request_error", "message": too_long}}));

    // Missing headers and max_tokens are refused before any fault.
    sim.provider("a", json!({"reset": true})).await;
    let r = sim.post("/llm/a/v1/messages", &[("anthropic-version", "2023-06-01")], body.clone()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = sim.post("/llm/a/v1/messages", &[("x-api-key", "k")], body.clone()).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, json!({"model": "c", "messages": []})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json(), json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}));
    let log = sim.log("a").await;
    let outcomes: Vec<&str> = log["requests"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["reject_401", "reject_400", "reject_400"]);

    // blocked: a refusal, 200 with no content.
    sim.provider("a", json!({"blocked": true})).await;
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, body.clone()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["stop_reason"], "refusal");
    assert_eq!(r.json()["content"], json!([]));
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = sim.post("/llm/a/v1/messages", &ANTHROPIC, streamed).await;
    assert_eq!(r.events(), ["message_start", "ping", "message_delta", "message_stop"]);
    assert!(r.body.contains("\"stop_reason\":\"refusal\""));
}

#[tokio::test]
async fn gemini_generate_content() {
    let sim = Sim::new().await;
    sim.provider("g", json!({"content": "Bonjour Paris", "prompt_tokens": 20, "completion_tokens": 3, "cached_tokens": 5, "reasoning_tokens": 8, "finish_reason": "tool_calls", "tool_calls": tools()})).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 10}});
    let r = sim.post("/llm/g/v1beta/models/gemini-2.5-flash:generateContent", &GEMINI, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "Bonjour Paris"},
                {"functionCall": {"name": "lookup", "args": {"city": "Paris"}}},
            ]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 3, "totalTokenCount": 23, "cachedContentTokenCount": 5, "thoughtsTokenCount": 8},
            "modelVersion": "gemini-2.5-flash",
        })
    );
    let log = sim.log("g").await;
    assert_eq!(log["requests"][0]["model"], "gemini-2.5-flash");
    assert_eq!(log["requests"][0]["format"], "gemini");
    assert_eq!(log["requests"][0]["headers"], json!({"x-goog-api-key": "g"}));

    // Streamed: one event per word, the function call whole, the last with finish and usage.
    let path = "/llm/g/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    let r = sim.post(path, &GEMINI, body.clone()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(!r.body.contains("[DONE]"));
    assert!(r.body.contains("}\r\n\r\ndata: "));
    let data: Vec<Value> = r.data().iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(data.len(), 4, "{}", r.body);
    assert_eq!(data[0]["candidates"][0]["content"]["parts"][0]["text"], "Bonjour");
    assert_eq!(data[1]["candidates"][0]["content"]["parts"][0]["text"], " Paris");
    assert_eq!(data[2]["candidates"][0]["content"]["parts"][0], json!({"functionCall": {"name": "lookup", "args": {"city": "Paris"}}}));
    assert!(data[..3].iter().all(|d| d["candidates"][0].get("finishReason").is_none() && d.get("usageMetadata").is_none()));
    assert_eq!(data[3]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(data[3]["usageMetadata"]["totalTokenCount"], 23);
    assert_eq!(sim.log("g").await["requests"][1]["stream"], true);

    // length is MAX_TOKENS; a model prefill is continued.
    sim.provider("g", json!({"content": "Hello from {name}", "finish_reason": "length"})).await;
    let prefill = json!({"contents": [{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [{"text": "Hello"}]}]});
    let r = sim.post("/llm/g/v1beta/models/m:generateContent", &GEMINI, prefill).await;
    assert_eq!(r.json()["candidates"][0]["content"]["parts"], json!([{"text": " from g"}]));
    assert_eq!(r.json()["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert!(r.json()["usageMetadata"].get("cachedContentTokenCount").is_none());

    // error_at: Gemini's error event, then the body ends.
    sim.provider("g", json!({"content": "a b", "stream": {"error_at": 1}})).await;
    let r = sim.post(path, &GEMINI, body.clone()).await;
    let data = r.data();
    assert_eq!(data.len(), 2);
    assert_eq!(serde_json::from_str::<Value>(&data[1]).unwrap(), json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}));
}

#[tokio::test]
async fn gemini_failures_blocked_and_auth() {
    let sim = Sim::new().await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let path = "/llm/g/v1beta/models/gemini-pro:generateContent";
    sim.provider("g", json!({"fail_first": 100, "fail_status": 429, "retry_after": "7"})).await;
    let r = sim.post(path, &GEMINI, body.clone()).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.json(), json!({"error": {"code": 429, "message": "g failed on purpose", "status": "RESOURCE_EXHAUSTED"}}));
    for (status, name) in [(400, "INVALID_ARGUMENT"), (500, "INTERNAL"), (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED"), (404, "NOT_FOUND")] {
        sim.provider("g", json!({"fail_first": 100, "fail_status": status})).await;
        let r = sim.post(path, &GEMINI, body.clone()).await;
        assert_eq!(r.json()["error"]["status"], name);
    }
    sim.provider("g", json!({"fail_first": 100, "fail_status": 400, "error_type": "FAILED_PRECONDITION", "error_message": "no"})).await;
    let r = sim.post(path, &GEMINI, body.clone()).await;
    assert_eq!(r.json(), json!({"error": {"code": 400, "message": "no", "status": "FAILED_PRECONDITION"}}));

    // No key: 403 PERMISSION_DENIED; a key in the query will do.
    sim.provider("g", json!({})).await;
    let r = sim.post(path, &[], body.clone()).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"]["status"], "PERMISSION_DENIED");
    let r = sim.post(&format!("{path}?key=abc"), &[], body.clone()).await;
    assert_eq!(r.status, 200);

    // Blocked: 200, SAFETY, no content; streamed, that one event.
    sim.provider("g", json!({"blocked": true, "prompt_tokens": 9})).await;
    let r = sim.post(path, &GEMINI, body.clone()).await;
    assert_eq!(r.status, 200);
    let j = r.json();
    assert_eq!(j["candidates"][0]["finishReason"], "SAFETY");
    assert!(j["candidates"][0].get("content").is_none());
    assert_eq!(j["candidates"][0]["safetyRatings"][0], json!({"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}));
    assert_eq!(j["usageMetadata"], json!({"promptTokenCount": 9, "totalTokenCount": 9}));
    let r = sim.post("/llm/g/v1beta/models/gemini-pro:streamGenerateContent?alt=sse", &GEMINI, body.clone()).await;
    let data = r.data();
    assert_eq!(data.len(), 1);
    assert_eq!(serde_json::from_str::<Value>(&data[0]).unwrap()["candidates"][0]["finishReason"], "SAFETY");
    let outcomes: Vec<String> = sim.log("g").await["requests"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes[outcomes.len() - 4..], ["reject_403", "answer", "blocked", "blocked"]);
}

#[tokio::test]
async fn azure_openai() {
    let sim = Sim::new().await;
    sim.provider("z", json!({"content": "Hi there", "finish_reason": "tool_calls", "tool_calls": tools()})).await;
    let path = "/llm/z/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21";
    let body = json!({"messages": [{"role": "user", "content": "hello"}]});
    let r = sim.post(path, &AZURE, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["model"], "gpt4o-prod");
    assert_eq!(j["object"], "chat.completion");
    assert_eq!(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup");
    assert_eq!(j["usage"]["completion_tokens"], 2);
    let entry = &sim.log("z").await["requests"][0];
    assert_eq!(entry["format"], "azure");
    assert_eq!(entry["model"], "gpt4o-prod");
    assert_eq!(entry["path"], path);
    assert_eq!(entry["headers"], json!({"api-key": "a"}));

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = sim.post(path, &AZURE, streamed).await;
    let data = r.data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let first: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(first["model"], "gpt4o-prod");
    assert_eq!(first["choices"][0]["delta"]["content"], "Hi");

    // api-version and api-key are required.
    let r = sim.post("/llm/z/openai/deployments/gpt4o-prod/chat/completions", &AZURE, body.clone()).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json(), json!({"error": {"code": "404", "message": "Resource not found"}}));
    let r = sim.post(path, &[], body.clone()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "401");

    // Blocked: Azure's content filter, on Azure and on OpenAI paths.
    sim.provider("z", json!({"blocked": true})).await;
    for p in [path, "/llm/z/v1/chat/completions"] {
        let r = sim.post(p, &AZURE, body.clone()).await;
        assert_eq!(r.status, 400);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "content_filter");
        assert_eq!(e["param"], "prompt");
        assert_eq!(e["status"], 400);
        assert_eq!(e["innererror"]["code"], "ResponsibleAIPolicyViolation");
        assert_eq!(e["innererror"]["content_filter_result"]["hate"], json!({"filtered": true, "severity": "high"}));
    }
}

/// The documented embedding: element k is (len + k/4) / 8.
fn expected_vector(text: &str, d: usize) -> Vec<f32> {
    (0..d).map(|k| (text.chars().count() as f32 + k as f32 * 0.25) / 8.0).collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn decode_base64(s: &str) -> Vec<u8> {
    let value = |c: u8| "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".bytes().position(|a| a == c).unwrap() as u32;
    let clean: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[tokio::test]
async fn embeddings_in_three_shapes() {
    let sim = Sim::new().await;
    sim.provider("e", json!({"max_batch": 3})).await;
    let r = sim.post("/llm/e/v1/embeddings", &[], json!({"model": "text-embedding-3-small", "input": ["hello", "hi", "a longer text"]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["object"], "list");
    assert_eq!(j["model"], "text-embedding-3-small");
    assert_eq!(j["usage"], json!({"prompt_tokens": 2 + 1 + 4, "total_tokens": 7}));
    for (i, t) in ["hello", "hi", "a longer text"].iter().enumerate() {
        assert_eq!(j["data"][i]["object"], "embedding");
        assert_eq!(j["data"][i]["index"], i);
        assert_eq!(floats(&j["data"][i]["embedding"]), expected_vector(t, 4));
    }

    // One string, a dimension, base64 of little-endian f32s.
    let r = sim.post("/llm/e/v1/embeddings", &[], json!({"model": "m", "input": "hello", "dimensions": 3, "encoding_format": "base64"})).await;
    let b64 = r.json()["data"][0]["embedding"].as_str().unwrap().to_string();
    let bytes = decode_base64(&b64);
    let got: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, expected_vector("hello", 3));

    // Over max_batch: 400 too_many_inputs, before any fault.
    let r = sim.post("/llm/e/v1/embeddings", &[], json!({"model": "m", "input": ["a", "b", "c", "d"]})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "too_many_inputs");
    let log = sim.log("e").await;
    let last = &log["requests"][2];
    assert_eq!(last["kind"], "embeddings");
    assert_eq!(last["inputs"], 4);
    assert_eq!(last["outcome"], "reject_400");

    // Faults apply to embeddings too.
    sim.provider("e", json!({"fail_first": 100, "fail_status": 503})).await;
    let r = sim.post("/llm/e/v1/embeddings", &[], json!({"model": "m", "input": "x"})).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["code"], "status_503");

    // Gemini: batch and single, bare values, no usage.
    sim.provider("e", json!({"dimensions": 2, "max_batch": 2})).await;
    let batch = json!({"requests": [
        {"model": "models/text-embedding-004", "content": {"parts": [{"text": "first"}]}},
        {"model": "models/text-embedding-004", "content": {"parts": [{"text": "second one"}]}, "outputDimensionality": 5},
    ]});
    let r = sim.post("/llm/e/v1beta/models/text-embedding-004:batchEmbedContents", &GEMINI, batch).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j.as_object().unwrap().len(), 1);
    assert_eq!(floats(&j["embeddings"][0]["values"]), expected_vector("first", 2));
    assert_eq!(floats(&j["embeddings"][1]["values"]), expected_vector("second one", 5));
    let r = sim.post("/llm/e/v1beta/models/text-embedding-004:embedContent", &GEMINI, json!({"content": {"parts": [{"text": "solo"}]}})).await;
    assert_eq!(floats(&r.json()["embedding"]["values"]), expected_vector("solo", 2));
    let three = json!({"requests": [{"content": {"parts": [{"text": "a"}]}}, {"content": {"parts": [{"text": "b"}]}}, {"content": {"parts": [{"text": "c"}]}}]});
    let r = sim.post("/llm/e/v1beta/models/text-embedding-004:batchEmbedContents", &GEMINI, three).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["status"], "INVALID_ARGUMENT");
    let entry = &sim.log("e").await["requests"][4];
    assert_eq!(entry["model"], "text-embedding-004");
    assert_eq!(entry["format"], "gemini");
    assert_eq!(entry["inputs"], 2);

    // Azure: the deployment is the model.
    let r = sim.post("/llm/e/openai/deployments/emb-dep/embeddings?api-version=2024-10-21", &AZURE, json!({"input": ["x", "yy"]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["model"], "emb-dep");
    assert_eq!(floats(&r.json()["data"][1]["embedding"]), expected_vector("yy", 2));
    assert_eq!(sim.log("e").await["requests"][7]["format"], "azure");
}

#[tokio::test]
async fn inhouse_generate() {
    let sim = Sim::new().await;
    sim.provider("h", json!({"content": "one two three", "prompt_tokens": 5, "tool_calls": tools()})).await;
    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "say three words"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"output": {"text": "one two three"}, "tokens": {"in": 5, "out": 3}, "done_reason": "complete"}));
    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "x", "max_new_tokens": 2})).await;
    assert_eq!(r.json(), json!({"output": {"text": "one two"}, "tokens": {"in": 5, "out": 2}, "done_reason": "length"}));

    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "x", "stream": true})).await;
    let data: Vec<Value> = r.data().iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(data, [json!({"token": "one"}), json!({"token": " two"}), json!({"token": " three"}), json!({"end": true, "tokens": {"in": 5, "out": 3}})]);
    assert_eq!(sim.log("h").await["requests"][2]["format"], "inhouse");

    sim.provider("h", json!({"fail_first": 100, "fail_status": 503, "retry_after": "1"})).await;
    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "x"})).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json(), json!({"failure": {"kind": "busy", "detail": "h failed on purpose"}}));
    sim.provider("h", json!({"fail_first": 100, "fail_status": 422})).await;
    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "x"})).await;
    assert_eq!(r.json()["failure"]["kind"], "bad_input");
    sim.provider("h", json!({"fail_first": 100, "fail_status": 400, "error_code": "too_long", "error_message": "prompt over 4096 tokens"})).await;
    let r = sim.post("/llm/h/inhouse/generate", &[], json!({"prompt": "x"})).await;
    assert_eq!(r.json(), json!({"failure": {"kind": "too_long", "detail": "prompt over 4096 tokens"}}));
}
