//! `harness`: `demo` drives traffic through injected failures against the embedded
//! test upstream and narrates what the pipeline did; `chaos` drives a config's own faults
//! against it and prints a summary; `check-config FILE` validates a config; `types` and
//! `codegen` write generated host files; `config` pushes, promotes and rolls back the
//! fleet's config in Redis.

mod chaos;
mod codegen;
mod fleet;
mod types;

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{Client, Config, Event, EventSink, Request};
use serde_json::json;

const USAGE: &str = "usage: harness demo | harness check-config FILE | harness chaos --config FILE [--requests N] [--concurrency C] [--seed S] | harness serve --config FILE [--listen ADDR] | harness types [--check] [--schema] | harness codegen --spec FILE --lang python|typescript|kotlin --out DIR [--service NAME] [--package NAME] [--check] | harness config push|promote|rollback|status|history ... (harness config for its usage)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("demo") | None => demo(),
        Some("chaos") => chaos::run(&args[1..]),
        Some("serve") => serve(&args[1..]),
        Some("types") => types::run(&args[1..]),
        Some("codegen") => codegen::run(&args[1..]),
        Some("config") => fleet::run(&args[1..]),
        Some("check-config") => match args.get(1) {
            Some(path) => match Config::from_path(path) {
                Ok(c) => {
                    println!("ok: {} service(s): {}", c.services.len(), c.services.keys().cloned().collect::<Vec<_>>().join(", "));
                    if !c.routes.is_empty() {
                        println!("    {} route(s): {}", c.routes.len(), c.routes.keys().cloned().collect::<Vec<_>>().join(", "));
                    }
                    0
                }
                Err(e) => {
                    eprintln!("{e}");
                    1
                }
            },
            None => {
                eprintln!("{USAGE}");
                2
            }
        },
        Some(_) => {
            eprintln!("{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

/// `harness serve --config FILE [--listen 127.0.0.1:8787]`: the gateway, until SIGTERM.
fn serve(args: &[String]) -> i32 {
    let (mut config, mut listen) = (None, "127.0.0.1:8787".to_string());
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match (flag.as_str(), it.next()) {
            ("--config", Some(v)) => config = Some(v.clone()),
            ("--listen", Some(v)) => listen = v.clone(),
            _ => {
                eprintln!("{USAGE}");
                return 2;
            }
        }
    }
    let Some(config) = config else {
        eprintln!("--config is required\n{USAGE}");
        return 2;
    };
    match harness_gateway::run(&config, &listen) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// Prints each request as one narrated line, next to the JSON record.
struct Narrator {
    start: Instant,
}

impl EventSink for Narrator {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        let Event::RequestFinished(r) = event else { return Ok(()) };
        let outcome = match (r.status, r.error_kind) {
            (Some(s), None) => format!("{s}"),
            (Some(s), Some(k)) => format!("{k} {s}"),
            (None, Some(k)) => k.to_string(),
            (None, None) => "?".into(),
        };
        let retries = if r.retry_count > 0 { format!(", {} retr{}", r.retry_count, if r.retry_count == 1 { "y" } else { "ies" }) } else { String::new() };
        println!(
            "  t={:>5.2}s  {:<6} {:<22} -> {:<24} {:>7.1} ms  attempts={}{}  breaker={}",
            self.start.elapsed().as_secs_f64(),
            r.method,
            r.endpoint,
            outcome,
            r.duration_ms,
            r.attempts,
            retries,
            r.breaker
        );
        Ok(())
    }
}

fn demo() -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    match rt.block_on(run_demo()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("demo failed: {e}");
            1
        }
    }
}

async fn script(admin: &reqwest::Client, base: &str, name: &str, steps: serde_json::Value) -> Result<(), String> {
    let body = json!({ "steps": steps }).to_string();
    admin.put(format!("{base}/__admin/script/{name}")).body(body).send().await.map_err(|e| e.to_string())?;
    Ok(())
}

async fn provider(admin: &reqwest::Client, base: &str, name: &str, spec: serde_json::Value) -> Result<(), String> {
    let r = admin.post(format!("{base}/__admin/provider/{name}")).body(spec.to_string()).send().await.map_err(|e| e.to_string())?;
    if r.status().is_success() {
        Ok(())
    } else {
        Err(format!("the upstream refused provider {name}"))
    }
}

async fn run_demo() -> Result<(), String> {
    let upstream = harness_upstream::start().await.map_err(|e| e.to_string())?;
    let base = upstream.url();
    // The sample config, pointed at the embedded upstream, with short timings so the demo takes seconds.
    let mut config = Config::from_str_with_format(include_str!("../../examples/harness.yaml"), "yaml").map_err(|e| e.to_string())?;
    config.log.enabled = false;
    let orders = config.services.get_mut("orders").ok_or("sample config lacks `orders`")?;
    orders.base_url = base.clone();
    orders.timeouts.response_ms = 300;
    orders.timeouts.request_ms = 2000;
    orders.retry.max_retries = 2;
    orders.retry.base_delay_ms = 50;
    orders.breaker.failure_threshold = 3;
    orders.breaker.open_ms = 1000;
    orders.bulkhead.max_concurrency = 4;
    // The route's two model providers are simulated by the upstream (`/llm/{name}`), with demo keys.
    for (name, sim) in [("openai-a", "openai-a"), ("glm-b", "glm-b")] {
        let svc = config.services.get_mut(name).ok_or("sample config lacks a provider service")?;
        svc.base_url = format!("{base}/llm/{sim}");
        svc.timeouts.idle_ms = 500;
        svc.auth = Some(serde_json::from_value(json!({"type": "bearer", "token": {"value": format!("demo-key-{name}")}})).map_err(|e| e.to_string())?);
    }
    let client = Client::new(config).map_err(|e| e.to_string())?;
    client.add_listener(Arc::new(Narrator { start: Instant::now() }));
    let _ = rustls_default();
    // Only the embedded loopback upstream (plain http): no CA store needed, none loaded.
    let admin = reqwest::Client::builder().tls_certs_only(Vec::new()).build().map_err(|e| e.to_string())?;

    println!("Harness demo: an embedded fault-injecting upstream at {base}, service `orders`.");
    println!("Policies: 2 retries (idempotent only), breaker opens after 3 failures for 1 s, bulkhead of 4.\n");

    println!("1. Healthy upstream: plain successes.");
    script(&admin, &base, "orders", json!([{ "json": {"id": 1, "state": "paid"} }])).await?;
    for id in 1..=3 {
        let _ = client.request(Request::new("orders", "GET", format!("/s/orders/{id}"))).await;
    }

    client.flush();
    println!("\n2. Transient 503s and a slow answer: GET retries with backoff and succeeds.");
    script(&admin, &base, "orders", json!([{ "status": 503 }, { "delay_ms": 500 }, { "json": {"ok": true} }])).await?;
    let _ = client.request(Request::new("orders", "GET", "/s/orders/7")).await;

    client.flush();
    println!("\n3. A POST without an idempotency key is never retried; with one it is.");
    script(&admin, &base, "orders", json!([{ "status": 503 }, { "status": 201, "json": {"id": 9} }])).await?;
    let mut post = Request::new("orders", "POST", "/s/orders");
    post.body = harness_core::Body::Json(json!({"sku": "A-1"}));
    let _ = client.request(post.clone()).await;
    script(&admin, &base, "orders", json!([{ "status": 503 }, { "status": 201, "json": {"id": 9} }])).await?;
    post.idempotency_key = Some("order-A-1".into());
    let _ = client.request(post).await;

    client.flush();
    println!("\n4. The upstream goes down: failures open the breaker, then calls fail fast without a send.");
    script(&admin, &base, "orders", json!([{ "status": 503, "html": "<title>503 Service Unavailable</title>" }])).await?;
    for _ in 0..4 {
        let _ = client.request(Request::new("orders", "GET", "/s/orders/11")).await;
    }
    client.flush();
    println!("   breaker for GET /s/orders/{{id}}: {}", client.breaker_state("orders", "GET", "/s/orders/11", None));

    client.flush();
    println!("\n5. The upstream recovers; after the open period one probe goes through and closes the breaker.");
    script(&admin, &base, "orders", json!([{ "json": {"ok": true} }])).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..2 {
        let _ = client.request(Request::new("orders", "GET", "/s/orders/11")).await;
    }

    client.flush();
    println!("\n6. A burst of 8 slow calls against a bulkhead of 4: the excess fails fast.");
    script(&admin, &base, "orders", json!([{ "delay_ms": 200, "json": {"ok": true} }])).await?;
    let burst: Vec<_> = (0..8).map(|_| harness_core::Operation::Request(client.clone(), Request::new("orders", "GET", "/s/orders/search")).start().spawn().expect("spawn")).collect();
    for t in burst {
        let _ = t.await;
    }

    client.flush();
    println!("\n7. A hostile upstream and hostile input: nothing leaks, nothing is followed, nothing is buffered past the limit.");
    script(&admin, &base, "evil", json!([{ "status": 307, "headers": {"location": "http://localhost:{port}/steal"} }])).await?;
    let mut req = Request::new("orders", "POST", "/s/evil/login");
    req.headers.push(("Authorization".into(), "Bearer tok-demo-123456".into()));
    if let Ok(r) = client.request(req).await {
        println!("   a 307 to another host is returned, not followed: status {}, location {}", r.status, r.header("location").unwrap_or("-"));
    }
    script(&admin, &base, "evil", json!([{ "status": 401, "json": {"message": "token tok-demo-123456 is revoked"} }])).await?;
    let mut req = Request::new("orders", "GET", "/s/evil/me");
    req.headers.push(("Authorization".into(), "Bearer tok-demo-123456".into()));
    if let Err(e) = client.request(req).await {
        println!("   a downstream echoing the token: {}", e.message);
    }
    if let Err(e) = client.request(Request::new("orders", "GET", "/s/evil/%2e%2e/%2e%2e/admin")).await {
        println!("   a path built from user input: {e}");
    }
    script(&admin, &base, "evil", json!([{ "body_bytes": 200_000_000u64 }])).await?;
    if let Err(e) = client.request(Request::new("orders", "GET", "/s/evil/export")).await {
        println!("   a 200 MB answer: {}: {}", e.name(), e.message);
    }

    client.flush();
    println!("\n8. A live reload: the breaker threshold changes without a new client; state carries over.");
    let before = client.config_version();
    let mut next = (*client.config()).clone();
    next.services.get_mut("orders").ok_or("no orders")?.breaker.failure_threshold = 10;
    let after = client.reload(next).map_err(|e| e.to_string())?;
    println!("   config_version {before} -> {after}; breaker for GET /s/orders/{{id}} still {}", client.breaker_state("orders", "GET", "/s/orders/11", None));

    client.flush();
    println!("\n9. A streamed body: chunks are handed over as they arrive, nothing is read ahead.");
    script(&admin, &base, "feed", json!([{ "chunks": [
        {"data": "data: one\n\n"}, {"data": "data: two\n\n", "delay_ms": 150}, {"data": "data: three\n\n", "delay_ms": 150}
    ] }])).await?;
    let mut stream = client.stream(Request::new("orders", "GET", "/s/feed/events")).await.map_err(|e| e.to_string())?;
    let opened = Instant::now();
    while let Some(chunk) = stream.next_chunk().await.map_err(|e| e.to_string())? {
        println!("   +{:>4} ms  {:?}", opened.elapsed().as_millis(), String::from_utf8_lossy(&chunk).trim());
    }

    client.flush();
    println!("\n10. Credentials: an OAuth2 token fetched once for many calls; a 401 refreshes it and replays the POST once.");
    script(&admin, &base, "billing-token", json!([
        {"json": {"access_token": "demo-token-1", "expires_in": 3600}},
        {"json": {"access_token": "demo-token-2", "expires_in": 3600}}
    ])).await?;
    script(&admin, &base, "billing", json!([{"status": 200, "times": 3}, {"status": 401}, {"status": 201}])).await?;
    let mut with_auth = (*client.config()).clone();
    let billing: harness_core::config::ServiceConfig = serde_json::from_value(json!({
        "base_url": base,
        "auth": {
            "type": "oauth2_client_credentials",
            "token_url": format!("{base}/s/billing-token/oauth/token"),
            "client_id": {"value": "demo-client"},
            "client_secret": {"value": "demo-secret"}
        }
    })).map_err(|e| e.to_string())?;
    with_auth.services.insert("billing".into(), billing);
    client.reload(with_auth).map_err(|e| e.to_string())?;
    for _ in 0..3 {
        let _ = client.request(Request::new("billing", "GET", "/s/billing/invoices")).await;
    }
    let mut post = Request::new("billing", "POST", "/s/billing/invoices");
    post.body = harness_core::Body::Json(json!({"amount": 42}));
    let _ = client.request(post).await;
    client.flush();
    let log_bytes = admin
        .get(format!("{base}/__admin/log/billing-token"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .bytes()
        .await
        .map_err(|e| e.to_string())?;
    let log: serde_json::Value = serde_json::from_slice(&log_bytes).map_err(|e| e.to_string())?;
    let token_calls = log["requests"].as_array().map(Vec::len).unwrap_or(0);
    for c in client.credentials_state() {
        println!("   credentials for {}: {}, {token_calls} token calls for 4 requests (the token itself is never shown)", c.service, c.status);
    }

    client.flush();
    println!("\n11. Routing: `chat` is served by two model providers; the primary fails, the backup answers, priced.");
    provider(&admin, &base, "openai-a", json!({"fail_rate": 1.0, "fail_status": 503})).await?;
    provider(&admin, &base, "glm-b", json!({"content": "The ticket asks for a refund of order 42.", "prompt_tokens": 120, "completion_tokens": 12})).await?;
    let messages = json!([{"role": "user", "content": "Summarise this ticket"}]);
    for _ in 0..3 {
        match client.chat("chat", harness_core::ChatRequest::new(messages.clone())).await {
            Ok(r) => println!(
                "   {:?} from {} ({}), attempts {:?}, cost {:.6}",
                r.content,
                r.provider.as_deref().unwrap_or("-"),
                r.model.as_deref().unwrap_or("-"),
                r.attempts_by_provider,
                r.cost.unwrap_or(0.0)
            ),
            Err(e) => println!("   {e}"),
        }
    }
    for p in client.routing_state("chat").map_err(|e| e.to_string())?.providers {
        println!("   {}: weight {} -> effective {}, breaker {}, last error {:?}", p.id, p.weight, p.effective_weight, p.breaker, p.last_error.unwrap_or_default());
    }
    client.flush();
    println!("\n12. A streamed answer cut mid-way is restarted on the other provider; the caller sees only a whole answer.");
    provider(&admin, &base, "openai-a", json!({"reset": true, "content": "Refund approved for order 42.", "stream": {"cut_after": 2}})).await?;
    provider(&admin, &base, "glm-b", json!({"reset": true, "content": "Refund approved for order 42."})).await?;
    let mut prio = (*client.config()).clone();
    prio.routes.get_mut("chat").ok_or("no route")?.strategy = harness_core::routing::config::Strategy::Priority;
    client.reload(prio).map_err(|e| e.to_string())?;
    // The breaker opened in step 11; wait it out so the primary is tried first again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut stream = client.chat_stream("chat", harness_core::ChatRequest::new(messages)).await.map_err(|e| e.to_string())?;
    let mut text = String::new();
    while let Some(chunk) = stream.next().await.map_err(|e| e.to_string())? {
        match chunk.kind {
            harness_core::ChatChunkKind::Delta => text.push_str(&chunk.content),
            harness_core::ChatChunkKind::Done => println!("   {text:?} from {}, usage {:?}", chunk.provider.unwrap_or_default(), chunk.usage),
            harness_core::ChatChunkKind::Restart => text.clear(),
            harness_core::ChatChunkKind::ToolCall => {}
        }
    }

    client.flush();
    println!("\nMetrics (Prometheus text, excerpt):");
    for line in client.metrics_text().lines().filter(|l| {
        l.starts_with("harness_requests_total")
            || l.starts_with("harness_breaker_transitions_total")
            || l.starts_with("harness_retries_total")
            || l.starts_with("harness_cost_total")
            || l.starts_with("harness_route_failovers_total")
    }) {
        println!("  {line}");
    }
    client.flush();
    println!("\nEach request above is also one JSON record (log.enabled: true prints them on stderr).");
    Ok(())
}

fn rustls_default() -> bool {
    rustls::crypto::ring::default_provider().install_default().is_ok()
}
