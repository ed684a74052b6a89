//! A loopback-only HTTP/1.1 upstream that injects faults on a script.
//!
//! Hand-written on tokio TCP rather than hyper: resets, truncated bodies and
//! hangs need byte-level control of the connection that a server framework hides.
//! The protocol (scripts, steps, the request log) is described in `tests/README.md`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod formats;
mod ledger;
mod otlp;
mod provider;
pub mod redis_server;
mod signed;
pub use provider::{ProviderSpec, StreamSpec};

/// Deep-merges `over` into `base` (objects key by key; anything else replaced): how tests
/// lay a scenario's config over a base one.
pub fn merge_json(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge_json(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// One scripted answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub status: Option<u16>,
    #[serde(default)]
    pub headers: HashMap<String, String>,
    pub body: Option<String>,
    pub json: Option<Value>,
    pub html: Option<String>,
    pub delay_ms: Option<u64>,
    pub retry_after: Option<String>,
    pub retry_after_date_s: Option<u64>,
    pub action: Option<String>,
    pub times: Option<u32>,
    /// Extra response headers in order; names may repeat (`set-cookie`).
    #[serde(default)]
    pub header_list: Vec<(String, String)>,
    /// A body of this many `x` bytes.
    pub body_bytes: Option<u64>,
    /// Send the body with chunked transfer encoding (no `Content-Length`).
    #[serde(default)]
    pub chunked: bool,
    /// Written to the socket as is (after `{port}` substitution), then the connection closes.
    pub raw: Option<String>,
    /// Answer 200 with this many extra `x-n-<i>` headers.
    pub many_headers: Option<u32>,
    /// A chunked body sent piece by piece, each after its own delay (streaming tests).
    pub chunks: Option<Vec<ChunkStep>>,
    /// With `chunks`: close the connection after the last chunk, without the terminating one.
    #[serde(default)]
    pub cut: bool,
    /// Check the request's signature first (`signed.rs`): a bad one is answered 401 instead.
    pub verify: Option<signed::VerifySpec>,
}

/// One piece of a `chunks` body.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkStep {
    pub data: String,
    pub delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptSpec {
    steps: Vec<Step>,
    /// Serve at most this many requests at once; the rest queue (adaptive-limit tests).
    capacity: Option<u32>,
}

/// What a script's requests did, beyond its log.
#[derive(Default)]
struct ScriptStats {
    /// Clients that closed the connection while their answer was being delayed.
    disconnects: std::sync::atomic::AtomicU64,
    in_flight: std::sync::atomic::AtomicU64,
    max_in_flight: std::sync::atomic::AtomicU64,
}

struct Script {
    steps: Vec<Step>,
    gate: Option<Arc<tokio::sync::Semaphore>>,
    stats: Arc<ScriptStats>,
    /// Index of the current step and how many requests it has answered.
    cursor: (usize, u32),
    installed: Instant,
    log: Vec<Value>,
    /// Nonces (`webhook-id`) a `verify` step has accepted: a repeat is refused.
    nonces: std::collections::HashSet<String>,
}

impl Script {
    fn next_step(&mut self) -> Step {
        if self.steps.is_empty() {
            return Step::default();
        }
        let (i, used) = self.cursor;
        let step = self.steps[i].clone();
        let times = step.times.unwrap_or(1).max(1);
        if used + 1 >= times && i + 1 < self.steps.len() {
            self.cursor = (i + 1, 0);
        } else {
            self.cursor = (i, used + 1);
        }
        step
    }
}

#[derive(Default)]
struct State {
    scripts: Mutex<HashMap<String, Script>>,
    /// The upstream's own port, for `{port}` in scripted header values.
    port: u16,
    /// Simulated model providers (`/llm/{name}/...`), in five wire formats.
    providers: provider::Providers,
    /// Spans exported to `/v1/traces`.
    otlp: otlp::Receiver,
    /// Side effects of `POST /ledger/...`, for the soak.
    ledger: ledger::Ledger,
}

/// `{port}` (this upstream's port) and `{script}` (the script's name) in a scripted value.
fn fill(v: &str, state: &State, script: &str) -> String {
    v.replace("{port}", &state.port.to_string()).replace("{script}", script)
}

/// A running upstream; dropping it does not stop the tasks (they end with the runtime).
pub struct Upstream {
    pub addr: SocketAddr,
    pub blackhole: SocketAddr,
    /// A loopback port with nothing listening: connects are refused at once.
    pub closed: SocketAddr,
    // Kept so the blackhole's accept queue stays full for the upstream's lifetime.
    _blackhole_socket: socket2::Socket,
    _fillers: Vec<std::net::TcpStream>,
}

impl Upstream {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn blackhole_url(&self) -> String {
        format!("http://{}", self.blackhole)
    }
    pub fn closed_url(&self) -> String {
        format!("http://{}", self.closed)
    }
}

/// Starts the upstream on an ephemeral loopback port, on the current tokio runtime.
pub async fn start() -> std::io::Result<Upstream> {
    // A deep accept queue (the kernel caps it at somaxconn), so that thousands of clients
    // connecting at once (the benchmark's 10,000 in flight) are queued, not dropped.
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse().expect("loopback"))?;
    let listener = socket.listen(16_384)?;
    let addr = listener.local_addr()?;
    let state = Arc::new(State { port: addr.port(), ..State::default() });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of file descriptors: back off instead of spinning on the error.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let state = state.clone();
            tokio::spawn(async move {
                let _ = serve_connection(stream, state).await;
            });
        }
    });
    let (blackhole_socket, blackhole, fillers) = blackhole()?;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    Ok(Upstream { addr, blackhole, closed, _blackhole_socket: blackhole_socket, _fillers: fillers })
}

/// A listener with a backlog of 0 that never accepts; after filling its queue,
/// further SYNs are dropped and connects hang until the client's connect timeout.
fn blackhole() -> std::io::Result<(socket2::Socket, SocketAddr, Vec<std::net::TcpStream>)> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())?;
    socket.listen(0)?;
    let addr = socket.local_addr()?.as_socket().expect("ipv4");
    let mut fillers = Vec::new();
    for _ in 0..4 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            Ok(s) => fillers.push(s),
            Err(_) => break,
        }
    }
    Ok((socket, addr, fillers))
}

struct Incoming {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Incoming>> {
    use tokio::io::AsyncBufReadExt;
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.trim_end().splitn(3, ' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut content_length = 0usize;
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim().to_string();
            if k == "content-length" {
                content_length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body).await?;
    Ok(Some(Incoming { method, path, headers, body }))
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader).await? {
        let keep_open = respond(&mut reader, req, &state).await?;
        if !keep_open {
            return Ok(());
        }
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn write_response(
    reader: &mut BufReader<TcpStream>,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut out = format!("HTTP/1.1 {} {}\r\ncontent-length: {}\r\n", status, reason(status), body.len());
    for (k, v) in headers {
        out.push_str(k);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    reader.get_mut().write_all(&bytes).await
}

/// Writes `n` bytes of `x`, with a `content-length` or chunked, 64 KiB at a time;
/// a client that stops reading (over its limit, or a stream it dropped) ends it quietly.
async fn write_generated(
    reader: &mut BufReader<TcpStream>,
    status: u16,
    headers: &[(String, String)],
    n: u64,
    chunked: bool,
) -> std::io::Result<bool> {
    let framing = if chunked { "transfer-encoding: chunked".to_string() } else { format!("content-length: {n}") };
    let mut out = format!("HTTP/1.1 {} {}\r\n{framing}\r\n", status, reason(status));
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    reader.get_mut().write_all(out.as_bytes()).await?;
    let block = vec![b'x'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let len = left.min(block.len() as u64) as usize;
        let sent = if chunked {
            let mut piece = format!("{len:x}\r\n").into_bytes();
            piece.extend_from_slice(&block[..len]);
            piece.extend_from_slice(b"\r\n");
            reader.get_mut().write_all(&piece).await
        } else {
            reader.get_mut().write_all(&block[..len]).await
        };
        if sent.is_err() {
            return Ok(false);
        }
        left -= len as u64;
    }
    if chunked && reader.get_mut().write_all(b"0\r\n\r\n").await.is_err() {
        return Ok(false);
    }
    Ok(true)
}

/// Counts a script's requests in flight (and the most at once) while held.
struct InFlight(Arc<ScriptStats>);

impl InFlight {
    fn enter(stats: &Arc<ScriptStats>) -> InFlight {
        use std::sync::atomic::Ordering::Relaxed;
        let now = stats.in_flight.fetch_add(1, Relaxed) + 1;
        stats.max_in_flight.fetch_max(now, Relaxed);
        InFlight(stats.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Answers one request; returns whether the connection stays open.
async fn respond(reader: &mut BufReader<TcpStream>, req: Incoming, state: &State) -> std::io::Result<bool> {
    let json_ct = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(name) = req.path.strip_prefix("/__admin/script/") {
        let spec: Result<ScriptSpec, _> = serde_json::from_slice(&req.body);
        return match spec {
            Ok(spec) => {
                let gate = spec.capacity.map(|n| Arc::new(tokio::sync::Semaphore::new(n as usize)));
                state.scripts.lock().insert(
                    name.to_string(),
                    Script {
                        steps: spec.steps,
                        gate,
                        stats: Default::default(),
                        cursor: (0, 0),
                        installed: Instant::now(),
                        log: Vec::new(),
                        nonces: Default::default(),
                    },
                );
                write_response(reader, 200, &json_ct, b"{\"ok\":true}").await.map(|_| true)
            }
            Err(e) => {
                let body = json!({"error": {"code": "bad_script", "message": e.to_string()}}).to_string();
                write_response(reader, 400, &json_ct, body.as_bytes()).await.map(|_| true)
            }
        };
    }
    if let Some(name) = req.path.strip_prefix("/__admin/provider/") {
        return match state.providers.configure(name, &req.body) {
            Ok(()) => write_response(reader, 200, &json_ct, b"{\"ok\":true}").await.map(|_| true),
            Err(e) => {
                let body = json!({"error": {"code": "bad_provider", "message": e}}).to_string();
                write_response(reader, 400, &json_ct, body.as_bytes()).await.map(|_| true)
            }
        };
    }
    if req.path.starts_with("/ledger/") && req.method == "POST" {
        let header = |n: &str| req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.as_str());
        return match state.ledger.arrive(header("idempotency-key"), header("x-op-id")) {
            Ok(v) => write_response(reader, 200, &json_ct, v.to_string().as_bytes()).await.map(|_| true),
            Err(e) => write_response(reader, 400, &json_ct, json!({"error": e}).to_string().as_bytes()).await.map(|_| true),
        };
    }
    if req.path == "/__admin/ledger" || req.path == "/__admin/ledger/reset" {
        if req.path.ends_with("/reset") {
            state.ledger.reset();
        }
        return write_response(reader, 200, &json_ct, state.ledger.summary().to_string().as_bytes()).await.map(|_| true);
    }
    if req.path == "/v1/traces" {
        return match state.otlp.accept(&req.body) {
            Ok(hold) => {
                tokio::time::sleep(Duration::from_millis(hold)).await;
                let ct = vec![("content-type".to_string(), "application/x-protobuf".to_string())];
                write_response(reader, 200, &ct, b"").await.map(|_| true)
            }
            Err(e) => write_response(reader, 400, &json_ct, json!({"error": e}).to_string().as_bytes()).await.map(|_| true),
        };
    }
    if let Some(rest) = req.path.strip_prefix("/__admin/otlp/") {
        if rest == "reset" {
            state.otlp.reset();
        } else if let Some(ms) = rest.strip_prefix("hold/").and_then(|m| m.parse().ok()) {
            state.otlp.hold(ms);
        }
        let body = state.otlp.dump().to_string();
        return write_response(reader, 200, &json_ct, body.as_bytes()).await.map(|_| true);
    }
    if let Some(name) = req.path.strip_prefix("/__admin/provider-log/") {
        let body = state.providers.log(name).to_string();
        return write_response(reader, 200, &json_ct, body.as_bytes()).await.map(|_| true);
    }
    if let Some(rest) = req.path.strip_prefix("/llm/") {
        let name = rest.split(['/', '?']).next().unwrap_or("").to_string();
        return provider::serve(reader, &state.providers, &name, &req.path, &req.headers, &req.body).await;
    }
    if let Some(name) = req.path.strip_prefix("/__admin/stats/") {
        use std::sync::atomic::Ordering::Relaxed;
        let body = match state.scripts.lock().get(name) {
            Some(s) => json!({
                "requests": s.log.len(),
                "disconnects": s.stats.disconnects.load(Relaxed),
                "max_in_flight": s.stats.max_in_flight.load(Relaxed),
            }),
            None => json!({"requests": 0, "disconnects": 0, "max_in_flight": 0}),
        };
        return write_response(reader, 200, &json_ct, body.to_string().as_bytes()).await.map(|_| true);
    }
    if let Some(name) = req.path.strip_prefix("/__admin/log/") {
        let log = state.scripts.lock().get(name).map(|s| s.log.clone()).unwrap_or_default();
        let body = json!({ "requests": log }).to_string();
        return write_response(reader, 200, &json_ct, body.as_bytes()).await.map(|_| true);
    }
    let script_name = req
        .path
        .strip_prefix("/s/")
        .map(|rest| rest.split(['/', '?']).next().unwrap_or("").to_string());
    let mut gate = None;
    let mut stats = None;
    let mut verified: Option<Result<Value, String>> = None;
    let step = match script_name {
        None => {
            return write_response(reader, 200, &json_ct, b"{\"ok\":true}").await.map(|_| true);
        }
        Some(name) => {
            let mut scripts = state.scripts.lock();
            match scripts.get_mut(&name) {
                None => None,
                Some(script) => {
                    let headers: serde_json::Map<String, Value> =
                        req.headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
                    let step = script.next_step();
                    let mut entry = json!({
                        "method": req.method,
                        "path": req.path,
                        "headers": headers,
                        "header_list": req.headers,
                        "body_len": req.body.len(),
                        "body": String::from_utf8_lossy(&req.body),
                        "at_ms": script.installed.elapsed().as_secs_f64() * 1000.0,
                    });
                    if let Some(spec) = &step.verify {
                        let seen = signed::Seen { method: &req.method, target: &req.path, headers: &req.headers, body: &req.body };
                        let r = signed::check(spec, &seen, &mut script.nonces);
                        entry["verified"] = match &r {
                            Ok(what) => what.clone(),
                            Err(why) => json!({"error": why}),
                        };
                        verified = Some(r);
                    }
                    script.log.push(entry);
                    gate = script.gate.clone();
                    stats = Some(script.stats.clone());
                    Some(step)
                }
            }
        }
    };
    let script = req.path.strip_prefix("/s/").and_then(|r| r.split(['/', '?']).next()).unwrap_or("").to_string();
    let Some(step) = step else {
        let body = br#"{"error":{"code":"no_script","message":"no script installed for this path"}}"#;
        return write_response(reader, 404, &json_ct, body).await.map(|_| true);
    };
    let stats = stats.expect("a scripted request has stats");
    let verified = match verified {
        Some(Err(why)) => {
            let body = json!({"error": {"code": "bad_signature", "message": why}}).to_string();
            return write_response(reader, 401, &json_ct, body.as_bytes()).await.map(|_| true);
        }
        Some(Ok(what)) => Some(what),
        None => None,
    };
    let _in_flight = InFlight::enter(&stats);
    // A capacity: the rest queue here, as a saturated server's requests would.
    let _served = match &gate {
        Some(g) => Some(g.clone().acquire_owned().await.expect("the gate is never closed")),
        None => None,
    };
    if let Some(ms) = step.delay_ms {
        // Watch the connection while the answer waits: a client that gives up is counted.
        let mut probe = [0u8; 1];
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            n = reader.get_mut().read(&mut probe) => {
                if matches!(n, Ok(0) | Err(_)) {
                    stats.disconnects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(false);
                }
                // A byte of a pipelined request: not something these tests send.
                return Ok(false);
            }
        }
    }
    match step.action.as_deref() {
        Some("hang") => {
            // Hold the connection open without answering until the client gives up.
            let mut sink = [0u8; 1024];
            while reader.read(&mut sink).await? > 0 {}
            return Ok(false);
        }
        Some("reset") => {
            // SO_LINGER 0 makes close() send RST instead of FIN.
            let std_stream = reader.get_ref();
            let sock = socket2::SockRef::from(std_stream);
            sock.set_linger(Some(Duration::ZERO))?;
            return Ok(false);
        }
        _ => {}
    }
    if let Some(raw) = &step.raw {
        reader.get_mut().write_all(fill(raw, state, &script).as_bytes()).await?;
        reader.get_mut().shutdown().await?;
        return Ok(false);
    }
    let mut headers: Vec<(String, String)> =
        step.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), fill(v, state, &script))).collect();
    if let Some(chunks) = &step.chunks {
        let status = step.status.unwrap_or(200);
        let mut out = format!("HTTP/1.1 {} {}\r\ntransfer-encoding: chunked\r\ncontent-type: text/plain\r\n", status, reason(status));
        for (k, v) in &headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        reader.get_mut().write_all(out.as_bytes()).await?;
        for c in chunks {
            if let Some(ms) = c.delay_ms {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let piece = format!("{:x}\r\n{}\r\n", c.data.len(), c.data);
            // A client that stopped reading closes: stop quietly.
            if reader.get_mut().write_all(piece.as_bytes()).await.is_err() {
                return Ok(false);
            }
        }
        if step.cut {
            reader.get_mut().shutdown().await?;
            return Ok(false);
        }
        reader.get_mut().write_all(b"0\r\n\r\n").await?;
        return Ok(true);
    }
    headers.extend(step.header_list.iter().map(|(k, v)| (k.to_ascii_lowercase(), fill(v, state, &script))));
    for i in 0..step.many_headers.unwrap_or(0) {
        headers.push((format!("x-n-{i}"), "1".into()));
    }
    if let Some(n) = step.body_bytes.filter(|n| *n > 1 << 20) {
        // Large bodies are generated as they are written, never held whole.
        headers.push(("content-type".into(), "text/plain".into()));
        let status = step.status.unwrap_or(200);
        return write_generated(reader, status, &headers, n, step.chunked).await;
    }
    let body: Vec<u8> = if let Some(n) = step.body_bytes {
        headers.push(("content-type".into(), "text/plain".into()));
        vec![b'x'; n as usize]
    } else if let Some(j) = &step.json {
        headers.push(("content-type".into(), "application/json".into()));
        j.to_string().into_bytes()
    } else if let Some(h) = &step.html {
        headers.push(("content-type".into(), "text/html; charset=utf-8".into()));
        h.clone().into_bytes()
    } else if let Some(b) = &step.body {
        headers.push(("content-type".into(), "text/plain".into()));
        b.clone().into_bytes()
    } else if let Some(what) = &verified {
        headers.push(("content-type".into(), "application/json".into()));
        json!({ "verified": what }).to_string().into_bytes()
    } else {
        headers.push(("content-type".into(), "application/json".into()));
        b"{\"ok\":true}".to_vec()
    };
    if let Some(ra) = &step.retry_after {
        headers.push(("retry-after".into(), ra.clone()));
    }
    if let Some(s) = step.retry_after_date_s {
        let at = SystemTime::now() + Duration::from_secs(s);
        headers.push(("retry-after".into(), httpdate::fmt_http_date(at)));
    }
    let status = step.status.unwrap_or(200);
    if step.action.as_deref() == Some("truncate") {
        let mut out = format!("HTTP/1.1 {} {}\r\ncontent-length: {}\r\n", status, reason(status), body.len() + 100);
        for (k, v) in &headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&body[..body.len() / 2]);
        reader.get_mut().write_all(&bytes).await?;
        reader.get_mut().shutdown().await?;
        return Ok(false);
    }
    if req.method == "HEAD" {
        // A HEAD answer carries the length but no body, or the next response on this connection breaks.
        let mut out = format!("HTTP/1.1 {} {}\r\ncontent-length: {}\r\n", status, reason(status), body.len());
        for (k, v) in &headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        reader.get_mut().write_all(out.as_bytes()).await?;
        return Ok(true);
    }
    if step.chunked {
        let mut out = format!("HTTP/1.1 {} {}\r\ntransfer-encoding: chunked\r\n", status, reason(status));
        for (k, v) in &headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        reader.get_mut().write_all(out.as_bytes()).await?;
        for chunk in body.chunks(64 * 1024) {
            reader.get_mut().write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
            // A client that gave up (over its size limit) closes: stop quietly.
            if reader.get_mut().write_all(chunk).await.is_err() {
                return Ok(false);
            }
            reader.get_mut().write_all(b"\r\n").await?;
        }
        reader.get_mut().write_all(b"0\r\n\r\n").await?;
        return Ok(true);
    }
    write_response(reader, status, &headers, &body).await?;
    Ok(true)
}
