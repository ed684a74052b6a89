//! `harness chaos --config FILE [--requests N] [--concurrency C] [--seed S]`: drives traffic
//! through a config's services and routes, pointed at the embedded test upstream, with its
//! `faults:` switched on, and prints what the pipeline made of it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::routing::config::AdapterKind;
use harness_core::{ChatRequest, Client, ClientOptions, Config, Event, EventSink, Request};
use serde_json::json;

pub const USAGE: &str = "harness chaos --config FILE [--requests N] [--concurrency C] [--seed S]";

struct Options {
    config: String,
    requests: usize,
    concurrency: usize,
    seed: Option<u64>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options { config: String::new(), requests: 1000, concurrency: 16, seed: None };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag}: a value is required"))?;
        let number = || value.parse::<u64>().map_err(|_| format!("{flag}: expected a positive integer, got {value:?}"));
        match flag.as_str() {
            "--config" => o.config = value.clone(),
            "--requests" => o.requests = number()?.clamp(1, 10_000_000) as usize,
            "--concurrency" => o.concurrency = number()?.clamp(1, 10_000) as usize,
            "--seed" => o.seed = Some(number()?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if o.config.is_empty() {
        return Err("--config is required".into());
    }
    Ok(o)
}

/// Counts breaker transitions as they happen.
#[derive(Default)]
struct Breakers {
    transitions: AtomicU64,
    opened: AtomicU64,
}

impl EventSink for Breakers {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        if let Event::BreakerStateChanged { to, .. } = e {
            self.transitions.fetch_add(1, Ordering::Relaxed);
            if *to == "open" {
                self.opened.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// One kind of call the run makes.
enum Target {
    Service { service: String, method: String, path: String },
    Route(String),
}

pub fn run(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\nusage: {USAGE}");
            return 2;
        }
    };
    let mut config = match Config::from_path(&o.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let upstream = rt.block_on(harness_upstream::start()).expect("start the embedded upstream");
    let url = upstream.url();
    // Route providers speak the chat API: the upstream simulates one per service.
    let mut providers: Vec<String> = Vec::new();
    for r in config.routes.values().filter(|r| r.adapter == AdapterKind::OpenaiCompatible) {
        providers.extend(r.providers.iter().map(|p| p.service.clone()));
    }
    for (name, svc) in config.services.iter_mut() {
        svc.base_url = if providers.contains(name) { format!("{url}/llm/{name}") } else { url.clone() };
        svc.auth = None;
    }
    let seed = o.seed.or(config.faults.seed).unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7));
    config.faults.enabled = true;
    config.faults.seed = Some(seed);
    config.mock.enabled = false;
    config.log.enabled = false;
    let targets = targets(&config);
    if targets.is_empty() {
        eprintln!("{}: no services or routes to drive", o.config);
        return 1;
    }
    let breakers = Arc::new(Breakers::default());
    let sink: Arc<dyn EventSink> = breakers.clone();
    let client = match Client::with_options(config, ClientOptions { sinks: vec![sink], ..Default::default() }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    println!("chaos: {} requests, {} at a time, seed {seed}, against the embedded upstream at {url}", o.requests, o.concurrency);
    let started = Instant::now();
    let results = rt.block_on(drive(&client, Arc::new(targets), o.requests, o.concurrency));
    let wall = started.elapsed();
    report(&client, &results, wall, &breakers);
    0
}

/// Every endpoint a fault rule names (its variables filled in), else each service's `/chaos/{n}`;
/// each route once.
fn targets(config: &Config) -> Vec<Target> {
    let mut out = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for rule in &config.faults.rules {
        if let Some(e) = &rule.endpoint {
            let (method, tpl) = e.split_once(' ').unwrap_or(("GET", e));
            let path: String = tpl.split('/').map(|s| if s.starts_with('{') { "1" } else { s }).collect::<Vec<_>>().join("/");
            if covered.insert((rule.service.clone(), method.to_string(), path.clone())) {
                out.push(Target::Service { service: rule.service.clone(), method: method.to_ascii_uppercase(), path });
            }
        }
    }
    let behind_routes: Vec<&String> = config.routes.values().flat_map(|r| r.providers.iter().map(|p| &p.service)).collect();
    for name in config.services.keys() {
        if !behind_routes.contains(&name) && !covered.iter().any(|(s, _, _)| s == name) {
            out.push(Target::Service { service: name.clone(), method: "GET".into(), path: "/chaos/{n}".into() });
        }
    }
    out.extend(config.routes.keys().map(|r| Target::Route(r.clone())));
    out
}

struct Outcome {
    error: Option<&'static str>,
    attempts: u32,
    ms: f64,
}

async fn drive(client: &Client, targets: Arc<Vec<Target>>, total: usize, concurrency: usize) -> Vec<Outcome> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(total) {
        let (client, targets, next) = (client.clone(), targets.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                if n >= total {
                    return out;
                }
                let t0 = Instant::now();
                let (error, attempts) = match &targets[n % targets.len()] {
                    Target::Service { service, method, path } => {
                        let mut req = Request::new(service.clone(), method.clone(), path.replace("{n}", &n.to_string()));
                        if method != "GET" {
                            req.body = harness_core::Body::Json(json!({"n": n}));
                            req.idempotency_key = Some(format!("chaos-{n}"));
                        }
                        match client.request(req).await {
                            Ok(r) => (None, r.attempts),
                            Err(e) => (Some(e.name()), e.attempts),
                        }
                    }
                    Target::Route(route) => match client.chat(route, ChatRequest::new(json!([{"role": "user", "content": format!("ping {n}")}]))).await {
                        Ok(r) => (None, r.attempts),
                        Err(e) => (Some(e.name()), e.attempts),
                    },
                };
                out.push(Outcome { error, attempts, ms: t0.elapsed().as_secs_f64() * 1000.0 });
            }
        }));
    }
    let mut all = Vec::with_capacity(total);
    for w in workers {
        all.extend(w.await.unwrap_or_default());
    }
    all
}

fn report(client: &Client, results: &[Outcome], wall: Duration, breakers: &Breakers) {
    let n = results.len().max(1);
    let ok = results.iter().filter(|r| r.error.is_none()).count();
    let attempts: u64 = results.iter().map(|r| u64::from(r.attempts)).sum();
    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for e in results.iter().filter_map(|r| r.error) {
        *errors.entry(e).or_default() += 1;
    }
    let mut faults: BTreeMap<String, f64> = BTreeMap::new();
    for line in client.metrics_text().lines().filter(|l| l.starts_with("harness_faults_injected_total{")) {
        let kind = line.split("fault=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?").to_string();
        *faults.entry(kind).or_default() += line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    }
    let mut ms: Vec<f64> = results.iter().map(|r| r.ms).collect();
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms.get(((ms.len() as f64 * p) as usize).min(ms.len().saturating_sub(1))).copied().unwrap_or(0.0);
    println!();
    println!("| what | value |");
    println!("|---|---:|");
    println!("| requests | {} in {:.1} s ({:.0}/s) |", results.len(), wall.as_secs_f64(), results.len() as f64 / wall.as_secs_f64());
    println!("| success | {ok} ({:.1}%) |", ok as f64 * 100.0 / n as f64);
    for (kind, count) in &errors {
        println!("| {kind} | {count} ({:.1}%) |", *count as f64 * 100.0 / n as f64);
    }
    println!("| attempts | {attempts} ({} retries and failovers) |", attempts.saturating_sub(results.len() as u64));
    for (kind, count) in &faults {
        println!("| faults injected: {kind} | {count} |");
    }
    println!("| breaker transitions | {} ({} to open) |", breakers.transitions.load(Ordering::Relaxed), breakers.opened.load(Ordering::Relaxed));
    println!("| latency p50 / p95 / p99 / max | {:.1} / {:.1} / {:.1} / {:.1} ms |", pct(0.50), pct(0.95), pct(0.99), ms.last().copied().unwrap_or(0.0));
}
