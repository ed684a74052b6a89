//! What an adapter's translation costs per request: the same chat through a route whose
//! provider is reached as plain pass-through (`adapter: http`, the body sent and the answer
//! returned as they are), as `openai-compatible`, and as `anthropic` and `gemini` (request
//! translated, answer parsed and rendered back in OpenAI's shape), side by side against one
//! loopback upstream in a child process, at concurrency 64 (and 1), 5 interleaved rounds.
//! Prints a table of medians with ranges and the CPU per request over pass-through.
//! Run: `cargo run --release -p harness-bench --bin harness-adapter-bench`. Env:
//! BENCH_REQUESTS (per cell, default 20000), BENCH_ROUNDS (default 5).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{ChatRequest, Client, Request};
use serde_json::json;

fn cpu_time() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Clone, Copy, Default)]
struct Row {
    rps: f64,
    p50_us: f64,
    cpu_us_per_req: f64,
}

async fn measure(client: &Client, kind: &'static str, concurrency: usize, total: usize) -> Row {
    let client = Arc::new(client.clone());
    let one = move |c: Arc<Client>| async move {
        let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello, please."}]);
        match kind {
            "http" => {
                let mut req = Request::new("r-http", "POST", "/v1/chat/completions");
                req.body = harness_core::Body::Json(json!({"model": "pass-model", "messages": messages, "max_tokens": 64}));
                c.request(req).await.map(|r| r.status == 200).unwrap_or(false)
            }
            route => {
                let mut req = ChatRequest::new(messages);
                req.params.insert("max_tokens".into(), json!(64));
                c.chat(route, req).await.map(|r| !r.content.is_empty()).unwrap_or(false)
            }
        }
    };
    for _ in 0..concurrency * 2 {
        assert!(one(client.clone()).await, "a warm-up request failed ({kind})");
    }
    let per = total / concurrency;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..concurrency {
        let c = client.clone();
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            for _ in 0..per {
                let s = Instant::now();
                assert!(one(c.clone()).await, "a bench request failed ({kind})");
                lat.push(s.elapsed().as_secs_f64() * 1e6);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.unwrap());
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu0).as_secs_f64() * 1e6;
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = lat.len();
    Row { rps: n as f64 / wall, p50_us: lat[n / 2], cpu_us_per_req: cpu / n as f64 }
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn main() {
    let total: usize = std::env::var("BENCH_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    if std::env::args().any(|a| a == "--upstream") {
        // The upstream, in its own process so its CPU is not counted as the client's.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let u = harness_upstream::start().await.unwrap();
            println!("{}", u.url());
            let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
        });
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap()).arg("--upstream").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the upstream");
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
    let url = url.trim().to_string();

    let handle = harness_core::runtime::handle().expect("runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let admin = reqwest::Client::new();
    for name in ["pass", "oa", "claude", "gem"] {
        let spec = json!({"content": "Hello from the provider, in a few words", "prompt_tokens": 20, "completion_tokens": 9});
        let r = handle.block_on(admin.post(format!("{url}/__admin/provider/{name}")).body(spec.to_string()).send()).unwrap();
        assert_eq!(r.status(), 200);
    }
    let svc = |name: &str, header: Option<&str>| {
        let mut s = json!({"base_url": format!("{url}/llm/{name}"), "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 256}});
        if let Some(h) = header {
            s["auth"] = json!({"type": "header", "header": h, "keys": [{"value": "bench-key"}]});
        }
        s
    };
    let route = |adapter: &str, id: &str, provider_adapter: Option<&str>| {
        let mut p = json!({"id": id, "service": id, "model": format!("{id}-model"), "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 2.0}});
        if let Some(a) = provider_adapter {
            p["adapter"] = json!(a);
        }
        json!({"adapter": adapter, "providers": [p]})
    };
    let client = Client::from_value(json!({
        "client": {"name": "bench"}, "log": {"enabled": false},
        "services": {"pass": svc("pass", None), "oa": svc("oa", None), "claude": svc("claude", Some("x-api-key")), "gem": svc("gem", Some("x-goog-api-key"))},
        "routes": {
            "r-http": route("http", "pass", None),
            "r-openai": route("openai-compatible", "oa", None),
            "r-anthropic": route("openai-compatible", "claude", Some("anthropic")),
            "r-gemini": route("openai-compatible", "gem", Some("gemini")),
        }
    }))
    .unwrap();
    // Pass-through: a plain request naming the `http` route (routing, no translation).
    let kinds: [(&str, &'static str); 4] = [("pass-through (adapter: http)", "http"), ("openai-compatible", "r-openai"), ("anthropic", "r-anthropic"), ("gemini", "r-gemini")];
    // BENCH_ONLY=anthropic (a label's first word): that row alone (for a profiler).
    let only = std::env::var("BENCH_ONLY").ok();
    let kinds: Vec<(&str, &'static str)> = kinds.into_iter().filter(|(l, _)| only.as_deref().is_none_or(|o| l.starts_with(o) || *l == "pass-through (adapter: http)")).collect();
    println!("Adapter translation cost: one chat per request through a one-provider route, loopback upstream in a child process,");
    println!("{total} requests per cell, {rounds} interleaved rounds, medians (min-max)\n");
    for concurrency in [64usize, 1] {
        let n = if concurrency == 1 { total / 5 } else { total };
        let mut rows: Vec<Vec<Row>> = vec![Vec::new(); kinds.len()];
        for _ in 0..rounds {
            for (i, (_, kind)) in kinds.iter().enumerate() {
                rows[i].push(handle.block_on(measure(&client, kind, concurrency, n)));
            }
        }
        println!("c={concurrency}");
        println!("| format | req/s | vs pass-through | p50 µs | CPU µs / req | CPU over pass-through µs / req |");
        println!("|---|---:|---:|---:|---:|---:|");
        let base_cpu: Vec<f64> = rows[0].iter().map(|r| r.cpu_us_per_req).collect();
        let base_rps: Vec<f64> = rows[0].iter().map(|r| r.rps).collect();
        for (i, (label, _)) in kinds.iter().enumerate() {
            let rps = stats(&rows[i].iter().map(|r| r.rps).collect::<Vec<_>>());
            let ratio = stats(&rows[i].iter().zip(&base_rps).map(|(r, b)| r.rps / b).collect::<Vec<_>>());
            let p50 = stats(&rows[i].iter().map(|r| r.p50_us).collect::<Vec<_>>());
            let cpu = stats(&rows[i].iter().map(|r| r.cpu_us_per_req).collect::<Vec<_>>());
            let over = stats(&rows[i].iter().zip(&base_cpu).map(|(r, b)| r.cpu_us_per_req - b).collect::<Vec<_>>());
            println!(
                "| {label} | {:.0} ({:.0}-{:.0}) | {:.2}× ({:.2}-{:.2}) | {:.0} | {:.1} ({:.1}-{:.1}) | {:+.1} ({:+.1}…{:+.1}) |",
                rps.0, rps.1, rps.2, ratio.0, ratio.1, ratio.2, p50.0, cpu.0, cpu.1, cpu.2, over.0, over.1, over.2
            );
        }
        println!();
    }
    drop(child.stdin.take());
    let _ = child.wait();
}
