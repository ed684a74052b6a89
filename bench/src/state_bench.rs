//! What shared state costs a request: a local rate-limit check (governor), a fleet-wide
//! check on a real `redis-server` (one Lua script) next to a plain loopback round trip
//! (PING), and whole requests with no limit, a local limit and a shared limit.
//! Prints one table; medians of interleaved rounds, with the range.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness_core::ratelimit::{LimitRate, LocalLimit};
use harness_core::state::redis::{RedisConn, RedisRateLimits};
use harness_core::state::{Rate, RateLimitStore};
use harness_core::{Client, Request};
use serde_json::json;

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn row(name: &str, unit: &str, v: Vec<f64>) {
    let (m, lo, hi) = stats(v);
    println!("| {name} | {m:.3} {unit} | {lo:.3} - {hi:.3} |");
}

fn start_redis() -> Option<(Child, u16)> {
    let port = TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((child, port))
}

/// p50 of sequential request latency (µs) for a client.
async fn request_p50(client: &Client, n: usize) -> f64 {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.request(Request::new("svc", "GET", "/s/ok/x")).await.unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stats(lat).0
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let handle = harness_core::runtime::handle().expect("runtime");
    let redis = start_redis();
    println!("Shared-state costs, median of {rounds} interleaved rounds (range in the last column)\n");
    println!("| measure | median | range |");
    println!("|---|---:|---:|");

    // A local check: a cell taken (the limit is far away) and a cell refused (the limit is hit).
    let allowed = LocalLimit::new(&LimitRate { rps: 1e9, burst: 1_000_000 });
    let refused = LocalLimit::new(&LimitRate { rps: 0.001, burst: 1 });
    let _ = refused.check();
    let (mut ok_ns, mut no_ns) = (Vec::new(), Vec::new());
    const N: usize = 1_000_000;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..N {
            std::hint::black_box(allowed.check().is_ok());
        }
        ok_ns.push(t.elapsed().as_secs_f64() * 1e9 / N as f64);
        let t = Instant::now();
        for _ in 0..N {
            std::hint::black_box(refused.check().is_err());
        }
        no_ns.push(t.elapsed().as_secs_f64() * 1e9 / N as f64);
    }
    row("local check, allowed (governor)", "ns", ok_ns);
    row("local check, refused", "ns", no_ns);

    let u = handle.block_on(harness_upstream::start()).unwrap();
    let base = u.url();
    handle.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new().put(format!("{base}/__admin/script/ok")).body(r#"{"steps":[{"status":200}]}"#).send().await.unwrap();
    });
    let mk = |rl: serde_json::Value| {
        let mut svc = json!({"base_url": base});
        if !rl.is_null() {
            svc["rate_limit"] = rl;
        }
        Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": svc}})).unwrap()
    };
    let plain = mk(serde_json::Value::Null);
    let local = mk(json!({"rps": 1e9, "burst": 1000000}));
    let shared = redis.as_ref().map(|(_, port)| mk(json!({"rps": 1e9, "burst": 1000000, "shared": {"redis_url": format!("redis://127.0.0.1:{port}/0"), "key": "bench"}})));
    let store = redis.as_ref().map(|(_, port)| RedisRateLimits::new(RedisConn::new(&format!("redis://127.0.0.1:{port}/0"), "bench").unwrap()));
    let (mut p_plain, mut p_local, mut p_shared, mut ping, mut check) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let requests = 2000;
    handle.block_on(async {
        // Warm pools and connections.
        request_p50(&plain, 200).await;
        request_p50(&local, 200).await;
        if let Some(s) = &shared {
            request_p50(s, 200).await;
        }
        let mut raw = match &redis {
            Some((_, port)) => Some(redis::Client::open(format!("redis://127.0.0.1:{port}/0")).unwrap().get_multiplexed_async_connection().await.unwrap()),
            None => None,
        };
        for _ in 0..rounds {
            p_plain.push(request_p50(&plain, requests).await);
            p_local.push(request_p50(&local, requests).await);
            if let Some(s) = &shared {
                p_shared.push(request_p50(s, requests).await);
            }
            if let (Some(c), Some(store)) = (raw.as_mut(), store.as_ref()) {
                let mut l = Vec::new();
                for _ in 0..requests {
                    let t = Instant::now();
                    let _: String = redis::cmd("PING").query_async(c).await.unwrap();
                    l.push(t.elapsed().as_secs_f64() * 1e6);
                }
                ping.push(stats(l).0);
                let mut l = Vec::new();
                for _ in 0..requests {
                    let t = Instant::now();
                    store.check("bench-direct", Rate { per_second: 1e9, burst: 1_000_000 }).await.unwrap();
                    l.push(t.elapsed().as_secs_f64() * 1e6);
                }
                check.push(stats(l).0);
            }
        }
    });
    row("request p50, no limit (c=1)", "µs", p_plain.clone());
    row("request p50, local limit", "µs", p_local.clone());
    let deltas: Vec<f64> = p_local.iter().zip(&p_plain).map(|(a, b)| a - b).collect();
    row("  local limit adds (paired by round)", "µs", deltas);
    if redis.is_some() {
        row("redis PING round trip p50", "µs", ping.clone());
        row("shared check p50 (one Lua script)", "µs", check.clone());
        row("request p50, shared limit", "µs", p_shared.clone());
        let deltas: Vec<f64> = p_shared.iter().zip(&p_plain).map(|(a, b)| a - b).collect();
        row("  shared limit adds (paired by round)", "µs", deltas);
    } else {
        println!("| redis rows | skipped: redis-server not installed | |");
    }
    if let Some((mut child, _)) = redis {
        let _ = child.kill();
        let _ = child.wait();
    }
}
