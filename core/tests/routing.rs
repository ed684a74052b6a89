//! Routing across providers, against simulated OpenAI-compatible providers on the
//! real loopback upstream (`tests/upstream`, `/llm/{name}/...`): selection and weights,
//! failover rules, degradation, the adapter's normalisation and cost, and streamed
//! answers that survive a provider failing before or during the answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use harness_core::{ChatChunkKind, ChatRequest, Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

struct Sim {
    up: harness_upstream::Upstream,
    http: reqwest::Client,
}

impl Sim {
    async fn start() -> Sim {
        // The admin client is plain reqwest; Harness installs the same provider for its own.
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

    async fn count(&self, name: &str) -> u64 {
        self.log(name).await["count"].as_u64().unwrap()
    }

    /// A service per provider, reached at `/llm/{name}`.
    fn service(&self, name: &str, extra: Value) -> Value {
        let mut s = json!({
            "base_url": format!("{}/llm/{name}", self.up.url()),
            "timeouts": {"response_ms": 2000, "idle_ms": 2000},
            "retry": {"jitter": false, "base_delay_ms": 10, "max_delay_ms": 50},
        });
        merge(&mut s, &extra);
        s
    }
}

use harness_upstream::merge_json as merge;

/// A client with one service per provider (named like it) and route `chat` over them.
fn make(sim: &Sim, providers: Value, route: Value, service_extra: Value) -> (Client, Arc<Events>) {
    make_with(sim, providers, route, service_extra, json!({}))
}

/// As `make`, with `top` merged into the config's top level (e.g. `prices`).
fn make_with(sim: &Sim, providers: Value, route: Value, service_extra: Value, top: Value) -> (Client, Arc<Events>) {
    let mut services = serde_json::Map::new();
    for p in providers.as_array().unwrap() {
        let name = p["service"].as_str().unwrap();
        services.insert(name.to_string(), sim.service(name, service_extra.clone()));
    }
    let mut r = json!({"adapter": "openai-compatible", "providers": providers});
    merge(&mut r, &route);
    let mut config = json!({"log": {"enabled": false}, "services": services, "routes": {"chat": r}});
    merge(&mut config, &top);
    let config = Config::from_value(config).unwrap();
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let client = Client::with_options(config, ClientOptions { sinks: vec![sink], jitter_seed: Some(7), ..Default::default() }).unwrap();
    (client, events)
}

fn p(id: &str, weight: u32) -> Value {
    json!({"id": id, "service": id, "model": format!("{id}-model"), "weight": weight})
}

fn hello() -> ChatRequest {
    ChatRequest::new(json!([{"role": "user", "content": "Say hello, please."}]))
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.0.lock().push(event.clone());
        Ok(())
    }
}

impl Events {
    fn of(&self, kind: &str) -> Vec<Value> {
        self.0.lock().iter().filter(|e| e.kind() == kind).map(Event::to_value).collect()
    }
}

async fn flushed(client: &Client) {
    client.flush();
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_provider_of_three_costs_nothing_and_gets_its_traffic_back() {
    let sim = Sim::start().await;
    sim.provider("a", json!({"fail_rate": 1.0})).await;
    sim.provider("b", json!({})).await;
    sim.provider("c", json!({})).await;
    let (client, _) = make(
        &sim,
        json!([p("a", 50), p("b", 30), p("c", 20)]),
        json!({"health_window_ms": 2000}),
        json!({"breaker": {"failure_threshold": 5, "open_ms": 400}}),
    );
    // Traffic leaves the failing provider within 10 requests.
    for _ in 0..10 {
        client.chat("chat", hello()).await.unwrap();
    }
    let a_early = sim.count("a").await;
    assert!(a_early <= 10, "a got {a_early} of the first 10");
    let ok = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (client, ok) = (client.clone(), ok.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..(2000 / 8 - if w == 0 { 10 } else { 0 }) {
                if client.chat("chat", hello()).await.is_ok() {
                    ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let success = (ok.load(std::sync::atomic::Ordering::Relaxed) + 10) as f64 / 2000.0;
    assert!(success >= 0.999, "success {success}");
    // While open, the breaker admits one probe per open period, not a share of traffic.
    let a_during = sim.count("a").await;
    assert!(a_during < 60, "a got {a_during} requests while failing");
    let state = client.routing_state("chat").unwrap();
    assert!(state.providers[0].last_error.as_deref().unwrap().contains("503"), "{state:?}");

    // Recovery: the provider is healthy again; traffic comes back, gradually.
    sim.provider("a", json!({"reset": true})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut share = 0.0;
    while tokio::time::Instant::now() < deadline {
        let mut by: HashMap<String, u32> = HashMap::new();
        for _ in 0..200 {
            let r = client.chat("chat", hello()).await.unwrap();
            *by.entry(r.provider.unwrap()).or_default() += 1;
        }
        share = *by.get("a").unwrap_or(&0) as f64 / 200.0;
        if share > 0.35 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(share > 0.35, "a's share after recovery: {share}");
    assert_eq!(client.routing_state("chat").unwrap().providers[0].breaker, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_are_honoured_within_three_percent() {
    let sim = Sim::start().await;
    sim.provider("big", json!({})).await;
    sim.provider("small", json!({})).await;
    let (client, _) = make(&sim, json!([p("big", 80), p("small", 20)]), json!({}), json!({}));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut big = 0;
            for _ in 0..625 {
                let r = client.request(Request { body: harness_core::Body::Json(json!({"messages": [{"role": "user", "content": "x"}]})), ..Request::new("chat", "POST", "/v1/chat/completions") }).await.unwrap();
                if r.provider() == Some("big") {
                    big += 1;
                }
                assert_eq!(r.model(), Some(if r.provider() == Some("big") { "big-model" } else { "small-model" }));
            }
            big
        }));
    }
    let mut big = 0;
    for t in tasks {
        big += t.await.unwrap();
    }
    let share = big as f64 / 10_000.0;
    assert!((share - 0.8).abs() <= 0.03, "big's share {share}");
    assert_eq!(sim.count("big").await + sim.count("small").await, 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_drops_no_request_and_weight_zero_stops_traffic() {
    let sim = Sim::start().await;
    sim.provider("one", json!({"latency_ms": 2})).await;
    sim.provider("two", json!({"latency_ms": 2})).await;
    let (client, events) = make(&sim, json!([p("one", 50), p("two", 50)]), json!({}), json!({}));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut failed = 0;
            for _ in 0..60 {
                if client.chat("chat", hello()).await.is_err() {
                    failed += 1;
                }
            }
            failed
        }));
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let v = client.set_weight("chat", "two", 0).unwrap();
    assert_eq!(client.config_version(), v);
    let mut failed = 0;
    for t in tasks {
        failed += t.await.unwrap();
    }
    assert_eq!(failed, 0);
    let before = sim.count("two").await;
    for _ in 0..50 {
        assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("one"));
    }
    assert_eq!(sim.count("two").await, before, "weight 0: registered, not serving");
    assert_eq!(client.routing_state("chat").unwrap().providers[1].weight, 0);
    flushed(&client).await;
    assert!(events.of("config_reloaded").iter().any(|e| e["source"] == "set_weight"));
    assert!(client.set_weight("chat", "nope", 1).unwrap_err().message.contains("unknown provider `nope`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_is_retried_once_on_the_same_provider_then_fails_over() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    sim.provider("backup", json!({})).await;
    let (client, events) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority"}), json!({}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.provider.as_deref(), Some("backup"));
    assert_eq!(r.model.as_deref(), Some("backup-model"));
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 2), ("backup".to_string(), 1)]);
    assert_eq!(r.attempts, 3);
    assert_eq!(r.content, "Hello from backup");
    flushed(&client).await;
    let f = events.of("provider_failover");
    assert_eq!((f[0]["from"].as_str(), f[0]["to"].as_str(), f[0]["status"].as_u64()), (Some("primary"), Some("backup"), Some(503)));

    // `same_provider_retries: 0`: immediate failover.
    let (client, _) = client_route(&sim, json!({"strategy": "priority", "same_provider_retries": 0}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
}

fn client_route(sim: &Sim, route: Value) -> (Client, Arc<Events>) {
    make(sim, json!([p("primary", 1), p("backup", 1)]), route, json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_cools_the_provider_until_retry_after_and_fails_over_at_once() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_first": 1, "fail_status": 429, "retry_after": "2"})).await;
    sim.provider("backup", json!({})).await;
    let (client, _) = client_route(&sim, json!({"strategy": "priority"}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
    // Cooling: nobody sends to the primary before its Retry-After.
    for _ in 0..5 {
        assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("backup"));
    }
    assert_eq!(sim.count("primary").await, 1);
    let cooling = client.routing_state("chat").unwrap().providers[0].cooling_ms.unwrap();
    assert!(cooling > 1000, "{cooling}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_the_only_provider_is_waited_out_without_hammering() {
    let sim = Sim::start().await;
    sim.provider("only", json!({"fail_first": 2, "fail_status": 429, "retry_after": "1"})).await;
    let (client, _) = make(&sim, json!([p("only", 1)]), json!({}), json!({}));
    let t0 = std::time::Instant::now();
    let r = client.chat("chat", hello()).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(1900), "{:?}", t0.elapsed());
    assert_eq!(r.attempts, 3);
    let at: Vec<f64> = sim.log("only").await["requests"].as_array().unwrap().iter().map(|r| r["at_ms"].as_f64().unwrap()).collect();
    // At most 2 attempts to one provider in 1.5 s.
    for w in at.windows(3) {
        assert!(w[2] - w[0] >= 1500.0, "{at:?}");
    }
    // A Retry-After longer than max_retry_after_ms is not waited out.
    sim.provider("only", json!({"reset": true, "fail_first": 1, "fail_status": 429, "retry_after": "60"})).await;
    let e = client.chat("chat", hello()).await.unwrap_err();
    assert_eq!(e.name(), "NoHealthyProviderError");
    assert!(e.provider_errors[0].1.contains("429"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_provider_is_not_retried_the_next_attempt_goes_elsewhere() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"silence": true})).await;
    sim.provider("backup", json!({})).await;
    let (client, _) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority"}), json!({"timeouts": {"response_ms": 300}}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_retryable_4xx_reach_the_caller_intact_or_go_to_the_on_error_provider() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_rate": 1.0, "fail_status": 400, "error_code": "context_length_exceeded", "error_type": "invalid_request_error"})).await;
    sim.provider("backup", json!({})).await;
    sim.provider("long", json!({"content": "long answer"})).await;
    let providers = json!([p("primary", 1), p("backup", 1), p("long", 0)]);
    let (client, _) = make(&sim, providers.clone(), json!({"strategy": "priority", "on_error": {"context_length_exceeded": {"provider": "long"}}}), json!({}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!((r.provider.as_deref(), r.content.as_str()), (Some("long"), "long answer"));
    assert_eq!(sim.count("backup").await, 0);

    let (client, _) = make(&sim, providers, json!({"strategy": "priority"}), json!({}));
    let e = client.chat("chat", hello()).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.code.as_deref()), ("HttpStatusError", Some(400), Some("context_length_exceeded")));
    assert_eq!(e.provider.as_deref(), Some("primary"));
    assert_eq!(e.service.as_deref(), Some("chat"));
    assert_eq!(e.attempts, 1);
    assert_eq!(sim.count("backup").await, 0, "never retried elsewhere without on_error");

    sim.provider("primary", json!({"fail_rate": 1.0, "fail_status": 400, "error_code": "content_policy_violation"})).await;
    let e = client.chat("chat", hello()).await.unwrap_err();
    assert_eq!((e.code.as_deref(), e.attempts), (Some("content_policy_violation"), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_provider_fails_core_routes_get_an_error_listing_each_and_non_core_a_static_answer() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_rate": 1.0, "fail_status": 502})).await;
    sim.provider("backup", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    let (client, _) = client_route(&sim, json!({"strategy": "priority", "same_provider_retries": 0}));
    let e = client.chat("chat", hello()).await.unwrap_err();
    assert_eq!(e.name(), "NoHealthyProviderError");
    assert_eq!(e.provider_errors.len(), 2);
    assert!(e.provider_errors[0].1.contains("502") && e.provider_errors[1].1.contains("503"), "{e:?}");
    assert!(e.message.contains("primary: HttpStatusError"), "{}", e.message);

    // Level 2: the last good answer for the same request, marked stale.
    sim.provider("primary", json!({"content": "fresh"})).await;
    let (client, events) = client_route(&sim, json!({"strategy": "priority", "same_provider_retries": 0, "fallback": {"cache_ttl_ms": 60000}}));
    let fresh = client.chat("chat", hello()).await.unwrap();
    assert_eq!(fresh.fallback, None);
    sim.provider("primary", json!({"fail_rate": 1.0})).await;
    let stale = client.chat("chat", hello()).await.unwrap();
    assert_eq!((stale.content.as_str(), stale.fallback), ("fresh", Some("cache")));
    // Another request has no cached answer: an error, never a synthetic answer on a core route.
    let other = ChatRequest::new(json!([{"role": "user", "content": "something else"}]));
    assert_eq!(client.chat("chat", other.clone()).await.unwrap_err().name(), "NoHealthyProviderError");
    flushed(&client).await;
    assert_eq!(events.of("fallback_served")[0]["kind"], "cache");

    // Level 3, non-core only: the static answer.
    let (client, _) = client_route(&sim, json!({"strategy": "priority", "criticality": "non-core", "fallback": {"static": "Service is busy, try later."}}));
    let r = client.chat("chat", other).await.unwrap();
    assert_eq!((r.content.as_str(), r.fallback, r.provider), ("Service is busy, try later.", Some("static"), None));
    assert!(client.metrics_text().contains("harness_route_fallbacks_total{route=\"chat\",kind=\"static\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_and_cost_are_per_provider_across_a_failover() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_rate": 1.0})).await;
    sim.provider("backup", json!({"prompt_tokens": 1000, "completion_tokens": 500})).await;
    let providers = json!([
        {"id": "primary", "service": "primary", "model": "gpt-4o-mini", "weight": 1, "price": {"input_per_1k": 0.15, "output_per_1k": 0.6}},
        {"id": "backup", "service": "backup", "model": "glm-4-flash", "weight": 1, "price": {"input_per_1k": 0.1, "output_per_1k": 0.2},
         "params": {"temperature": {"range": [0.01, 0.99]}, "max_tokens_field": "max_completion_tokens"}},
    ]);
    let (client, _) = make(&sim, providers, json!({"strategy": "priority", "same_provider_retries": 0}), json!({}));
    let mut chat = hello();
    chat.params.insert("temperature".into(), json!(1.5));
    chat.params.insert("max_tokens".into(), json!(64));
    chat.params.insert("model".into(), json!("ignored"));
    let r = client.chat("chat", chat).await.unwrap();
    let primary = &sim.log("primary").await["requests"][0]["body"];
    assert_eq!((primary["model"].as_str(), primary["temperature"].as_f64(), primary["max_tokens"].as_u64()), (Some("gpt-4o-mini"), Some(1.5), Some(64)));
    let backup = &sim.log("backup").await["requests"][0]["body"];
    assert_eq!((backup["model"].as_str(), backup["temperature"].as_f64()), (Some("glm-4-flash"), Some(0.99)));
    assert_eq!((backup["max_completion_tokens"].as_u64(), backup.get("max_tokens")), (Some(64), None));
    // The answer's model and cost are the backup's: 1000 * 0.1/1k + 500 * 0.2/1k.
    assert_eq!(r.model.as_deref(), Some("glm-4-flash"));
    let usage = r.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.total_tokens), (1000, 500, 1500));
    assert!((r.cost.unwrap() - 0.2).abs() < 1e-9, "{:?}", r.cost);
    let m = client.metrics_text();
    assert!(m.contains("harness_cost_total{route=\"chat\",provider=\"backup\",model=\"glm-4-flash\"} 0.2"), "{m}");
    assert!(!m.contains("harness_cost_total{route=\"chat\",provider=\"primary\""), "a failed attempt is never billed as the answer");
    assert!(m.contains("harness_route_attempts_total{route=\"chat\",provider=\"primary\",outcome=\"HttpStatusError\"} 1"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_request_records_route_provider_model_and_cost_in_its_log_record() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"prompt_tokens": 10, "completion_tokens": 10})).await;
    let providers = json!([{"id": "primary", "service": "primary", "model": "m1", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}}]);
    let (client, events) = make(&sim, providers, json!({}), json!({}));
    client.chat("chat", hello()).await.unwrap();
    flushed(&client).await;
    let rec = &events.of("request_finished")[0];
    assert_eq!((rec["service"].as_str(), rec["route"].as_str(), rec["provider"].as_str(), rec["model"].as_str()), (Some("chat"), Some("chat"), Some("primary"), Some("m1")));
    assert!((rec["cost"].as_f64().unwrap() - 0.02).abs() < 1e-9);
}

// ---- streaming ----

async fn collect(stream: &mut harness_core::ChatStream) -> Result<(String, Vec<harness_core::ChatChunk>), harness_core::HarnessError> {
    let mut text = String::new();
    let mut chunks = Vec::new();
    while let Some(c) = stream.next().await? {
        if c.kind == ChatChunkKind::Delta {
            text.push_str(&c.content);
        }
        if c.kind == ChatChunkKind::Restart {
            text.clear();
        }
        chunks.push(c);
    }
    Ok((text, chunks))
}

const ANSWER: &str = "one two three four five six";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_streams_and_ends_with_usage_and_cost() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER})).await;
    let providers = json!([{"id": "primary", "service": "primary", "model": "m", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 2.0}}]);
    let (client, _) = make(&sim, providers, json!({"stream": {"mid_stream": "restart"}}), json!({}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER);
    assert!(chunks.iter().filter(|c| c.kind == ChatChunkKind::Delta).count() >= 6, "streamed in pieces");
    let done = chunks.last().unwrap();
    assert_eq!((done.kind, done.finish_reason.as_deref(), done.provider.as_deref()), (ChatChunkKind::Done, Some("stop"), Some("primary")));
    assert_eq!(done.usage.unwrap().completion_tokens, 6);
    assert!(done.cost.unwrap() > 0.0);
    assert_eq!(sim.log("primary").await["requests"][0]["body"]["stream"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_first_chunk_within_ttft_fails_over_before_anything_is_seen() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"stream": {"ttft_ms": 3000}})).await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    let (client, _) = client_route(&sim, json!({"strategy": "priority", "ttft_ms": 300}));
    let t0 = std::time::Instant::now();
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert!(t0.elapsed() < Duration::from_millis(2500));
    assert_eq!(text, ANSWER);
    assert_eq!(chunks.last().unwrap().provider.as_deref(), Some("backup"));
    assert!(chunks.iter().all(|c| c.kind != ChatChunkKind::Restart));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_answer_is_restarted_unseen_by_default() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER, "stream": {"cut_after": 3}})).await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    let (client, events) = client_route(&sim, json!({"strategy": "priority"}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER, "nothing partial reaches the caller");
    assert!(chunks.iter().filter(|c| c.kind == ChatChunkKind::Delta).all(|c| c.provider.as_deref() == Some("backup")));
    flushed(&client).await;
    let r = &events.of("stream_restarted")[0];
    assert_eq!((r["from"].as_str(), r["to"].as_str(), r["mode"].as_str()), (Some("primary"), Some("backup"), Some("hidden")));
    // The client stays healthy for the next call.
    sim.provider("primary", json!({"content": ANSWER})).await;
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    assert_eq!(collect(&mut s).await.unwrap().0, ANSWER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_mid_answer_gives_a_restart_chunk_in_restart_mode_and_an_error_in_error_mode() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER, "stream": {"stall_after": 2}})).await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    let (client, _) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority", "stream": {"mid_stream": "restart"}}), json!({"timeouts": {"idle_ms": 300}}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    let kinds: Vec<&str> = chunks.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(&kinds[..3], &["delta", "delta", "restart"], "{kinds:?}");
    assert!(chunks[2].reason.as_deref().unwrap().contains("TimeoutError"));
    assert_eq!(text, ANSWER);

    let (client, _) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority", "stream": {"mid_stream": "error"}}), json!({"timeouts": {"idle_ms": 300}}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let e = collect(&mut s).await.unwrap_err();
    assert_eq!((e.name(), e.phase(), e.provider.as_deref()), ("TimeoutError", Some("idle"), Some("primary")));
    // A cut in error mode: an error, never a short success.
    sim.provider("primary", json!({"content": ANSWER, "stream": {"cut_after": 2}})).await;
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    assert!(collect(&mut s).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_provider_continues_the_partial_answer_and_a_refused_prefill_restarts_cleanly() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER, "stream": {"cut_after": 3}})).await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    let providers = json!([p("primary", 1), {"id": "backup", "service": "backup", "model": "b", "weight": 1, "accepts_prefill": true}]);
    let (client, events) = make(&sim, providers.clone(), json!({"strategy": "priority"}), json!({}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, _) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER);
    let body = &sim.log("backup").await["requests"][0]["body"];
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last, json!({"role": "assistant", "content": "one two three"}));
    flushed(&client).await;
    assert_eq!(events.of("stream_restarted")[0]["mode"], "continue");

    // The backup says it takes prefills, but refuses one: it is asked again, cleanly.
    sim.provider("backup", json!({"reset": true, "content": ANSWER, "accept_prefill": false})).await;
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, _) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(sim.count("backup").await, 2);

    // Nobody can take over: the caller hears the original failure, not the prefill refusal.
    sim.provider("backup", json!({"reset": true, "fail_rate": 1.0, "fail_status": 400, "error_code": "prefill_unsupported"})).await;
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let e = collect(&mut s).await.unwrap_err();
    assert_eq!((e.name(), e.provider.as_deref()), ("ConnectError", Some("primary")), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_chunks_are_skipped_and_a_stream_without_done_ends_cleanly_with_usage() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER, "stream": {"malformed_at": 2, "done": false}})).await;
    let (client, events) = make(&sim, json!([p("primary", 1)]), json!({}), json!({}));
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(chunks.last().unwrap().usage.unwrap().completion_tokens, 6);
    flushed(&client).await;
    assert_eq!(events.of("stream_chunk_skipped").len(), 1);
    assert!(events.of("request_finished")[0]["error_kind"].is_null());
}

#[test]
fn route_config_errors_name_the_field() {
    let err = |routes: Value| {
        let v = json!({"services": {"a": {"base_url": "http://127.0.0.1:1"}}, "routes": routes});
        Config::from_value(v).unwrap_err().message
    };
    let pa = json!({"id": "a", "service": "a", "model": "m", "weight": 1});
    assert!(err(json!({"chat": {"providers": [{"id": "x", "service": "nope", "weight": 1}]}})).starts_with("routes.chat.providers[0].service: unknown service `nope`"));
    assert!(err(json!({"chat": {"criticality": "core", "fallback": {"static": "x"}, "providers": [pa]}})).starts_with("routes.chat.fallback.static: only for criticality non-core"));
    assert!(err(json!({"chat": {"on_error": {"context_length_exceeded": {"provider": "zz"}}, "providers": [pa]}})).starts_with("routes.chat.on_error.context_length_exceeded.provider: unknown provider `zz`"));
    assert!(err(json!({"a": {"providers": [pa]}})).starts_with("routes.a: a service has the same name"));
    assert!(err(json!({"chat": {"strategy": "random", "providers": [pa]}})).starts_with("routes.chat.strategy: "));
    assert!(err(json!({"chat": {"adapter": "openai-compatible", "providers": [{"id": "a", "service": "a", "weight": 1}]}})).starts_with("routes.chat.providers[0].model: required"));
    assert!(err(json!({"chat": {"providers": [{"id": "a", "service": "a", "weight": 0}]}})).starts_with("routes.chat.providers: at least one provider needs a weight above 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_latency_sends_most_traffic_to_the_faster_provider() {
    let sim = Sim::start().await;
    sim.provider("slow", json!({"latency_ms": 40})).await;
    sim.provider("fast", json!({})).await;
    let (client, _) = make(&sim, json!([p("slow", 1), p("fast", 1)]), json!({"strategy": "least-latency"}), json!({}));
    let mut fast = 0;
    for _ in 0..100 {
        if client.chat("chat", hello()).await.unwrap().provider.as_deref() == Some("fast") {
            fast += 1;
        }
    }
    // Two providers: both picks are the pair, so after one measurement each the faster wins.
    assert!(fast >= 95, "fast got {fast} of 100");
    let state = client.routing_state("chat").unwrap();
    assert!(state.providers[0].latency_ewma_ms.unwrap() > state.providers[1].latency_ewma_ms.unwrap());
    assert_eq!(state.strategy, "least-latency");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_at_its_concurrency_limit_is_skipped_not_queued_behind() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"latency_ms": 400})).await;
    sim.provider("backup", json!({})).await;
    let providers = json!([
        {"id": "primary", "service": "primary", "model": "m", "weight": 1, "max_concurrency": 1},
        p("backup", 1),
    ]);
    let (client, _) = make(&sim, providers, json!({"strategy": "priority"}), json!({}));
    let c = client.clone();
    let slow = tokio::spawn(async move { c.chat("chat", hello()).await });
    while client.routing_state("chat").unwrap().providers[0].in_flight == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!((r.provider.as_deref(), r.attempts), (Some("backup"), 1), "full: skipped, nothing sent to it");
    assert_eq!(slow.await.unwrap().unwrap().provider.as_deref(), Some("primary"));

    // The same for a full bulkhead on the provider's service.
    let (client, _) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority"}), json!({"bulkhead": {"max_concurrency": 1}}));
    let c = client.clone();
    let slow = tokio::spawn(async move { c.chat("chat", hello()).await });
    while client.bulkhead_in_use("primary").unwrap() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("backup"));
    slow.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_stream_with_an_endless_event_is_cut_and_failed_over() {
    let sim = Sim::start().await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    // The "primary" is a scripted upstream sending one event line that never ends.
    let line = format!("data: {}", "x".repeat(600 * 1024));
    let steps = json!({"steps": [{"chunks": [{"data": line}, {"data": line}, {"data": line}]}]});
    let r = sim.http.put(format!("{}/__admin/script/endless", sim.up.url())).body(steps.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut services = serde_json::Map::new();
    services.insert("primary".into(), json!({"base_url": format!("{}/s/endless", sim.up.url())}));
    services.insert("backup".into(), sim.service("backup", json!({})));
    let config = json!({"log": {"enabled": false}, "services": services, "routes": {"chat": {
        "adapter": "openai-compatible", "strategy": "priority", "providers": [p("primary", 1), p("backup", 1)]}}});
    let client = Client::new(Config::from_value(config).unwrap()).unwrap();
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(text, ANSWER);
    assert_eq!(chunks.last().unwrap().provider.as_deref(), Some("backup"));
    let state = client.routing_state("chat").unwrap();
    assert!(state.providers[0].last_error.as_deref().unwrap().contains("ProtocolError"), "{state:?}");
}

#[tokio::test]
async fn a_slow_provider_is_hedged_on_another_and_the_first_answer_wins() {
    let sim = Sim::start().await;
    sim.provider("slow", json!({"latency_ms": 400})).await;
    sim.provider("fast", json!({})).await;
    let (client, _) = make(
        &sim,
        json!([p("slow", 1), p("fast", 1)]),
        json!({"strategy": "priority", "hedge": {"after_ms": 50, "budget_ratio": 1.0}}),
        json!({}),
    );
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let r = client.chat("chat", hello()).await.unwrap();
        assert_eq!(r.provider.as_deref(), Some("fast"), "the hedge on the next provider answered first");
        assert!(t.elapsed() < Duration::from_millis(300), "{:?}: the slow provider was not waited for", t.elapsed());
        assert_eq!(r.attempts, 2);
        assert_eq!(r.attempts_by_provider, vec![("slow".to_string(), 1), ("fast".to_string(), 1)]);
    }
    assert_eq!(sim.count("slow").await, 5);
    assert_eq!(sim.count("fast").await, 5);
    let text = client.metrics_text();
    assert!(text.contains("harness_hedges_won_total{service=\"chat\"} 5"), "{}", text.lines().filter(|l| l.contains("hedge")).collect::<Vec<_>>().join("\n"));
    // Streams are never hedged: the stream waits for the slow provider.
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (_, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(chunks.last().unwrap().provider.as_deref(), Some("slow"));
}

// ---- regressions (issue 25) ----

/// Regression: `ttft_ms` counted from the response head, so a provider that sent no head was
/// bounded only by `response_ms` (20 s here). The first chunk is due `ttft_ms` after the
/// request is sent, head included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_counts_from_the_request_so_a_provider_that_sends_no_head_is_failed_over_in_time() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": ANSWER, "latency_ms": 4000})).await;
    sim.provider("backup", json!({"content": ANSWER})).await;
    let (client, _) = make(
        &sim,
        json!([p("primary", 1), p("backup", 1)]),
        json!({"strategy": "priority", "ttft_ms": 800}),
        json!({"timeouts": {"response_ms": 20000, "request_ms": 30000}}),
    );
    let t0 = std::time::Instant::now();
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    let took = t0.elapsed();
    assert_eq!(text, ANSWER);
    assert_eq!(chunks.last().unwrap().provider.as_deref(), Some("backup"), "the silent provider's late answer must not be used");
    assert!(took >= Duration::from_millis(750) && took < Duration::from_millis(2500), "failed over after {took:?}, expected ~800 ms");
    let state = client.routing_state("chat").unwrap();
    assert!(state.providers[0].last_error.as_deref().is_some_and(|e| e.contains("ttft")), "{state:?}");
    // A buffered chat is not bound by ttft_ms (it has no first chunk): response_ms applies.
    sim.provider("primary", json!({"content": ANSWER, "latency_ms": 1200})).await;
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.provider.as_deref(), Some("primary"));
}

/// Regression: two providers of one route on one service (one gateway URL serving two
/// models) shared a breaker: the backup's successes reset the primary's consecutive-failure
/// count, so the failing model kept getting traffic. Each provider's breaker is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_providers_on_one_service_each_have_their_own_breaker() {
    let sim = Sim::start().await;
    sim.provider("gw", json!({"only_model": "m-bad", "fail_rate": 1.0, "fail_status": 503})).await;
    let providers = json!([
        {"id": "primary", "service": "gw", "model": "m-bad", "weight": 1},
        {"id": "backup", "service": "gw", "model": "m-good", "weight": 1}
    ]);
    let (client, _) = make(&sim, providers, json!({"strategy": "priority"}), json!({"breaker": {"failure_threshold": 3, "open_ms": 60000}}));
    for _ in 0..10 {
        let r = client.chat("chat", hello()).await.unwrap();
        assert_eq!(r.provider.as_deref(), Some("backup"));
    }
    let log = sim.log("gw").await;
    let bad = log["requests"].as_array().unwrap().iter().filter(|r| r["model"] == "m-bad").count();
    // 2 attempts for the first request (one same-provider retry), 1 for the second: open.
    assert!(bad <= 3, "the failing model got {bad} attempts for 10 requests once its breaker should be open");
    let state = client.routing_state("chat").unwrap();
    assert_eq!((state.providers[0].breaker, state.providers[1].breaker), ("open", "closed"), "{state:?}");
    // The service's own breaker (plain requests to it) is not the providers'.
    assert_eq!(client.breaker_state("gw", "POST", "/v1/chat/completions", None), "closed");
    assert_eq!(client.breaker_state("route:chat/primary", "POST", "/v1/chat/completions", None), "open");
    // Closed by hand under its scope name, it takes traffic again.
    sim.provider("gw", json!({})).await;
    client.set_breaker("route:chat/primary", "POST", "/v1/chat/completions", false).unwrap();
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("primary"));
}

/// Regression: a canary that pointed a route's only provider at a dead host was rolled back,
/// and the provider kept its open breaker and its failures: the route stayed broken on the
/// old, good host until the breaker's open_ms ran out. A reload that moves a provider's
/// service to another base URL gives the provider a fresh start; one that keeps it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_moves_a_provider_to_another_host_closes_its_breaker_and_forgets_its_health() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({})).await;
    let (client, _) = make(&sim, json!([p("primary", 1)]), json!({}), json!({"retry": {"max_retries": 0}, "breaker": {"failure_threshold": 2, "open_ms": 600000}}));
    let good = client.config();
    let mut dead = serde_json::to_value(&*good).unwrap();
    dead["services"]["primary"]["base_url"] = json!("http://127.0.0.1:9");
    client.reload(Config::from_value(dead).unwrap()).unwrap();
    for _ in 0..4 {
        assert!(client.chat("chat", hello()).await.is_err());
    }
    assert_eq!(client.routing_state("chat").unwrap().providers[0].breaker, "open");
    // A reload that keeps the (dead) host keeps what the breaker learned.
    client.reload((*client.config()).clone()).unwrap();
    assert_eq!(client.routing_state("chat").unwrap().providers[0].breaker, "open");
    // Back on the good host: closed, healthy, serving at once.
    client.reload((*good).clone()).unwrap();
    let state = client.routing_state("chat").unwrap();
    assert_eq!(state.providers[0].breaker, "closed", "{state:?}");
    assert_eq!(state.providers[0].success_rate, 1.0, "{state:?}");
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("primary"));
}

/// Regression: a 429's `Retry-After: 99999999` cooled a provider for 1,157 days, through
/// reloads. Cooling is clamped to the route's `max_retry_after_ms`, and a reload ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_cooling_is_clamped_and_a_reload_ends_it() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_first": 1, "fail_status": 429, "retry_after": "99999999"})).await;
    sim.provider("backup", json!({})).await;
    let (client, _) = client_route(&sim, json!({"strategy": "priority", "max_retry_after_ms": 2000}));
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("backup"));
    let cooling = client.routing_state("chat").unwrap().providers[0].cooling_ms.unwrap();
    assert!(cooling <= 2000, "cooling {cooling} ms, over max_retry_after_ms");
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("backup"), "still cooling");
    // A reload gives the provider a fresh start (the operator may have fixed the cause).
    client.reload((*client.config()).clone()).unwrap();
    assert_eq!(client.routing_state("chat").unwrap().providers[0].cooling_ms, None);
    assert_eq!(client.chat("chat", hello()).await.unwrap().provider.as_deref(), Some("primary"));
}

/// Regression: an answer over `limits.max_response_bytes` failed the routed call, where an
/// oversized streamed event fails over. Both fail over now; absurd usage does too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_answer_or_absurd_usage_fails_over_like_a_broken_one() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": "x".repeat(4000)})).await;
    sim.provider("backup", json!({"content": "short"})).await;
    let (client, _) = make(&sim, json!([p("primary", 1), p("backup", 1)]), json!({"strategy": "priority"}), json!({"limits": {"max_response_bytes": 2000}}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!((r.provider.as_deref(), r.content.as_str()), (Some("backup"), "short"));
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
    sim.provider("primary", json!({"prompt_tokens": 18446744073709551615u64, "completion_tokens": 2})).await;
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.provider.as_deref(), Some("backup"));
    assert!(r.usage.unwrap().total_tokens < 1000, "{:?}", r.usage);
}

// ---- wait_retry_after_ms: the primary's price over the fastest answer ----

/// A client whose route prefers `primary`, waiting out its 429s up to `wait_ms`.
fn waiting(sim: &Sim, wait_ms: u64, route: Value) -> Client {
    let mut r = json!({"strategy": "priority", "wait_retry_after_ms": wait_ms});
    merge(&mut r, &route);
    client_route(sim, r).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_a_short_enough_retry_after_is_waited_out_on_the_same_provider() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_first": 1, "fail_status": 429, "retry_after": "1"})).await;
    sim.provider("backup", json!({})).await;
    let client = waiting(&sim, 2000, json!({}));
    let t0 = std::time::Instant::now();
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.provider.as_deref(), Some("primary"));
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 2)]);
    assert!(t0.elapsed() >= Duration::from_millis(950), "waited {:?}", t0.elapsed());
    let at: Vec<f64> = sim.log("primary").await["requests"].as_array().unwrap().iter().map(|r| r["at_ms"].as_f64().unwrap()).collect();
    assert!(at[1] - at[0] >= 950.0, "{at:?}");
    assert_eq!(sim.count("backup").await, 0);

    // The HTTP-date form of `Retry-After` is waited out the same way.
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
    sim.provider("primary", json!({"reset": true, "fail_first": 1, "fail_status": 429, "retry_after": date})).await;
    let client = waiting(&sim, 3000, json!({}));
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!((r.provider.as_deref(), r.attempts), (Some("primary"), 2));
    assert_eq!(sim.count("backup").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_failed_over_at_once_when_its_retry_after_is_too_long_or_cannot_fit_the_deadline() {
    let sim = Sim::start().await;
    sim.provider("backup", json!({})).await;
    // Longer than `wait_retry_after_ms`: the backup at once.
    sim.provider("primary", json!({"fail_first": 1, "fail_status": 429, "retry_after": "3"})).await;
    let t0 = std::time::Instant::now();
    let r = waiting(&sim, 2000, json!({})).chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
    assert!(t0.elapsed() < Duration::from_millis(900), "{:?}", t0.elapsed());
    // Short enough, but the wait would pass the deadline: never slept through, the backup now.
    sim.provider("primary", json!({"reset": true, "fail_first": 1, "fail_status": 429, "retry_after": "1"})).await;
    let t0 = std::time::Instant::now();
    let r = waiting(&sim, 2000, json!({"request_ms": 800})).chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
    assert!(t0.elapsed() < Duration::from_millis(700), "{:?}", t0.elapsed());
    // The default (0) fails over at once (`a_429_cools_the_provider_until_retry_after_and_fails_over_at_once`).
    sim.provider("primary", json!({"reset": true, "fail_first": 1, "fail_status": 429, "retry_after": "1"})).await;
    let r = client_route(&sim, json!({"strategy": "priority"})).0.chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 1), ("backup".to_string(), 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_limits_again_after_its_retry_after_was_waited_out_fails_over() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"fail_first": 2, "fail_status": 429, "retry_after": "1"})).await;
    sim.provider("backup", json!({})).await;
    let client = waiting(&sim, 2000, json!({}));
    let t0 = std::time::Instant::now();
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.attempts_by_provider, vec![("primary".to_string(), 2), ("backup".to_string(), 1)]);
    assert!(t0.elapsed() < Duration::from_millis(1900), "waited once, not twice: {:?}", t0.elapsed());
    // Other requests meanwhile are not held: the primary cools and they fail over.
    assert!(client.routing_state("chat").unwrap().providers[0].cooling_ms.is_some());
}

// ---- prices ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_table_by_model_prices_providers_without_their_own_and_cached_input_at_its_rate() {
    let sim = Sim::start().await;
    for id in ["primary", "backup"] {
        sim.provider(id, json!({"prompt_tokens": 1000, "completion_tokens": 500, "cached_tokens": 400, "content": ANSWER})).await;
    }
    let providers = json!([
        {"id": "primary", "service": "primary", "model": "gpt-x", "weight": 1},
        {"id": "backup", "service": "backup", "model": "gpt-x", "weight": 1, "price": {"input_per_1k": 0.1, "output_per_1k": 0.2}},
    ]);
    let prices = json!({"prices": {"gpt-x": {"input_per_1k": 1.0, "output_per_1k": 2.0, "cached_input_per_1k": 0.25, "per_request": 0.01}}});
    let (client, _) = make_with(&sim, providers, json!({"strategy": "priority"}), json!({}), prices);
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.usage.unwrap().cached_tokens, 400);
    // 600 fresh input at 1.0/1k, 400 cached at 0.25/1k, 500 output at 2.0/1k, plus 0.01.
    assert!((r.cost.unwrap() - 1.71).abs() < 1e-9, "{:?}", r.cost);
    let m = client.metrics_text();
    assert!(m.contains("harness_cost_total{route=\"chat\",provider=\"primary\",model=\"gpt-x\"} 1.71"), "{m}");
    // Streamed answers are priced the same way.
    let mut s = client.chat_stream("chat", hello()).await.unwrap();
    let (_, chunks) = collect(&mut s).await.unwrap();
    assert!((chunks.last().unwrap().cost.unwrap() - 1.71).abs() < 1e-9);
    // The provider's own price wins whole: no cached rate, no per-request price of the table's.
    client.set_weight("chat", "primary", 0).unwrap();
    let r = client.chat("chat", hello()).await.unwrap();
    assert_eq!(r.provider.as_deref(), Some("backup"));
    assert!((r.cost.unwrap() - 0.2).abs() < 1e-9, "{:?}", r.cost);
}

#[test]
fn bad_prices_are_config_errors_naming_the_field() {
    let err = |top: Value| {
        let mut v = json!({"services": {"a": {"base_url": "http://127.0.0.1:1"}},
            "routes": {"chat": {"providers": [{"id": "a", "service": "a", "model": "m", "weight": 1}]}}});
        merge(&mut v, &top);
        Config::from_value(v).unwrap_err().message
    };
    let e = err(json!({"prices": {"gpt-x": {"input_per_1k": -1}}}));
    assert!(e.starts_with("prices.gpt-x.input_per_1k: expected a number >= 0, got -1"), "{e}");
    let e = err(json!({"prices": {"gpt-x": {"cached_input_per_1k": -0.5}}}));
    assert!(e.starts_with("prices.gpt-x.cached_input_per_1k: expected a number >= 0"), "{e}");
    let e = err(json!({"prices": {"gpt-x": {"per_request": "free"}}}));
    assert!(e.starts_with("prices.gpt-x.per_request: "), "{e}");
    let e = err(json!({"routes": {"chat": {"providers": [{"id": "a", "service": "a", "model": "m", "weight": 1, "price": {"per_request": -2}}]}}}));
    assert!(e.starts_with("routes.chat.providers[0].price.per_request: expected a number >= 0, got -2"), "{e}");
    let e = Config::from_str_with_format("prices:\n  gpt-x: { output_per_1k: .nan }\n", "yaml").unwrap_err().message;
    assert!(e.starts_with("prices.gpt-x.output_per_1k: "), "{e}");
}

// ---- tool calls ----

const WEATHER_ARGS: &str = r#"{"city":"Paris","unit":"celsius"}"#;

fn weather_call() -> Value {
    json!({"id": "call_1", "name": "get_weather", "arguments": WEATHER_ARGS})
}

fn tool_request() -> ChatRequest {
    let mut r = hello();
    for (k, v) in [
        ("tools", json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])),
        ("tool_choice", json!("auto")),
        ("response_format", json!({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}})),
        ("stop", json!(["END"])),
        ("seed", json!(7)),
        ("top_p", json!(0.9)),
    ] {
        r.params.insert(k.into(), v);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_the_structured_output_parameters_pass_through_and_come_back() {
    let sim = Sim::start().await;
    sim.provider("primary", json!({"content": "", "finish_reason": "tool_calls", "tool_calls": [weather_call()]})).await;
    let (client, _) = make(&sim, json!([p("primary", 1)]), json!({}), json!({}));
    let r = client.chat("chat", tool_request()).await.unwrap();
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.content, "");
    assert_eq!(r.tool_calls, [harness_core::ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: WEATHER_ARGS.into() }]);
    let body = &sim.log("primary").await["requests"][0]["body"];
    for k in ["tools", "tool_choice", "response_format", "stop", "seed", "top_p"] {
        assert_eq!(body[k], tool_request().params[k], "{k} reaches the provider as sent");
    }
    // A plain answer has no tool calls.
    sim.provider("primary", json!({})).await;
    assert!(client.chat("chat", hello()).await.unwrap().tool_calls.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_tool_call_arrives_in_pieces_and_done_carries_it_assembled() {
    let sim = Sim::start().await;
    let second = json!({"id": "call_2", "name": "get_time", "arguments": "{}"});
    sim.provider("primary", json!({"content": "Let me check.", "finish_reason": "tool_calls", "tool_calls": [weather_call(), second]})).await;
    let (client, _) = make(&sim, json!([p("primary", 1)]), json!({}), json!({}));
    let mut s = client.chat_stream("chat", tool_request()).await.unwrap();
    let (text, chunks) = collect(&mut s).await.unwrap();
    assert_eq!(text, "Let me check.");
    let pieces: Vec<&harness_core::ToolCallDelta> = chunks.iter().filter(|c| c.kind == ChatChunkKind::ToolCall).map(|c| c.tool_call.as_ref().unwrap()).collect();
    assert_eq!(pieces.len(), 6, "id and name, then the arguments in two, per call");
    assert_eq!((pieces[0].index, pieces[0].id.as_deref(), pieces[0].name.as_deref()), (0, Some("call_1"), Some("get_weather")));
    assert_eq!(pieces[1..3].iter().map(|p| p.arguments.as_str()).collect::<String>(), WEATHER_ARGS);
    assert_eq!(pieces[3].index, 1);
    let done = chunks.last().unwrap();
    assert_eq!((done.kind, done.finish_reason.as_deref()), (ChatChunkKind::Done, Some("tool_calls")));
    assert_eq!(serde_json::to_value(&done.tool_calls).unwrap(), json!([weather_call(), second]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_stream_cut_mid_call_is_replayed_unseen_in_hold_mode() {
    let sim = Sim::start().await;
    // Cut after the call's id and first half of its arguments: nothing of it may reach the caller.
    sim.provider("primary", json!({"content": "", "finish_reason": "tool_calls", "tool_calls": [weather_call()], "stream": {"cut_after": 2}})).await;
    sim.provider("backup", json!({"content": "", "finish_reason": "tool_calls", "tool_calls": [weather_call()]})).await;
    let providers = json!([p("primary", 1), {"id": "backup", "service": "backup", "model": "b", "weight": 1, "accepts_prefill": true}]);
    let (client, events) = make(&sim, providers, json!({"strategy": "priority"}), json!({}));
    let mut s = client.chat_stream("chat", tool_request()).await.unwrap();
    let (_, chunks) = collect(&mut s).await.unwrap();
    assert!(chunks.iter().all(|c| c.provider.as_deref() == Some("backup")), "{chunks:?}");
    assert!(chunks.iter().all(|c| c.kind != ChatChunkKind::Restart));
    let args: String = chunks.iter().filter_map(|c| c.tool_call.as_ref()).map(|t| t.arguments.as_str()).collect();
    assert_eq!(args, WEATHER_ARGS, "the call's pieces once, from the backup only");
    assert_eq!(serde_json::to_value(&chunks.last().unwrap().tool_calls).unwrap(), json!([weather_call()]));
    // No prefill: a prefill continues text, not a tool call.
    let body = &sim.log("backup").await["requests"][0]["body"];
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    flushed(&client).await;
    assert_eq!(events.of("stream_restarted")[0]["mode"], "hidden");
}
