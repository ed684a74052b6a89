//! What the gateway adds: the release `harness serve` (a child process) in front of the
//! loopback upstream (another child process), against calling the upstream directly, with the
//! same open-loop load generator. Prints one markdown table with the targets beside the
//! figures; run via `bench/run.sh`.
//!
//! Open loop: requests are issued at a fixed rate whatever the answers do, and latency is
//! taken from each request's scheduled send time, so a stall is charged to every request it
//! delays (no coordinated omission). Cells are interleaved (A, B, A, B, ...) over at least five
//! rounds; medians with the min-max range across rounds.
//!
//! Env: `GATEWAY_BENCH_SECONDS` (per cell, default 10), `GATEWAY_BENCH_RATE` (req/s, default
//! 5000), `GATEWAY_BENCH_ROUNDS` (default 5, at least 5), `GATEWAY_BENCH_TTFT_CALLS` (each way,
//! default 200).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};

const KEY: &str = "sk-bench-0123456789";
const PROVIDER: &str = "ttft";
const ANSWER: &str = "one two three four five six seven eight";

fn env_num(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The children, stopped however `main` ends (the upstream when its stdin closes, the gateway
/// on SIGTERM, as an operator would).
struct Children {
    upstream: Child,
    gateway: Option<Child>,
    config: PathBuf,
}

impl Drop for Children {
    fn drop(&mut self) {
        if let Some(g) = &mut self.gateway {
            // SAFETY: a plain signal to our own child.
            unsafe { libc::kill(g.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = Instant::now();
            while g.try_wait().ok().flatten().is_none() {
                if t0.elapsed() > Duration::from_secs(15) {
                    let _ = g.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = g.wait();
        }
        drop(self.upstream.stdin.take());
        let _ = self.upstream.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

/// utime + stime of a process, in ms (from /proc/<pid>/stat).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // In `rest`, field 0 is the state (field 3 of the man page): utime is 14, stime 15.
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0) + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 * 1000.0 / hz
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// Median and range of one figure across rounds.
fn mmr(v: &[f64]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn fmt(v: &[f64], digits: usize) -> String {
    let (m, lo, hi) = mmr(v);
    format!("{m:.digits$} ({lo:.digits$}-{hi:.digits$})")
}

fn fmt_signed(v: &[f64], digits: usize) -> String {
    let (m, lo, hi) = mmr(v);
    format!("{m:+.digits$} ({lo:+.digits$} to {hi:+.digits$})")
}

/// One measured cell.
#[derive(Clone, Copy, Default)]
struct Cell {
    rate: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    errors: f64,
    gateway_cpu_per_1k: f64,
    upstream_cpu_per_1k: f64,
    client_cpu_per_1k: f64,
}

/// Issues GETs to `url` at `rate` per second for `secs` from a pacing thread, each on the
/// runtime; returns (latencies from the scheduled send, in µs, of the good answers; errors;
/// wall time until the last answer).
fn open_loop(rt: &tokio::runtime::Handle, http: &reqwest::Client, url: &str, auth: Option<&HeaderValue>, rate: f64, secs: f64) -> (Vec<f64>, usize, f64) {
    let period = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * secs) as usize;
    let (tx, rx) = mpsc::channel::<(f64, bool)>();
    let start = Instant::now() + Duration::from_millis(5);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Sleep to the microsecond, not to the default 50 µs timer slack.
            // SAFETY: prctl on the calling thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            for i in 0..total {
                let at = start + period * i as u32;
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                let (http, url, auth, tx) = (http.clone(), url.to_string(), auth.cloned(), tx.clone());
                rt.spawn(async move {
                    let mut req = http.get(url);
                    if let Some(a) = auth {
                        req = req.header(AUTHORIZATION, a);
                    }
                    let ok = match tokio::time::timeout(Duration::from_secs(5), async {
                        let r = req.send().await?;
                        let good = r.status() == 200;
                        r.bytes().await.map(|_| good)
                    })
                    .await
                    {
                        Ok(Ok(good)) => good,
                        _ => false,
                    };
                    let _ = tx.send((at.elapsed().as_secs_f64() * 1e6, ok));
                });
            }
        });
    });
    drop(tx);
    let mut lat = Vec::with_capacity(total);
    let mut errors = 0;
    let mut got = 0;
    while got < total {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok((us, ok)) => {
                got += 1;
                if ok {
                    lat.push(us);
                } else {
                    errors += 1;
                }
            }
            Err(_) => break,
        }
    }
    errors += total - got;
    let wall = start.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (lat, errors, wall)
}

#[allow(clippy::too_many_arguments)]
fn cell(rt: &tokio::runtime::Handle, http: &reqwest::Client, url: &str, auth: Option<&HeaderValue>, rate: f64, secs: f64, gateway: u32, upstream: u32) -> Cell {
    open_loop(rt, http, url, auth, rate, 1.0);
    let (g0, u0, c0) = (cpu_ms(gateway), cpu_ms(upstream), cpu_ms(std::process::id()));
    let (lat, errors, wall) = open_loop(rt, http, url, auth, rate, secs);
    let (g1, u1, c1) = (cpu_ms(gateway), cpu_ms(upstream), cpu_ms(std::process::id()));
    let n = (lat.len() + errors).max(1) as f64 / 1000.0;
    Cell {
        rate: lat.len() as f64 / wall,
        p50_us: pct(&lat, 0.50),
        p99_us: pct(&lat, 0.99),
        p999_us: pct(&lat, 0.999),
        errors: errors as f64,
        gateway_cpu_per_1k: (g1 - g0) / n,
        upstream_cpu_per_1k: (u1 - u0) / n,
        client_cpu_per_1k: (c1 - c0) / n,
    }
}

/// Time (µs) to the first `data:` line with content in a streamed chat completion; the rest
/// of the stream is read to its end. None if no content came.
async fn ttft(http: &reqwest::Client, url: &str, auth: Option<&HeaderValue>, body: &Value) -> Option<f64> {
    let mut req = http.post(url).header("content-type", "application/json").body(body.to_string());
    if let Some(a) = auth {
        req = req.header(AUTHORIZATION, a.clone());
    }
    let t0 = Instant::now();
    let mut resp = req.send().await.ok()?;
    if resp.status() != 200 {
        return None;
    }
    let (mut buf, mut first) = (Vec::<u8>::new(), None);
    while let Some(chunk) = resp.chunk().await.ok()? {
        if first.is_some() {
            continue;
        }
        buf.extend_from_slice(&chunk);
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let Some(data) = std::str::from_utf8(&line).ok().and_then(|l| l.trim_end().strip_prefix("data:")) else { continue };
            let v: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
            if v["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()) {
                first = Some(t0.elapsed().as_secs_f64() * 1e6);
                break;
            }
        }
    }
    first
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn main() {
    let secs = env_num("GATEWAY_BENCH_SECONDS", 10.0);
    let rate = env_num("GATEWAY_BENCH_RATE", 5000.0);
    let rounds = (env_num("GATEWAY_BENCH_ROUNDS", 5.0) as usize).max(5);
    let ttft_calls = env_num("GATEWAY_BENCH_TTFT_CALLS", 200.0) as usize;
    let bin = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();

    // The upstream: its first stdout line says where it listens; it serves until stdin closes.
    let mut upstream = Command::new(bin.join("harness-upstream"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start harness-upstream (build it: cargo build --release -p harness-upstream)");
    let mut first = String::new();
    BufReader::new(upstream.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let addr = serde_json::from_str::<Value>(&first).unwrap()["addr"].as_str().unwrap().to_string();
    let up = format!("http://{addr}");

    let config = std::env::temp_dir().join(format!("harness-gateway-bench-{}.json", std::process::id()));
    let mut children = Children { upstream, gateway: None, config: config.clone() };
    let cfg = json!({
        "services": {
            "api": {"base_url": up},
            "llm": {"base_url": format!("{up}/llm/{PROVIDER}")},
        },
        // `chat` passes chunks on as they come (a break mid-answer restarts, visibly); `chat-hold` is
        // the default, which holds the answer (up to 1 MiB) so a break can fail over unseen.
        "routes": {
            "chat": {"adapter": "openai-compatible", "stream": {"mid_stream": "restart"}, "providers": [{"id": "p", "service": "llm", "model": "m", "weight": 1}]},
            "chat-hold": {"adapter": "openai-compatible", "providers": [{"id": "p", "service": "llm", "model": "m", "weight": 1}]},
        },
        "callers": {"bench": {"key_sha256": harness_gateway::sha256_hex(KEY.as_bytes()), "routes": ["chat", "chat-hold"], "services": ["api"]}},
    });
    std::fs::File::create(&config).and_then(|mut f| f.write_all(cfg.to_string().as_bytes())).expect("write the config");
    let listen = format!("127.0.0.1:{}", free_port());
    // Log lines (the core's record and the gateway's access line) go to /dev/null.
    let gateway = Command::new(bin.join("harness"))
        .args(["serve", "--config", config.to_str().unwrap(), "--listen", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start harness serve (build it: cargo build --release -p harness-cli)");
    let (gw_pid, up_pid) = (gateway.id(), children.upstream.id());
    children.gateway = Some(gateway);
    let gw = format!("http://{listen}");

    let _ = rustls::crypto::ring::default_provider().install_default();
    // The load generator's own runtime: one worker, so it takes as little of the two cores as it can.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let h = rt.handle().clone();
    let http = reqwest::Client::builder().tcp_nodelay(true).no_proxy().pool_max_idle_per_host(4096).build().unwrap();
    let auth = HeaderValue::from_str(&format!("Bearer {KEY}")).unwrap();

    let t0 = Instant::now();
    while !h.block_on(async { http.get(format!("{gw}/healthz")).send().await.map(|r| r.status() == 200).unwrap_or(false) }) {
        assert!(t0.elapsed() < Duration::from_secs(20), "the gateway did not come up on {listen}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let (direct_url, gw_url) = (format!("{up}/bench"), format!("{gw}/v1/services/api/bench"));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(cell(&h, &http, &direct_url, None, rate, secs, gw_pid, up_pid));
        b.push(cell(&h, &http, &gw_url, Some(&auth), rate, secs, gw_pid, up_pid));
    }

    // Time to first token: one provider, called directly and through the route `chat`.
    let spec = json!({"content": ANSWER, "stream": {"ttft_ms": 50, "delay_ms": 5, "done": true}});
    let set = h.block_on(async { http.post(format!("{up}/__admin/provider/{PROVIDER}")).body(spec.to_string()).send().await.map(|r| r.status()) });
    assert_eq!(set.ok().map(|s| s.as_u16()), Some(200), "configure the simulated provider");
    let messages = json!([{"role": "user", "content": "hi"}]);
    let direct_body = json!({"model": "m", "messages": messages, "stream": true});
    let gw_body = json!({"model": "chat", "messages": messages, "stream": true});
    let hold_body = json!({"model": "chat-hold", "messages": messages, "stream": true});
    let (direct_chat, gw_chat) = (format!("{up}/llm/{PROVIDER}/v1/chat/completions"), format!("{gw}/v1/chat/completions"));
    let (mut ta, mut tb, mut th, mut terr) = (Vec::new(), Vec::new(), Vec::new(), 0);
    h.block_on(async {
        // Warm-up: a connection each way.
        for _ in 0..3 {
            ttft(&http, &direct_chat, None, &direct_body).await;
            ttft(&http, &gw_chat, Some(&auth), &gw_body).await;
            ttft(&http, &gw_chat, Some(&auth), &hold_body).await;
        }
        for _ in 0..ttft_calls {
            match ttft(&http, &direct_chat, None, &direct_body).await {
                Some(us) => ta.push(us),
                None => terr += 1,
            }
            match ttft(&http, &gw_chat, Some(&auth), &gw_body).await {
                Some(us) => tb.push(us),
                None => terr += 1,
            }
            match ttft(&http, &gw_chat, Some(&auth), &hold_body).await {
                Some(us) => th.push(us),
                None => terr += 1,
            }
        }
    });
    ta.sort_by(|x, y| x.partial_cmp(y).unwrap());
    tb.sort_by(|x, y| x.partial_cmp(y).unwrap());
    th.sort_by(|x, y| x.partial_cmp(y).unwrap());

    // ---- the tables ----
    let col = |cells: &[Cell], f: fn(&Cell) -> f64| cells.iter().map(f).collect::<Vec<f64>>();
    println!("Gateway overhead: `harness serve` (release) in front of the loopback upstream vs the upstream directly,");
    println!("open loop at {rate:.0} req/s, {secs} s per cell after a 1 s warm-up, {rounds} interleaved rounds; median (min-max) across rounds;");
    println!("latency from each request's scheduled send time (no coordinated omission)\n");
    println!("| cell | achieved req/s | p50 µs | p99 µs | p99.9 µs | errors | gateway CPU ms / 1k req | upstream CPU ms / 1k req | load generator CPU ms / 1k req |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, cells) in [("A: GET upstream /bench directly", &a), ("B: GET /v1/services/api/bench via gateway", &b)] {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt(&col(cells, |c| c.rate), 0),
            fmt(&col(cells, |c| c.p50_us), 0),
            fmt(&col(cells, |c| c.p99_us), 0),
            fmt(&col(cells, |c| c.p999_us), 0),
            fmt(&col(cells, |c| c.errors), 0),
            fmt(&col(cells, |c| c.gateway_cpu_per_1k), 1),
            fmt(&col(cells, |c| c.upstream_cpu_per_1k), 1),
            fmt(&col(cells, |c| c.client_cpu_per_1k), 1),
        );
    }
    // Added latency: B minus A within each round (the two ran back to back).
    let added = |f: fn(&Cell) -> f64| a.iter().zip(&b).map(|(x, y)| f(y) - f(x)).collect::<Vec<f64>>();
    let (add50, add99, add999) = (added(|c| c.p50_us), added(|c| c.p99_us), added(|c| c.p999_us));
    println!("| added (B - A, per round) | | {} | {} | {} | | | | |", fmt_signed(&add50, 0), fmt_signed(&add99, 0), fmt_signed(&add999, 0));

    let (a50, a99, b50, b99) = (pct(&ta, 0.5), pct(&ta, 0.99), pct(&tb, 0.5), pct(&tb, 0.99));
    println!("\nTime to first token: a simulated provider (first chunk after 50 ms, then one every 5 ms), streamed,");
    println!("{ttft_calls} sequential calls each way, interleaved; to the first `data:` line with content ({terr} failed)\n");
    println!("| path | median ms | p99 ms |");
    println!("|---|---:|---:|");
    println!("| direct: POST upstream /llm/{PROVIDER}/v1/chat/completions | {:.3} | {:.3} |", a50 / 1e3, a99 / 1e3);
    println!("| via gateway: POST /v1/chat/completions, model `chat` (mid_stream: restart) | {:.3} | {:.3} |", b50 / 1e3, b99 / 1e3);
    println!("| added | {:+.3} | {:+.3} |", (b50 - a50) / 1e3, (b99 - a99) / 1e3);
    println!("| for reference, model `chat-hold` (the default mid_stream: hold, the answer held to its end) | {:.3} | {:.3} |", pct(&th, 0.5) / 1e3, pct(&th, 0.99) / 1e3);

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    let (m50, m99) = (mmr(&add50).0, mmr(&add99).0);
    let gcpu = mmr(&col(&b, |c| c.gateway_cpu_per_1k)).0;
    println!("\n| target | figure | goal | |");
    println!("|---|---:|---:|---|");
    println!("| p99 added at {rate:.0} req/s | {m99:+.0} µs | < 500 µs | {} |", verdict(m99 < 500.0));
    println!("| p50 added | {m50:+.0} µs | < 150 µs | {} |", verdict(m50 < 150.0));
    println!("| TTFT added (median, mid_stream: restart) | {:+.3} ms | < 1 ms | {} |", (b50 - a50) / 1e3, verdict((b50 - a50) < 1000.0));
    println!("| gateway CPU per 1k requests | {gcpu:.1} ms | (reported) | |");
    println!(
        "\nMachine: {cores} cores, loopback only; the load generator (1 worker + a pacing thread), the upstream (1 worker) \
         and the gateway (the core's runtime, one worker per core) all share them, so the figures include their contention."
    );
    drop(rt);
    drop(children);
}
