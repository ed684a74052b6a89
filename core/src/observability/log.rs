//! The one structured record per request, and where it goes.
//!
//! The record has named fields and is formatted to JSON only at the edge (the
//! stderr writer). Host listeners get the record itself; they are called after
//! every lock is released. No header, query string or body is ever in a record.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Unix time in milliseconds when the request ended.
    pub ts_ms: u64,
    pub client: Arc<str>,
    pub trace_id: String,
    pub span_id: String,
    pub service: Arc<str>,
    pub endpoint: Arc<str>,
    pub method: Arc<str>,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub attempts: u32,
    pub retry_count: u32,
    pub breaker: &'static str,
    pub error_kind: Option<&'static str>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

impl RequestRecord {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record always serialises")
    }
}

/// Host code that wants each record (Python logging, SLF4J, a Node listener).
pub trait RequestListener: Send + Sync {
    fn on_request(&self, record: &RequestRecord);
}

/// Records waiting for the stderr writer.
static PENDING: Mutex<Vec<RequestRecord>> = Mutex::new(Vec::new());
/// Most records held before new ones are dropped (counted in `dropped_records`).
const MAX_PENDING: usize = 100_000;
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Queues a record for stderr. A background thread formats and writes every
/// few milliseconds, so a request pays neither the formatting nor a wake-up.
pub fn write_stderr(record: RequestRecord) {
    static WRITER: OnceLock<()> = OnceLock::new();
    WRITER.get_or_init(|| {
        std::thread::Builder::new()
            .name("harness-log".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_millis(20));
                flush();
            })
            .expect("spawn the log writer thread");
    });
    let mut pending = PENDING.lock();
    if pending.len() < MAX_PENDING {
        pending.push(record);
    } else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes every queued record now (called by the writer thread and on client close).
pub fn flush() {
    let batch = std::mem::take(&mut *PENDING.lock());
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if batch.is_empty() && dropped == 0 {
        return;
    }
    // Lock stderr per batch, never across waits, so host code can still write to it.
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stderr.lock());
    for r in &batch {
        let _ = writeln!(out, "{}", r.to_json());
    }
    if dropped > 0 {
        let _ = writeln!(out, "{{\"event\":\"harness.log_overflow\",\"dropped_records\":{dropped}}}");
    }
    let _ = out.flush();
}
