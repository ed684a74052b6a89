//! Measures the full Harness pipeline (retry, breaker, bulkhead, metrics and the
//! log line on) against plain reqwest on the same loopback upstream, side by side
//! in one run, at concurrency 1 and 64. Prints a table; run via `bench/run.sh`.
//!
//! The upstream runs in a child process so its CPU is not counted as the client's.
//! `BENCH_UPSTREAM=http://addr` uses a running one instead (`bench/compare.sh` points a base
//! and a current build at the same upstream); with `BENCH_ONLY=harness` the reqwest rows are skipped.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{Client, Request};
use serde_json::json;

fn cpu_time() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Clone, Copy)]
struct Row {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_ms_per_1k: f64,
}

async fn measure<F, Fut>(concurrency: usize, total: usize, call: F) -> Row
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    measure_after(concurrency * 4, concurrency, total, call).await
}

/// `measure`, after `warm_up` calls one at a time (to fill the pool).
async fn measure_after<F, Fut>(warm_up: usize, concurrency: usize, total: usize, call: F) -> Row
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let call = Arc::new(call);
    for _ in 0..warm_up {
        call().await;
    }
    let per_worker = total / concurrency;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                let s = Instant::now();
                assert!(call().await, "a bench request failed");
                lat.push(s.elapsed().as_secs_f64() * 1e6);
            }
            lat
        }));
    }
    let mut lat = Vec::with_capacity(total);
    for h in handles {
        lat.extend(h.await.unwrap());
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu0).as_secs_f64() * 1000.0;
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = lat.len();
    Row { rps: n as f64 / wall, p50_us: lat[n / 2], p99_us: lat[n * 99 / 100], cpu_ms_per_1k: cpu / n as f64 * 1000.0 }
}

impl Row {
    fn json(&self) -> serde_json::Value {
        json!({"rps": self.rps, "p50_ms": self.p50_us / 1000.0, "p99_ms": self.p99_us / 1000.0, "cpu_ms_per_1k": self.cpu_ms_per_1k})
    }
}

/// `n` requests in flight through a service with room for all of them: one warm-up pass opens
/// the connections, then `rounds` passes of 5 requests per caller. Failures are counted (not
/// fatal), and the bulkhead's permits must all be back at the end.
fn in_flight(handle: &tokio::runtime::Handle, url: &str, n: usize, rounds: usize) -> serde_json::Value {
    let client = Client::from_value(json!({
        "client": {"name": "bench"}, "log": {"enabled": false},
        "services": {"bench": {"base_url": url, "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 20000},
            "timeouts": {"connect_ms": 5000, "response_ms": 30000, "request_ms": 60000}}}
    }))
    .unwrap();
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let run = |total: usize| {
        let (c, errors) = (client.clone(), errors.clone());
        handle.block_on(measure_after(0, n, total, move || {
            let (c, errors) = (c.clone(), errors.clone());
            async move {
                if c.request(Request::new("bench", "GET", "/bench")).await.is_err() {
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                true
            }
        }))
    };
    run(n);
    errors.store(0, std::sync::atomic::Ordering::Relaxed);
    let rows: Vec<Row> = (0..rounds).map(|_| run(n * 5)).collect();
    let errors = errors.load(std::sync::atomic::Ordering::Relaxed);
    let text = client.metrics_text();
    let leaked: i64 = text
        .lines()
        .find(|l| l.starts_with("harness_bulkhead_permits_in_use{service=\"bench\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map_or(-1, |v| v as i64);
    println!(
        "\nharness at {n} in flight: {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs, CPU {:.1} ms/1k, errors {errors}, permits left in use {leaked}",
        median(&rows, |r| r.rps),
        median(&rows, |r| r.p50_us),
        median(&rows, |r| r.p99_us),
        median(&rows, |r| r.cpu_ms_per_1k)
    );
    json!({"client": "harness", "concurrency": n, "errors": errors, "leaked_permits": leaked, "rounds": rows.iter().map(Row::json).collect::<Vec<_>>()})
}

fn median(rows: &[Row], f: impl Fn(&Row) -> f64) -> f64 {
    let mut v: Vec<f64> = rows.iter().map(f).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--upstream") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let u = harness_upstream::start().await.unwrap();
            println!("{}", u.url());
            // Serve until the parent closes stdin.
            let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
        });
        return;
    }
    let total: usize = std::env::var("BENCH_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    // BENCH_UPSTREAM=http://addr: a running upstream (bench/compare.sh runs two builds against one).
    let (mut child, url) = match std::env::var("BENCH_UPSTREAM") {
        Ok(u) => (None, u.trim().trim_end_matches('/').to_string()),
        Err(_) => {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .arg("--upstream")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the upstream");
            let mut url = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
            (Some(child), url.trim().to_string())
        }
    };

    let handle = harness_core::runtime::handle().expect("runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plain = reqwest::Client::builder().tcp_nodelay(true).no_proxy().pool_max_idle_per_host(1024).build().unwrap();
    let harness = Client::from_value(json!({
        "client": {"name": "bench"},
        "log": {"enabled": std::env::var("BENCH_LOG").map(|v| v != "0").unwrap_or(true)},
        "services": {"bench": {"base_url": url, "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 256}}}
    }))
    .unwrap();

    println!("Harness core vs plain reqwest, loopback upstream in a child process, {total} requests per cell, median of {rounds} interleaved rounds");
    println!("(full pipeline: retry, breaker, bulkhead, metrics and the JSON log line on; log lines go to stderr)\n");
    println!("| client | concurrency | req/s | p50 µs | p99 µs | CPU ms / 1k req |");
    println!("|---|---:|---:|---:|---:|---:|");
    let levels: Vec<usize> = match std::env::var("BENCH_CONCURRENCY") {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 64],
    };
    let mut json_rows = Vec::new();
    for concurrency in levels {
        let n = if concurrency == 1 { total / 4 } else { total };
        let mut plain_rows = Vec::new();
        let mut harness_rows = Vec::new();
        let only = std::env::var("BENCH_ONLY").unwrap_or_default();
        for _ in 0..rounds {
            let (p, u) = (plain.clone(), format!("{url}/bench"));
            if only == "harness" {
                plain_rows.push(Row { rps: 1.0, p50_us: 0.0, p99_us: 0.0, cpu_ms_per_1k: 1.0 });
            } else {
            plain_rows.push(handle.block_on(measure(concurrency, n, move || {
                let (p, u) = (p.clone(), u.clone());
                async move {
                    match p.get(&u).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    }
                }
            })));
            }
            let h = harness.clone();
            harness_rows.push(handle.block_on(measure(concurrency, n, move || {
                let h = h.clone();
                async move { h.request(Request::new("bench", "GET", "/bench")).await.is_ok() }
            })));
        }
        let mut cells = Vec::new();
        for (name, rows) in [("reqwest", &plain_rows), ("harness", &harness_rows)] {
            if !(only == "harness" && name == "reqwest") {
                json_rows.push(json!({"client": name, "concurrency": concurrency, "errors": 0, "rounds": rows.iter().map(Row::json).collect::<Vec<_>>()}));
            }
            let row = Row {
                rps: median(rows, |r| r.rps),
                p50_us: median(rows, |r| r.p50_us),
                p99_us: median(rows, |r| r.p99_us),
                cpu_ms_per_1k: median(rows, |r| r.cpu_ms_per_1k),
            };
            println!(
                "| {name} | {concurrency} | {:.0} | {:.1} | {:.1} | {:.1} |",
                row.rps, row.p50_us, row.p99_us, row.cpu_ms_per_1k
            );
            cells.push(row);
        }
        let (p, h) = (cells[0], cells[1]);
        println!(
            "| harness vs reqwest | {concurrency} | {:+.1}% | {:+.1} µs | {:+.1} µs | {:+.1}% |",
            (h.rps / p.rps - 1.0) * 100.0,
            h.p50_us - p.p50_us,
            h.p99_us - p.p99_us,
            (h.cpu_ms_per_1k / p.cpu_ms_per_1k - 1.0) * 100.0
        );
    }
    let huge: usize = std::env::var("BENCH_HUGE").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    if huge > 0 {
        json_rows.push(in_flight(&handle, &url, huge, rounds.min(3)));
    }
    if let Ok(path) = std::env::var("BENCH_JSON") {
        let doc = json!({"bench": "core", "runtime": format!("harness-core {}", env!("CARGO_PKG_VERSION")), "rows": json_rows});
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).expect("write BENCH_JSON");
    }
    if std::env::var("BENCH_OVERHEAD").map(|v| v != "0").unwrap_or(true) {
        // BENCH_CACHE_ONLY=1: only the cache-hit table (with BENCH_CONCURRENCY= and BENCH_HUGE=0).
        if std::env::var("BENCH_CACHE_ONLY").map(|v| v != "1").unwrap_or(true) {
            overhead(&handle, &plain, &url, total);
            adaptive_cost(&handle, &url, total);
        }
        cache_hit(&handle, &plain, &url, total);
    }
    if let Some(child) = child.as_mut() {
        drop(child.stdin.take());
        let _ = child.wait();
    }
}

/// What response validation and span export add at c=64: the same 1 KB JSON answer through
/// three clients that differ only in that, interleaved over at least 5 rounds.
fn overhead(handle: &tokio::runtime::Handle, http: &reqwest::Client, url: &str, total: usize) {
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(5);
    let items: Vec<serde_json::Value> = (0..16).map(|i| json!({"sku": format!("SKU-{i:05}"), "qty": i + 1, "price": 9.99, "tags": ["a", "b"]})).collect();
    let order = json!({"id": 4242, "state": "paid", "customer": {"id": "c-1", "email": "ann@example.com"}, "items": items, "total": 123.45});
    let body = order.to_string();
    let step = json!({"steps": [{"json": order}]}).to_string();
    handle.block_on(async { http.put(format!("{url}/__admin/script/kb")).body(step).send().await.unwrap() });
    let schema = json!({"type": "object", "required": ["id", "state", "items", "total"], "properties": {
        "id": {"type": "integer"}, "state": {"enum": ["new", "paid", "shipped"]}, "total": {"type": "number", "minimum": 0},
        "customer": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "email": {"type": "string"}}},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku", "qty", "price"],
            "properties": {"sku": {"type": "string", "pattern": "^SKU-[0-9]+$"}, "qty": {"type": "integer", "minimum": 1}, "price": {"type": "number"}}}}}});
    let make = |extra: serde_json::Value| {
        let mut cfg = json!({"client": {"name": "bench"}, "log": {"enabled": false},
            "services": {"bench": {"base_url": url, "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 256}}}});
        for (k, v) in extra.as_object().unwrap() {
            if k == "endpoints" {
                cfg["services"]["bench"]["endpoints"] = v.clone();
            } else {
                cfg[k] = v.clone();
            }
        }
        Client::from_value(cfg).unwrap()
    };
    let clients = [
        ("plain", make(json!({}))),
        ("schema enforce", make(json!({"endpoints": {"GET /s/kb/{id}": {"response_schema": schema, "validate": "enforce"}}}))),
        ("otel export", make(json!({"otel": {"endpoint": url, "delay_ms": 200}}))),
    ];
    let n = total;
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); clients.len()];
    for _ in 0..rounds {
        // The receiver keeps every span it decodes: empty it between rounds.
        handle.block_on(async { http.post(format!("{url}/__admin/otlp/reset")).send().await.unwrap() });
        for (i, (_, c)) in clients.iter().enumerate() {
            let c = c.clone();
            rows[i].push(handle.block_on(measure(64, n, move || {
                let c = c.clone();
                async move { c.request(Request::new("bench", "GET", "/s/kb/1")).await.map(|r| r.body.len() >= 1000).unwrap_or(false) }
            })));
        }
    }
    println!("\nWhat validation and span export add: a {} byte JSON answer, c=64, {n} requests per cell, median of {rounds} interleaved rounds (log off in all three)\n", body.len());
    println!("| client | req/s (min-max) | p50 µs | CPU ms / 1k req | vs plain, per request |");
    println!("|---|---:|---:|---:|---:|");
    let base_us = 1e6 / median(&rows[0], |r| r.rps);
    for (i, (name, _)) in clients.iter().enumerate() {
        let r = &rows[i];
        let (lo, hi) = r.iter().fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x.rps), hi.max(x.rps)));
        let us = 1e6 / median(r, |x| x.rps);
        println!(
            "| {name} | {:.0} ({lo:.0}-{hi:.0}) | {:.1} | {:.1} | {:+.1}% |",
            median(r, |x| x.rps),
            median(r, |x| x.p50_us),
            median(r, |x| x.cpu_ms_per_1k),
            (us / base_us - 1.0) * 100.0
        );
    }
}

/// A cache hit against the loopback call it replaces, at c=64: the same 1 KB JSON answer
/// (`Cache-Control: max-age=3600`) through a client without caching and one with
/// `cache: {http: true}` (primed once), interleaved over at least 5 rounds, log off in both.
fn cache_hit(handle: &tokio::runtime::Handle, http: &reqwest::Client, url: &str, total: usize) {
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(5);
    let body = json!({"id": 4242, "items": (0..16).map(|i| json!({"sku": format!("SKU-{i:05}"), "qty": i + 1, "price": 9.99, "tags": ["a", "b"]})).collect::<Vec<_>>()});
    let step = json!({"steps": [{"json": body, "headers": {"cache-control": "max-age=3600"}}]}).to_string();
    handle.block_on(async { http.put(format!("{url}/__admin/script/cachehit")).body(step).send().await.unwrap() });
    let make = |cache: serde_json::Value| {
        let mut svc = json!({"base_url": url, "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 256}});
        if !cache.is_null() {
            svc["cache"] = cache;
        }
        Client::from_value(json!({"client": {"name": "bench"}, "log": {"enabled": false}, "services": {"bench": svc}})).unwrap()
    };
    let clients = [("loopback call", make(serde_json::Value::Null)), ("cache hit", make(json!({"http": true})))];
    handle.block_on(async { clients[1].1.request(Request::new("bench", "GET", "/s/cachehit/1")).await.unwrap() });
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); clients.len()];
    for _ in 0..rounds {
        for (i, (_, c)) in clients.iter().enumerate() {
            let c = c.clone();
            rows[i].push(handle.block_on(measure(64, total, move || {
                let c = c.clone();
                async move { c.request(Request::new("bench", "GET", "/s/cachehit/1")).await.map(|r| r.body.len() >= 500).unwrap_or(false) }
            })));
        }
    }
    println!("\nA cache hit vs the loopback call it replaces: c=64, {total} requests per cell, median of {rounds} interleaved rounds (log off)\n");
    println!("| client | req/s (min-max) | p50 µs | p99 µs | CPU ms / 1k req |");
    println!("|---|---:|---:|---:|---:|");
    for (i, (name, _)) in clients.iter().enumerate() {
        let r = &rows[i];
        let (lo, hi) = r.iter().fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x.rps), hi.max(x.rps)));
        println!("| {name} | {:.0} ({lo:.0}-{hi:.0}) | {:.1} | {:.1} | {:.1} |", median(r, |x| x.rps), median(r, |x| x.p50_us), median(r, |x| x.p99_us), median(r, |x| x.cpu_ms_per_1k));
    }
    let ratios: Vec<f64> = rows[1].iter().zip(&rows[0]).map(|(h, l)| h.rps / l.rps).collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    println!("| cache hit / loopback call | {:.2}x ({:.2}-{:.2}) | | | |", sorted[sorted.len() / 2], sorted[0], sorted[sorted.len() - 1]);
}

/// What the adaptive options cost at c=64, in two tables, each interleaved over at least 5
/// rounds after one unrecorded round (so that an adaptive limit has found its level):
/// 1. the machinery: the instant loopback answer (CPU-bound, where any per-request cost
///    shows), every option on; the adaptive limits get `min: 64`, so that they cannot hold
///    the benchmark's own callers back and only their sampling is measured;
/// 2. the adaptive limits as configured (`min: 4`, `initial: 20`) on a healthy upstream: one
///    that answers in 20 ms whatever the load (latency that does not rise with load), where
///    they must settle at or above the callers' 64 and refuse nothing.
/// A `BulkheadFullError` is tried again at once and counted: its cost shows as throughput.
fn adaptive_cost(handle: &tokio::runtime::Handle, url: &str, total: usize) {
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(5);
    let make = |extra: serde_json::Value| {
        let mut svc = json!({"base_url": url, "retry": {"max_retries": 1}, "bulkhead": {"max_concurrency": 256}});
        for (k, v) in extra.as_object().unwrap() {
            svc[k] = v.clone();
        }
        Client::from_value(json!({"client": {"name": "bench"}, "log": {"enabled": false}, "services": {"bench": svc}})).unwrap()
    };
    let sliding = json!({"mode": "sliding_window", "window": {"type": "time", "size_ms": 10000}, "minimum_calls": 20,
        "failure_rate_threshold": 0.5, "slow_call": {"duration_ms": 2000, "rate_threshold": 0.8},
        "half_open": {"probes": 5, "success_rate": 0.8, "ramp": [0.1, 0.5, 1.0], "step_ms": 5000}});
    let adaptive = |algorithm: &str, min: u32| json!({"bulkhead": {"adaptive": {"algorithm": algorithm, "min": min, "max": 1000, "initial": 20.max(min)}}});
    let machinery = [
        ("plain (consecutive breaker, fixed bulkhead)", make(json!({}))),
        ("sliding-window breaker + slow calls + ramp", make(json!({"breaker": sliding}))),
        ("hedge after p95", make(json!({"hedge": {"after": "p95", "max_extra": 1, "budget_ratio": 0.05}}))),
        ("adaptive bulkhead, gradient2 (min 64)", make(adaptive("gradient2", 64))),
        ("adaptive bulkhead, vegas (min 64)", make(adaptive("vegas", 64))),
    ];
    let healthy = [
        ("plain (fixed bulkhead)", make(json!({}))),
        ("adaptive bulkhead, gradient2", make(adaptive("gradient2", 4))),
        ("adaptive bulkhead, vegas", make(adaptive("vegas", 4))),
    ];
    let http = reqwest::Client::new();
    let install = || {
        // Installing again also empties the script's request log.
        let step = json!({"steps": [{"delay_ms": 20}]}).to_string();
        handle.block_on(async { http.put(format!("{url}/__admin/script/healthy")).body(step).send().await.unwrap() });
    };
    let full = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let run = |c: &Client, path: &'static str, n: usize| {
        let (c, full) = (c.clone(), full.clone());
        // The pool is warm after the first cell: only the first call of a client warms up.
        let warm_up = if c.metrics_text().contains("harness_requests_total") { 0 } else { 256 };
        handle.block_on(measure_after(warm_up, 64, n, move || {
            let (c, full) = (c.clone(), full.clone());
            async move {
                loop {
                    match c.request(Request::new("bench", "GET", path)).await {
                        Ok(r) => return r.status == 200,
                        Err(e) if e.kind == harness_core::ErrorKind::BulkheadFull => {
                            full.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            tokio::task::yield_now().await;
                        }
                        Err(_) => return false,
                    }
                }
            }
        }))
    };
    let table = |title: String, clients: &[(&str, Client)], path: &'static str, n: usize| {
        // Warm-up: one unrecorded round, longer for an adaptive limit still below the callers
        // (how long 64 callers took to bring it from `initial` to 64 is printed).
        let mut warm = Vec::new();
        for (_, c) in clients {
            install();
            run(c, path, 256);
            let t = Instant::now();
            while c.bulkhead_limit("bench").unwrap() < 64 && t.elapsed() < Duration::from_secs(30) {
                run(c, path, 256);
            }
            warm.push(t.elapsed());
            run(c, path, n);
        }
        full.store(0, std::sync::atomic::Ordering::Relaxed);
        let mut rows: Vec<Vec<Row>> = vec![Vec::new(); clients.len()];
        for round in 0..rounds {
            install();
            // Each round starts with the next client, so that no client always runs first or last.
            for k in 0..clients.len() {
                let i = (round + k) % clients.len();
                rows[i].push(run(&clients[i].1, path, n));
            }
        }
        println!("\n{title}, c=64, {n} requests per cell, median of {rounds} interleaved rounds (log off)\n");
        println!("| client | req/s (min-max) | p50 µs | p99 µs | CPU ms / 1k req | throughput vs plain | limit after | s to reach 64 |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        let base = median(&rows[0], |r| r.rps);
        for (i, (name, c)) in clients.iter().enumerate() {
            let r = &rows[i];
            let (lo, hi) = r.iter().fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x.rps), hi.max(x.rps)));
            println!(
                "| {name} | {:.0} ({lo:.0}-{hi:.0}) | {:.1} | {:.1} | {:.1} | {:+.1}% | {} | {:.1} |",
                median(r, |x| x.rps),
                median(r, |x| x.p50_us),
                median(r, |x| x.p99_us),
                median(r, |x| x.cpu_ms_per_1k),
                (median(r, |x| x.rps) / base - 1.0) * 100.0,
                c.bulkhead_limit("bench").unwrap(),
                warm[i].as_secs_f64()
            );
        }
        println!("\nBulkheadFullError (tried again at once) in the recorded rounds: {}", full.load(std::sync::atomic::Ordering::Relaxed));
    };
    table("What the adaptive options' machinery costs: the instant loopback answer".into(), &machinery, "/ok", total);
    let text = machinery[2].1.metrics_text();
    let hedges: f64 = text.lines().filter(|l| l.starts_with("harness_hedges_sent_total")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum();
    println!("Hedges sent by the hedging client (all rounds, warm-up included): {hedges:.0}");
    table("Adaptive limits as configured (min 4, initial 20) on a healthy upstream (20 ms, whatever the load)".into(), &healthy, "/s/healthy", total / 4);
}
