//! Adaptive resilience against the real loopback upstream: hedged reads cut the tail
//! without more than their budget of extra load, are never sent for unsafe writes, and
//! cancel their losers; an adaptive bulkhead finds a downstream's capacity and follows
//! it back up.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{Client, ErrorKind, Request};
use serde_json::{json, Value};

/// These tests measure latency and let limits follow it: run one at a time, so that one
/// test's 200 callers are not another's queueing (cargo runs a binary's tests in parallel).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn script(base: &str, name: &str, spec: Value) {
    let r = reqwest::Client::new().put(format!("{base}/__admin/script/{name}")).body(spec.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

async fn stats(base: &str, name: &str) -> Value {
    let text = reqwest::get(format!("{base}/__admin/stats/{name}")).await.unwrap().text().await.unwrap();
    serde_json::from_str(&text).unwrap()
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(series)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// Fast answers (4 ms) with one slow one (60 ms) in every 67: p50 ~5 ms, p99 ~60 ms.
fn long_tail(groups: usize) -> Value {
    let mut steps = Vec::new();
    for _ in 0..groups {
        steps.push(json!({"delay_ms": 4, "times": 66}));
        steps.push(json!({"delay_ms": 60}));
    }
    steps.push(json!({"delay_ms": 4}));
    json!({ "steps": steps })
}

/// `n` GETs, `concurrency` at a time; the latencies, sorted.
async fn run_reads(client: &Client, service: &str, n: usize, concurrency: usize) -> Vec<Duration> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (client, next, service) = (client.clone(), next.clone(), service.to_string());
        workers.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < n as u64 {
                let t = Instant::now();
                let r = client.request(Request::new(&service, "GET", "/s/tail")).await.expect("every read succeeds");
                assert_eq!(r.status, 200);
                took.push(t.elapsed());
            }
            took
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    all.sort();
    all
}

fn pct(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedging_halves_the_p99_within_its_budget_and_cancels_the_losers() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    const N: usize = 2000;
    let spec = long_tail(N / 67 + 40);
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {
            "plain": {"base_url": base, "retry": {"max_retries": 0}},
            "hedged": {"base_url": base, "retry": {"max_retries": 0}, "hedge": {"after": "p95", "max_extra": 1, "budget_ratio": 0.05}}
        }
    }))
    .unwrap();
    // The same upstream behaviour for both, one after the other (not competing for the cores).
    script(&base, "tail", spec.clone()).await;
    let plain = run_reads(&client, "plain", N, 8).await;
    let plain_sent = stats(&base, "tail").await["requests"].as_u64().unwrap();
    script(&base, "tail", spec).await;
    let hedged = run_reads(&client, "hedged", N, 8).await;
    let st = stats(&base, "tail").await;
    let sent = st["requests"].as_u64().unwrap();
    let text = client.metrics_text();
    let hedges = metric(&text, "harness_hedges_sent_total{service=\"hedged\"}");
    let won = metric(&text, "harness_hedges_won_total{service=\"hedged\"}");
    let (p50, p99, hp50, hp99) = (pct(&plain, 0.5), pct(&plain, 0.99), pct(&hedged, 0.5), pct(&hedged, 0.99));
    eprintln!("plain p50 {p50:?} p99 {p99:?}; hedged p50 {hp50:?} p99 {hp99:?}; upstream saw {sent} for {N}; hedges {hedges} won {won}; {st}");
    assert_eq!(plain_sent, N as u64);
    assert!(p99 >= p50 * 5, "the upstream's tail: p50 {p50:?}, p99 {p99:?}");
    assert!(hp99 * 2 <= p99, "hedging must cut the p99 by half at least: {p99:?} -> {hp99:?}");
    let extra = sent - N as u64;
    assert!(hedges <= 0.05 * N as f64, "{hedges} hedges: over the 5% budget of {N}");
    // A hedge cancelled before the upstream read it (its primary answered first) is counted, not seen.
    assert!(extra as f64 <= hedges, "every extra request is a counted hedge ({extra} extra, {hedges} hedges)");
    assert!(won > 0.0);
    // A hedge that won cancelled its primary mid-delay: the upstream saw each go.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let disconnects = stats(&base, "tail").await["disconnects"].as_u64().unwrap();
    assert!(disconnects as f64 >= won, "{disconnects} disconnects for {won} hedges won");
    assert_eq!(client.bulkhead_in_use("hedged").unwrap(), 0, "every loser's permit was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_writes_are_never_hedged_and_keyed_writes_are() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": base, "retry": {"max_retries": 0}, "hedge": {"after_ms": 5, "budget_ratio": 1.0}}}
    }))
    .unwrap();
    script(&base, "w", json!({"steps": [{"delay_ms": 40}]})).await;
    // Fill the budget first (each eligible read deposits).
    for _ in 0..30 {
        client.request(Request::new("svc", "GET", "/s/w")).await.unwrap();
    }
    let before = stats(&base, "w").await["requests"].as_u64().unwrap();
    assert!(before > 30, "slow reads were hedged ({before} sent for 30)");
    script(&base, "w", json!({"steps": [{"delay_ms": 40}]})).await;
    for _ in 0..20 {
        let mut r = Request::new("svc", "POST", "/s/w");
        r.body = harness_core::Body::Json(json!({"n": 1}));
        client.request(r).await.unwrap();
    }
    assert_eq!(stats(&base, "w").await["requests"], 20, "a POST without an idempotency key is sent once");
    let mut keyed = Request::new("svc", "POST", "/s/w");
    keyed.idempotency_key = Some("order-7".into());
    client.request(keyed).await.unwrap();
    assert_eq!(stats(&base, "w").await["requests"], 22, "a keyed POST may be hedged");
}

/// Callers that keep `workers` requests going (a full bulkhead: try again in 20 ms). The
/// upstream answers in 100 ms, so that the test measures queueing at the upstream, not the CPU
/// of a debug build on two cores (callers refused every 2 ms, and 40 ms answers, kept the
/// machine busy enough that Vegas saw CPU queueing as downstream queueing and did not recover).
fn load(client: &Client, workers: usize, stop: &Arc<AtomicBool>, errors: &Arc<AtomicU64>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..workers)
        .map(|_| {
            let (client, stop, errors) = (client.clone(), stop.clone(), errors.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match client.request(Request::new("svc", "GET", "/s/cap")).await {
                        Ok(_) => {}
                        Err(e) if e.kind == ErrorKind::BulkheadFull => tokio::time::sleep(Duration::from_millis(20)).await,
                        Err(e) => {
                            eprintln!("unexpected: {e}");
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect()
}

async fn adaptive_limit_follows_capacity(algorithm: &str, near: std::ops::RangeInclusive<u32>) {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": base, "retry": {"max_retries": 0},
            "bulkhead": {"adaptive": {"algorithm": algorithm, "min": 4, "max": 1000, "initial": 20}}}}
    }))
    .unwrap();
    // (After the client: it installs the TLS crypto provider the test's own reqwest needs.)
    script(&base, "cap", json!({"capacity": 50, "steps": [{"delay_ms": 100}]})).await;
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let workers = load(&client, 200, &stop, &errors);
    // Converged: inside `near` for 5 s (ten reads in a row, 500 ms apart), within 30 s.
    let t0 = Instant::now();
    let mut seen = Vec::new();
    let mut in_band = 0;
    while in_band < 10 {
        assert!(t0.elapsed() < Duration::from_secs(30), "{algorithm}: no convergence near 50 in 30 s: {seen:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let l = client.bulkhead_limit("svc").unwrap();
        seen.push(l);
        in_band = if near.contains(&l) { in_band + 1 } else { 0 };
    }
    let converged_in = t0.elapsed();
    // The capacity returns (200 at once): the limit follows it up.
    script(&base, "cap", json!({"capacity": 200, "steps": [{"delay_ms": 100}]})).await;
    let t1 = Instant::now();
    let mut after = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let l = client.bulkhead_limit("svc").unwrap();
        after.push(l);
        if l >= 120 {
            break;
        }
        // Recovery has no time target of its own; 45 s leaves room for a slow CI machine.
        assert!(t1.elapsed() < Duration::from_secs(45), "{algorithm}: did not recover: {after:?}");
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    eprintln!("{algorithm}: near 50 after {converged_in:?} ({seen:?}); recovered after {:?} ({after:?})", t1.elapsed());
    assert_eq!(errors.load(Ordering::Relaxed), 0, "only BulkheadFullError is expected above the limit");
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    let text = client.metrics_text();
    assert!(metric(&text, "harness_bulkhead_limit{service=\"svc\"}") >= 120.0, "the gauge shows the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vegas_converges_near_the_capacity_and_recovers() {
    let _alone = ONE_AT_A_TIME.lock().await;
    adaptive_limit_follows_capacity("vegas", 40..=70).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gradient2_converges_near_the_capacity_and_recovers() {
    let _alone = ONE_AT_A_TIME.lock().await;
    // Gradient2 tolerates 1.2 times the long-term RTT: it rests above the capacity by design.
    adaptive_limit_follows_capacity("gradient2", 40..=90).await;
}

/// A limit set high (100) for a downstream that now serves 20 at once in 50 ms, with 40
/// callers (under half the limit, so "application-limited"): queueing doubles the latency,
/// and the limit must come down to within 0.5x-2x of the capacity in 30 s, then grow back
/// past the callers when the capacity returns.
async fn high_limit_comes_down_under_queueing(algorithm: &str) {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": base, "retry": {"max_retries": 0},
            "bulkhead": {"adaptive": {"algorithm": algorithm, "min": 4, "max": 1000, "initial": 100}}}}
    }))
    .unwrap();
    script(&base, "cap", json!({"capacity": 20, "steps": [{"delay_ms": 50}]})).await;
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let workers = load(&client, 40, &stop, &errors);
    let t0 = Instant::now();
    let mut seen = Vec::new();
    let mut in_band = 0;
    while in_band < 6 {
        assert!(t0.elapsed() < Duration::from_secs(30), "{algorithm}: the limit did not come down to 10..=40 in 30 s: {seen:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let l = client.bulkhead_limit("svc").unwrap();
        seen.push(l);
        in_band = if (10..=40).contains(&l) { in_band + 1 } else { 0 };
    }
    let came_down = t0.elapsed();
    script(&base, "cap", json!({"capacity": 200, "steps": [{"delay_ms": 50}]})).await;
    let t1 = Instant::now();
    let mut after = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let l = client.bulkhead_limit("svc").unwrap();
        after.push(l);
        if l >= 40 {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(45), "{algorithm}: did not grow back past the 40 callers: {after:?}");
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    eprintln!("{algorithm}: down after {came_down:?} ({seen:?}); back after {:?} ({after:?})", t1.elapsed());
    assert_eq!(errors.load(Ordering::Relaxed), 0, "only BulkheadFullError is expected above the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vegas_limit_set_high_comes_down_though_callers_use_under_half() {
    let _alone = ONE_AT_A_TIME.lock().await;
    high_limit_comes_down_under_queueing("vegas").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gradient2_limit_set_high_comes_down_though_callers_use_under_half() {
    let _alone = ONE_AT_A_TIME.lock().await;
    high_limit_comes_down_under_queueing("gradient2").await;
}
