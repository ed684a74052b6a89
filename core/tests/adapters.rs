//! Native adapters against the loopback upstream's simulated vendors (`tests/upstream`:
//! Anthropic's Messages API, Gemini, Azure OpenAI, chosen by path): one route, one
//! request shape, any vendor behind it; their errors on the common codes, so failover,
//! `on_error` and breakers work across vendors; structured output checked whoever answers.

use std::sync::Arc;

use harness_core::{ChatChunkKind, ChatRequest, Client, ClientOptions, Config, Event, EventSink};
use parking_lot::Mutex;
use serde_json::{json, Value};

use harness_upstream::merge_json as merge;

struct Sim {
    up: harness_upstream::Upstream,
    http: reqwest::Client,
}

impl Sim {
    async fn start() -> Sim {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Sim { up: harness_upstream::start().await.unwrap(), http: reqwest::Client::new() }
    }

    async fn provider(&self, name: &str, spec: Value) {
        let r = self.http.post(format!("{}/__admin/provider/{name}", self.up.url())).body(spec.to_string()).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }

    async fn log(&self, name: &str) -> Value {
        serde_json::from_slice(&self.http.get(format!("{}/__admin/provider-log/{name}", self.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap()
    }
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.0.lock().push(event.clone());
        Ok(())
    }
}

/// The key header each vendor's service sends (its `auth`).
fn auth_header(adapter: &str) -> &'static str {
    match adapter {
        "anthropic" => "x-api-key",
        "gemini" => "x-goog-api-key",
        "azure-openai" => "api-key",
        _ => "authorization",
    }
}

/// Providers `(id, adapter)`, each on its own service at `/llm/{id}` with its vendor's key header.
fn routed(sim: &Sim, providers: &[(&str, &str)], route: Value) -> (Client, Arc<Events>) {
    let mut services = serde_json::Map::new();
    let mut list = Vec::new();
    for (id, adapter) in providers {
        let auth = if *adapter == "openai-compatible" {
            json!({"type": "bearer", "token": {"value": format!("sk-{id}-secret")}})
        } else {
            json!({"type": "header", "header": auth_header(adapter), "keys": [{"value": format!("sk-{id}-secret")}]})
        };
        services.insert(
            id.to_string(),
            json!({"base_url": format!("{}/llm/{id}", sim.up.url()), "timeouts": {"response_ms": 3000, "idle_ms": 2000}, "retry": {"jitter": false, "base_delay_ms": 5, "max_delay_ms": 20}, "auth": auth}),
        );
        list.push(json!({"id": id, "service": id, "model": format!("{id}-model"), "adapter": adapter, "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 2.0}}));
    }
    let mut r = json!({"adapter": "openai-compatible", "strategy": "priority", "providers": list});
    merge(&mut r, &route);
    let config = Config::from_value(json!({"log": {"enabled": false}, "services": services, "routes": {"chat": r}})).unwrap();
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    (Client::with_options(config, ClientOptions { sinks: vec![sink], jitter_seed: Some(7), ..Default::default() }).unwrap(), events)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]))
}

const WEATHER: &str = r#"{"city":"Paris","unit":"c"}"#;

fn tools_request() -> ChatRequest {
    let mut r = ask("Weather in Paris?");
    r.params.insert("tools".into(), json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]));
    r.params.insert("tool_choice".into(), json!("auto"));
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_vendor_answers_the_same_request_in_its_own_format() {
    let sim = Sim::start().await;
    for (id, adapter) in [("claude", "anthropic"), ("gem", "gemini"), ("az", "azure-openai")] {
        sim.provider(id, json!({"reset": true, "content": "Hello from {name}", "prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 40})).await;
        let (client, _) = routed(&sim, &[(id, adapter)], json!({"max_tokens": 256}));
        let mut req = ask("Say hello.");
        req.params.insert("temperature".into(), json!(0.5));
        req.params.insert("stop".into(), json!(["END"]));
        let a = client.chat("chat", req).await.unwrap_or_else(|e| panic!("{adapter}: {e}"));
        assert_eq!(a.content, format!("Hello from {id}"), "{adapter}");
        assert_eq!(a.finish_reason.as_deref(), Some("stop"), "{adapter}");
        assert_eq!(a.provider.as_deref(), Some(id));
        let u = a.usage.unwrap();
        // Anthropic reports input without the cache read: the prompt is their sum, whatever the vendor.
        assert_eq!((u.prompt_tokens, u.completion_tokens, u.cached_tokens), (100, 10, 40), "{adapter}");
        assert!((a.cost.unwrap() - (0.1 + 0.02)).abs() < 1e-9, "{adapter}: {:?}", a.cost);
        // The answer is handed on in one shape, whoever answered.
        let raw: Value = serde_json::from_slice(&a.raw).unwrap();
        assert_eq!(raw["choices"][0]["message"]["content"], format!("Hello from {id}"), "{adapter}");
        let log = sim.log(id).await;
        let sent = &log["requests"][0];
        let secret = format!("sk-{id}-secret");
        assert_eq!(sent["headers"][auth_header(adapter)], secret, "{adapter}: {sent}");
        let body = &sent["body"];
        match adapter {
            "anthropic" => {
                assert_eq!(sent["path"], "/llm/claude/v1/messages");
                assert_eq!(sent["headers"]["anthropic-version"], "2023-06-01");
                assert_eq!(body["system"], "Be brief.");
                assert_eq!(body["max_tokens"], 256);
                assert_eq!(body["stop_sequences"], json!(["END"]));
                assert_eq!(body["messages"], json!([{"role": "user", "content": "Say hello."}]));
            }
            "gemini" => {
                assert_eq!(sent["path"], "/llm/gem/v1beta/models/gem-model:generateContent");
                assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
                assert_eq!(body["contents"], json!([{"role": "user", "parts": [{"text": "Say hello."}]}]));
                assert_eq!(body["generationConfig"]["temperature"], 0.5);
            }
            _ => {
                assert_eq!(sent["path"], "/llm/az/openai/deployments/az-model/chat/completions?api-version=2024-10-21");
                assert_eq!(body["messages"][1]["content"], "Say hello.");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_come_back_in_one_shape_buffered_and_streamed() {
    let sim = Sim::start().await;
    for (id, adapter) in [("claude", "anthropic"), ("gem", "gemini"), ("az", "azure-openai")] {
        sim.provider(id, json!({"reset": true, "content": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "call_7", "name": "get_weather", "arguments": WEATHER}]})).await;
        let (client, _) = routed(&sim, &[(id, adapter)], json!({}));
        let a = client.chat("chat", tools_request()).await.unwrap_or_else(|e| panic!("{adapter}: {e}"));
        assert_eq!(a.tool_calls.len(), 1, "{adapter}");
        let call = &a.tool_calls[0];
        assert_eq!(call.name, "get_weather");
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args, serde_json::from_str::<Value>(WEATHER).unwrap(), "{adapter}");
        assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"), "{adapter}");
        if adapter != "gemini" {
            assert_eq!(call.id, "call_7", "{adapter}");
        }
        let sent = &sim.log(id).await["requests"][0]["body"];
        match adapter {
            "anthropic" => assert_eq!(sent["tools"][0]["name"], "get_weather"),
            "gemini" => assert_eq!(sent["tools"][0]["functionDeclarations"][0]["name"], "get_weather"),
            _ => assert_eq!(sent["tools"][0]["function"]["name"], "get_weather"),
        }
        // Streamed: tool_call chunks, then `done` with the assembled call.
        let mut s = client.chat_stream("chat", tools_request()).await.unwrap();
        let mut pieces = 0;
        let mut done = None;
        while let Some(c) = s.next().await.unwrap() {
            match c.kind {
                ChatChunkKind::ToolCall => pieces += 1,
                ChatChunkKind::Done => done = Some(c),
                _ => {}
            }
        }
        let done = done.unwrap_or_else(|| panic!("{adapter}: no done"));
        assert!(pieces >= 1, "{adapter}");
        assert_eq!(done.tool_calls.len(), 1, "{adapter}");
        assert_eq!(serde_json::from_str::<Value>(&done.tool_calls[0].arguments).unwrap(), serde_json::from_str::<Value>(WEATHER).unwrap(), "{adapter}");
        assert_eq!(done.finish_reason.as_deref(), Some("tool_calls"), "{adapter}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_speak_each_vendors_events_and_end_with_usage() {
    let sim = Sim::start().await;
    for (id, adapter) in [("claude", "anthropic"), ("gem", "gemini"), ("az", "azure-openai")] {
        sim.provider(id, json!({"reset": true, "content": "one two three four", "prompt_tokens": 12, "completion_tokens": 4})).await;
        let (client, _) = routed(&sim, &[(id, adapter)], json!({}));
        let mut s = client.chat_stream("chat", ask("Count.")).await.unwrap();
        let mut text = String::new();
        let mut done = None;
        while let Some(c) = s.next().await.unwrap_or_else(|e| panic!("{adapter}: {e}")) {
            match c.kind {
                ChatChunkKind::Delta => text.push_str(&c.content),
                ChatChunkKind::Done => done = Some(c),
                _ => {}
            }
        }
        assert_eq!(text, "one two three four", "{adapter}");
        let done = done.unwrap();
        assert_eq!(done.finish_reason.as_deref(), Some("stop"), "{adapter}");
        let u = done.usage.unwrap_or_else(|| panic!("{adapter}: no usage"));
        assert_eq!((u.prompt_tokens, u.completion_tokens), (12, 4), "{adapter}");
        assert!(done.cost.is_some(), "{adapter}");
        let sent = &sim.log(id).await["requests"][0];
        match adapter {
            "anthropic" => assert_eq!(sent["body"]["stream"], true),
            "gemini" => assert_eq!(sent["path"], "/llm/gem/v1beta/models/gem-model:streamGenerateContent?alt=sse"),
            _ => assert_eq!(sent["body"]["stream"], true),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_overload_is_retried_then_fails_over_to_gemini_with_the_common_code() {
    let sim = Sim::start().await;
    sim.provider("claude", json!({"reset": true, "fail_rate": 1.0, "fail_status": 529})).await;
    sim.provider("gem", json!({"reset": true})).await;
    let (client, events) = routed(&sim, &[("claude", "anthropic"), ("gem", "gemini")], json!({"same_provider_retries": 1}));
    let a = client.chat("chat", ask("hi")).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("gem"));
    assert_eq!(a.attempts_by_provider, [("claude".to_string(), 2), ("gem".to_string(), 1)]);
    client.flush();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let failover = events.0.lock().iter().filter(|e| e.kind() == "provider_failover").map(Event::to_value).next().unwrap();
    assert_eq!((failover["from"].as_str(), failover["to"].as_str(), failover["code"].as_str()), (Some("claude"), Some("gem"), Some("overloaded")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_errors_reach_on_error_by_their_common_code() {
    let sim = Sim::start().await;
    // Anthropic's context overflow is a 400 with a message; on_error sends it to the big model.
    sim.provider("claude", json!({"reset": true, "fail_rate": 1.0, "fail_status": 400, "error_message": "prompt is too long: 250000 tokens > 200000 maximum"})).await;
    sim.provider("big", json!({"reset": true})).await;
    let (client, _) = routed(&sim, &[("claude", "anthropic"), ("big", "gemini")], json!({"on_error": {"context_length_exceeded": {"provider": "big"}}}));
    let a = client.chat("chat", ask("a long story")).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("big"));
    // Without the rule, the caller gets the error with the common code and the vendor's words.
    let (plain, _) = client_plain(&sim);
    let e = plain.chat("chat", ask("a long story")).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.code.as_deref()), ("HttpStatusError", Some(400), Some("context_length_exceeded")));
    assert!(e.message.contains("prompt is too long"), "{}", e.message);
    assert!(!e.to_string().contains("sk-claude-secret"));
    // A Gemini safety block is a content_filter error, never an empty answer.
    sim.provider("gem", json!({"reset": true, "blocked": true})).await;
    sim.provider("az", json!({"reset": true})).await;
    let (c2, _) = routed(&sim, &[("gem", "gemini"), ("az", "azure-openai")], json!({}));
    let e = c2.chat("chat", ask("something")).await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("content_filter"), "{e}");
    assert_eq!(sim.log("az").await["count"], 0, "a refusal is not failed over without on_error");
    let (c3, _) = routed(&sim, &[("gem", "gemini"), ("az", "azure-openai")], json!({"on_error": {"content_filter": {"provider": "az"}}}));
    assert_eq!(c3.chat("chat", ask("something")).await.unwrap().provider.as_deref(), Some("az"));
    // Azure's content filter error has its own shape, and the same code.
    sim.provider("az", json!({"reset": true, "blocked": true})).await;
    let (c4, _) = routed(&sim, &[("az", "azure-openai")], json!({}));
    let e = c4.chat("chat", ask("something")).await.unwrap_err();
    assert_eq!((e.status, e.code.as_deref()), (Some(400), Some("content_filter")));
    // A Gemini 429 cools the provider and fails over at once, with the common code.
    sim.provider("gem", json!({"reset": true, "fail_rate": 1.0, "fail_status": 429, "retry_after": "5"})).await;
    sim.provider("az", json!({"reset": true})).await;
    let (c5, events) = routed(&sim, &[("gem", "gemini"), ("az", "azure-openai")], json!({}));
    assert_eq!(c5.chat("chat", ask("x")).await.unwrap().provider.as_deref(), Some("az"));
    c5.flush();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let f = events.0.lock().iter().filter(|e| e.kind() == "provider_failover").map(Event::to_value).next().unwrap();
    assert_eq!(f["code"], "rate_limited");
}

fn client_plain(sim: &Sim) -> (Client, Arc<Events>) {
    routed(sim, &[("claude", "anthropic")], json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_mid_stream_fails_over_unseen_in_hold_mode() {
    let sim = Sim::start().await;
    sim.provider("claude", json!({"reset": true, "content": "alpha beta gamma delta", "stream": {"error_at": 2}})).await;
    sim.provider("gem", json!({"reset": true, "content": "from gemini"})).await;
    let (client, _) = routed(&sim, &[("claude", "anthropic"), ("gem", "gemini")], json!({}));
    let mut s = client.chat_stream("chat", ask("go")).await.unwrap();
    let mut text = String::new();
    let mut kinds = Vec::new();
    while let Some(c) = s.next().await.unwrap() {
        kinds.push(c.kind);
        if c.kind == ChatChunkKind::Delta {
            text.push_str(&c.content);
        }
    }
    assert_eq!(text, "from gemini");
    assert!(!kinds.contains(&ChatChunkKind::Restart));
    // With `mid_stream: error` the caller gets the vendor's failure with the common code.
    let (strict, _) = routed(&sim, &[("claude", "anthropic"), ("gem", "gemini")], json!({"stream": {"mid_stream": "error"}}));
    let mut s = strict.chat_stream("chat", ask("go")).await.unwrap();
    let e = loop {
        match s.next().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended as if it succeeded"),
            Err(e) => break e,
        }
    };
    assert_eq!((e.name(), e.code.as_deref()), ("ProtocolError", Some("overloaded")), "{e}");
}

fn structured(schema: Value) -> ChatRequest {
    let mut r = ask("Give me a person.");
    r.params.insert("response_format".into(), json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}));
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_is_checked_whoever_answers_and_an_invalid_answer_fails_over() {
    let sim = Sim::start().await;
    let schema = json!({"type": "object", "required": ["name", "age"], "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}});
    sim.provider("claude", json!({"reset": true, "content": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "t", "name": "harness_structured_output", "arguments": "{\"name\":\"Ada\",\"age\":36}"}]})).await;
    sim.provider("gem", json!({"reset": true, "content": "{\"name\":\"Bob\",\"age\":\"old\"}"})).await;
    // Anthropic gets the schema as a forced tool and its input is the answer.
    let (c1, _) = routed(&sim, &[("claude", "anthropic")], json!({}));
    let a = c1.chat("chat", structured(schema.clone())).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&a.content).unwrap(), json!({"name": "Ada", "age": 36}));
    assert_eq!((a.finish_reason.as_deref(), a.tool_calls.len()), (Some("stop"), 0));
    let sent = &sim.log("claude").await["requests"][0]["body"];
    assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "harness_structured_output"}));
    assert_eq!(sent["tools"][0]["input_schema"], schema);
    // Gemini answers off the schema: the attempt fails and the route fails over to Anthropic.
    let (c2, _) = routed(&sim, &[("gem", "gemini"), ("claude", "anthropic")], json!({}));
    let a = c2.chat("chat", structured(schema.clone())).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("claude"));
    let gem_sent = &sim.log("gem").await["requests"][0]["body"]["generationConfig"];
    assert_eq!((gem_sent["responseMimeType"].as_str(), &gem_sent["responseJsonSchema"]), (Some("application/json"), &schema));
    // The same when streamed (held: the caller never sees the invalid answer).
    let mut s = c2.chat_stream("chat", structured(schema.clone())).await.unwrap();
    let mut text = String::new();
    while let Some(c) = s.next().await.unwrap() {
        if c.kind == ChatChunkKind::Delta {
            text.push_str(&c.content);
        }
    }
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"name": "Ada", "age": 36}));
    // `on_invalid: error`: a SchemaError naming where, never the values.
    let (c3, _) = routed(&sim, &[("gem", "gemini"), ("claude", "anthropic")], json!({"structured_output": {"on_invalid": "error"}}));
    let e = c3.chat("chat", structured(schema.clone())).await.unwrap_err();
    assert_eq!(e.name(), "SchemaError");
    assert!(e.message.contains("/age") && !e.message.contains("old"), "{}", e.message);
    // Nobody answers valid JSON: no success labelled structured.
    sim.provider("claude", json!({"reset": true, "content": "not json at all"})).await;
    let e = c2.chat("chat", structured(schema)).await.unwrap_err();
    assert_eq!(e.name(), "NoHealthyProviderError", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_format_cannot_carry_is_a_config_error_naming_the_field_and_bad_config_is_refused() {
    let sim = Sim::start().await;
    let (client, _) = routed(&sim, &[("claude", "anthropic")], json!({}));
    let req = ChatRequest::new(json!([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]}]));
    let e = client.chat("chat", req).await.unwrap_err();
    assert_eq!(e.name(), "ConfigError");
    assert!(e.message.starts_with("request.messages[0].content[0].type: anthropic takes text and image_url parts"), "{}", e.message);
    let bad = |provider: Value| {
        let cfg = json!({"services": {"s": {"base_url": "http://127.0.0.1:9"}}, "routes": {"r": {"adapter": "openai-compatible", "providers": [provider]}}});
        Config::from_value(cfg).and_then(|c| Client::new(c).map(|_| ())).unwrap_err().message
    };
    assert!(bad(json!({"id": "a", "service": "s", "model": "m", "weight": 1, "adapter": "anthropik ai"})).starts_with("routes.r.providers[0].adapter: unknown adapter"));
    assert!(bad(json!({"id": "a", "service": "s", "model": "m/../x", "weight": 1, "adapter": "gemini"})).starts_with("routes.r.providers[0].model: a gemini model name"));
    assert!(bad(json!({"id": "a", "service": "s", "model": "m", "weight": 1, "adapter": "azure-openai", "api_version": "x&y=1"})).starts_with("routes.r.providers[0].api_version"));
    let http_route = json!({"services": {"s": {"base_url": "http://127.0.0.1:9"}}, "routes": {"r": {"providers": [{"id": "a", "service": "s", "weight": 1, "adapter": "anthropic"}]}}});
    assert!(Config::from_value(http_route).and_then(|c| Client::new(c).map(|_| ())).unwrap_err().message.contains("needs the route's `adapter: openai-compatible`"));
}

// ---- embeddings ----

/// The upstream's deterministic vector for `text` (see `tests/upstream/src/formats/embeddings.rs`).
fn expected(text: &str, dims: usize) -> Vec<f32> {
    (0..dims).map(|k| (text.chars().count() as f32 + k as f32 * 0.25) / 8.0).collect()
}

fn embed_client(sim: &Sim, providers: &[(&str, &str)], provider_extra: Value) -> Client {
    let mut services = serde_json::Map::new();
    let mut list = Vec::new();
    for (id, adapter) in providers {
        services.insert(
            id.to_string(),
            json!({"base_url": format!("{}/llm/{id}", sim.up.url()), "retry": {"jitter": false, "base_delay_ms": 5}, "auth": {"type": "header", "header": auth_header(adapter), "keys": [{"value": "k"}]}}),
        );
        let mut p = json!({"id": id, "service": id, "model": format!("{id}-embed"), "adapter": adapter, "weight": 1, "price": {"input_per_1k": 0.1, "output_per_1k": 0.0}});
        merge(&mut p, &provider_extra);
        list.push(p);
    }
    let route = json!({"kind": "embeddings", "adapter": "openai-compatible", "strategy": "priority", "providers": list});
    Client::new(Config::from_value(json!({"log": {"enabled": false}, "services": services, "routes": {"embed": route}})).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_come_back_in_order_from_every_format_split_into_batches_and_joined() {
    let sim = Sim::start().await;
    let texts: Vec<String> = ["a", "bb", "ccc", "dddd", "eeeee"].iter().map(|s| s.to_string()).collect();
    for (id, adapter, path) in [
        ("oa", "openai-compatible", "/llm/oa/v1/embeddings"),
        ("az", "azure-openai", "/llm/az/openai/deployments/az-embed/embeddings?api-version=2024-10-21"),
        ("gem", "gemini", "/llm/gem/v1beta/models/gem-embed:batchEmbedContents"),
    ] {
        // The provider refuses more than 2 inputs; the config says so and the call is split.
        sim.provider(id, json!({"reset": true, "max_batch": 2, "dimensions": 6})).await;
        let client = embed_client(&sim, &[(id, adapter)], json!({"max_batch": 2}));
        let mut req = harness_core::EmbedRequest::new(texts.clone());
        req.dimensions = Some(3);
        let r = client.embed("embed", req).await.unwrap_or_else(|e| panic!("{adapter}: {e}"));
        assert_eq!((r.count, r.dimensions, r.batches), (5, 3, 3), "{adapter}");
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(r.vector(i), expected(t, 3).as_slice(), "{adapter} input {i}");
        }
        assert_eq!(r.provider.as_deref(), Some(id));
        let log = sim.log(id).await;
        assert_eq!(log["count"], 3, "{adapter}");
        assert_eq!(log["requests"][0]["path"], path, "{adapter}");
        if adapter == "gemini" {
            assert_eq!(log["requests"][0]["body"]["requests"][0]["outputDimensionality"], 3);
            assert!(r.usage.is_none(), "Gemini reports no usage");
        } else {
            assert_eq!(log["requests"][0]["body"]["dimensions"], 3);
            // ceil(chars / 4) per text, summed over every batch: 1+1+1+1+2.
            assert_eq!(r.usage.unwrap().prompt_tokens, 6, "{adapter}");
            assert!((r.cost.unwrap() - 6.0 * 0.1 / 1000.0).abs() < 1e-12, "{adapter}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_batch_fails_over_and_wrong_calls_are_named() {
    let sim = Sim::start().await;
    sim.provider("oa", json!({"reset": true, "fail_rate": 1.0, "fail_status": 503})).await;
    sim.provider("az", json!({"reset": true})).await;
    let client = embed_client(&sim, &[("oa", "openai-compatible"), ("az", "azure-openai")], json!({}));
    let r = client.embed("embed", harness_core::EmbedRequest::new(vec!["hello".into(), "world!".into()])).await.unwrap();
    assert_eq!((r.provider.as_deref(), r.count, r.dimensions), (Some("az"), 2, 4));
    assert_eq!(r.vector(1), expected("world!", 4).as_slice());
    assert_eq!(r.attempts, 3, "two on the failing provider, one on the backup");
    // A vector missing from an answer is a broken answer, never a short result.
    let e = client.embed("embed", harness_core::EmbedRequest::new(vec![])).await.unwrap_err();
    assert!(e.message.starts_with("inputs: expected at least one"), "{}", e.message);
    let e = client.chat("embed", ask("hi")).await.unwrap_err();
    assert!(e.message.contains("kind embeddings"), "{}", e.message);
    let (chat, _) = routed(&sim, &[("claude", "anthropic")], json!({}));
    let e = chat.embed("chat", harness_core::EmbedRequest::new(vec!["x".into()])).await.unwrap_err();
    assert_eq!(e.message, "routes.chat.kind: embed needs a route of kind embeddings");
    let bad = json!({"services": {"s": {"base_url": "http://127.0.0.1:9"}}, "routes": {"r": {"kind": "embeddings", "adapter": "openai-compatible", "providers": [{"id": "a", "service": "s", "model": "m", "weight": 1, "adapter": "anthropic"}]}}});
    let e = Config::from_value(bad).and_then(Client::new).err().unwrap();
    assert!(e.message.starts_with("routes.r.providers[0].adapter: \"anthropic\" has no embeddings call"), "{}", e.message);
}

// ---- host adapters ----

/// An in-house format adapter as a binding would hand it over (here in Rust): JSON text each way.
struct InHouse {
    raise: bool,
}

impl harness_core::adapters::HostAdapter for InHouse {
    fn call(&self, step: harness_core::adapters::host::HostStep, input: String) -> harness_core::transport::BoxFuture<'_, Result<String, String>> {
        use harness_core::adapters::host::HostStep;
        Box::pin(async move {
            if self.raise {
                return Err("RuntimeError: the adapter is broken".into());
            }
            let v: Value = serde_json::from_str(&input).unwrap();
            Ok(match step {
                HostStep::BuildRequest => {
                    let prompt: Vec<&str> = v["request"]["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
                    json!({"path": "/inhouse/generate", "body": {"prompt": prompt.join("\n"), "stream": v["stream"]}}).to_string()
                }
                HostStep::ParseResponse => {
                    let body: Value = serde_json::from_str(v["body"].as_str().unwrap()).unwrap_or(Value::Null);
                    if v["status"].as_u64() != Some(200) {
                        let kind = body["failure"]["kind"].as_str().unwrap_or("busy");
                        json!({"error": {"code": if kind == "busy" { "overloaded" } else { "invalid_request" }, "message": kind}}).to_string()
                    } else {
                        json!({"content": body["output"]["text"], "finish_reason": "stop", "usage": {"prompt_tokens": body["tokens"]["in"], "completion_tokens": body["tokens"]["out"]}}).to_string()
                    }
                }
                HostStep::ParseStreamEvent => {
                    let d: Value = serde_json::from_str(v["data"].as_str().unwrap()).unwrap();
                    if d["end"] == true {
                        json!({"done": true, "finish_reason": "stop", "usage": {"prompt_tokens": d["tokens"]["in"], "completion_tokens": d["tokens"]["out"]}}).to_string()
                    } else {
                        json!({"content": d["token"]}).to_string()
                    }
                }
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_adapter_reaches_an_in_house_format_and_fails_over_to_a_native_provider() {
    let sim = Sim::start().await;
    sim.provider("house", json!({"reset": true, "content": "from the house model"})).await;
    sim.provider("gem", json!({"reset": true})).await;
    let (client, _) = routed(&sim, &[("house", "inhouse"), ("gem", "gemini")], json!({}));
    // Not registered yet: the provider is refused (not sent to), the route fails over.
    let a = client.chat("chat", ask("hi")).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("gem"));
    assert_eq!(sim.log("house").await["count"], 0);
    client.register_adapter("inhouse", Arc::new(InHouse { raise: false })).unwrap();
    let a = client.chat("chat", ask("hi")).await.unwrap();
    assert_eq!((a.provider.as_deref(), a.content.as_str()), (Some("house"), "from the house model"));
    assert!(a.cost.is_some() && a.usage.is_some());
    let sent = &sim.log("house").await["requests"][0];
    assert_eq!((sent["path"].as_str(), sent["body"]["prompt"].as_str()), (Some("/llm/house/inhouse/generate"), Some("Be brief.\nhi")));
    // Streamed through the host adapter.
    let mut s = client.chat_stream("chat", ask("hi")).await.unwrap();
    let mut text = String::new();
    while let Some(c) = s.next().await.unwrap() {
        if c.kind == ChatChunkKind::Delta {
            text.push_str(&c.content);
        }
    }
    assert_eq!(text, "from the house model");
    // The in-house server is busy: its error code comes from the adapter, and gemini answers.
    sim.provider("house", json!({"reset": true, "fail_rate": 1.0, "fail_status": 503})).await;
    let a = client.chat("chat", ask("hi")).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("gem"));
    // A raising adapter is an error naming it, never a crash; the route fails over.
    sim.provider("house", json!({"reset": true})).await;
    client.register_adapter("inhouse", Arc::new(InHouse { raise: true })).unwrap();
    let a = client.chat("chat", ask("hi")).await.unwrap();
    assert_eq!(a.provider.as_deref(), Some("gem"));
    sim.provider("gem", json!({"reset": true, "fail_rate": 1.0, "fail_status": 503})).await;
    let e = client.chat("chat", ask("hi")).await.unwrap_err();
    assert_eq!(e.name(), "NoHealthyProviderError");
    assert!(e.message.contains("adapter `inhouse` raised in build_request: RuntimeError: the adapter is broken"), "{}", e.message);
    assert!(client.register_adapter("anthropic", Arc::new(InHouse { raise: false })).unwrap_err().message.starts_with("name:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_streams_that_cut_stall_or_send_a_malformed_event_are_never_a_success() {
    let sim = Sim::start().await;
    for (id, adapter, other, other_adapter) in [("claude", "anthropic", "gem", "gemini"), ("gem", "gemini", "claude", "anthropic")] {
        sim.provider(other, json!({"reset": true, "content": "the backup answer"})).await;
        // A cut after two pieces, then a stall after two: held, restarted unseen on the other vendor.
        for fault in [json!({"cut_after": 2}), json!({"stall_after": 2})] {
            sim.provider(id, json!({"reset": true, "content": "one two three four", "stream": fault})).await;
            let (client, _) = routed(&sim, &[(id, adapter), (other, other_adapter)], json!({}));
            let mut s = client.chat_stream("chat", ask("go")).await.unwrap();
            let mut text = String::new();
            while let Some(c) = s.next().await.unwrap_or_else(|e| panic!("{adapter} {fault}: {e}")) {
                if c.kind == ChatChunkKind::Delta {
                    text.push_str(&c.content);
                }
            }
            assert_eq!(text, "the backup answer", "{adapter} {fault}");
        }
        // A malformed event is skipped; the answer completes from the same provider.
        sim.provider(id, json!({"reset": true, "content": "one two three", "stream": {"malformed_at": 1}})).await;
        let (client, events) = routed(&sim, &[(id, adapter), (other, other_adapter)], json!({}));
        let mut s = client.chat_stream("chat", ask("go")).await.unwrap();
        let mut text = String::new();
        while let Some(c) = s.next().await.unwrap() {
            if c.kind == ChatChunkKind::Delta {
                text.push_str(&c.content);
            }
        }
        assert_eq!(text, "one two three", "{adapter}");
        client.flush();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(events.0.lock().iter().filter(|e| e.kind() == "stream_chunk_skipped").count(), 1, "{adapter}");
    }
}
