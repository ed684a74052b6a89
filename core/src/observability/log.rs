//! The one structured record per request, and the client's own stderr writer.
//!
//! The record has named fields and is formatted to JSON only at the edge (the
//! writer thread). Guarantees: no header, query string or body is ever in a
//! record; the writer belongs to one client (closing it flushes only that
//! client's records), starts with the first record and sleeps until there is
//! work (no polling); a full queue drops records and says how many in its own line.

use std::io::Write;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RequestRecord {
    /// Unix time in milliseconds when the request ended.
    pub ts_ms: u64,
    pub client: Arc<str>,
    #[schemars(with = "String")]
    pub trace_id: crate::observability::trace::TraceId,
    #[schemars(with = "String")]
    pub span_id: crate::observability::trace::SpanId,
    pub service: Arc<str>,
    pub endpoint: Arc<str>,
    pub method: Arc<str>,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub attempts: u32,
    pub retry_count: u32,
    #[schemars(extend("enum" = ["closed", "open", "half_open"]))]
    pub breaker: &'static str,
    /// Whether the body was streamed to the caller.
    pub streamed: bool,
    pub error_kind: Option<&'static str>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Routed requests only: the route, the provider and model that answered, the cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// `cache` or `static` when no provider answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["cache", "static", null]))]
    pub fallback: Option<&'static str>,
    /// `validate: warn`: where and how the 2xx body did not match its schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_violation: Option<String>,
    /// The fault injected into the last faulted attempt (`latency`, `status`, `reset`, `stream_cut`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<&'static str>,
    /// What a cache did: `hit`, `revalidated`, `stale`, `exact`, `semantic`, `coalesced`, `miss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["hit", "revalidated", "stale", "exact", "semantic", "coalesced", "miss", null]))]
    pub cache: Option<&'static str>,
    /// `semantic`: how close the stored prompt was (cosine similarity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_similarity: Option<f32>,
    /// A cached chat answer: the provider cost it saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_saved_cost: Option<f64>,
}

impl RequestRecord {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record always serialises")
    }
}

/// Most records queued before new ones are dropped (and counted).
const MAX_PENDING: usize = 100_000;

/// After waking for a record, wait this long for more: one wake-up and one write per
/// batch under load, instead of one per request.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

/// One client's stderr writer: a queue and a thread started on first use.
///
/// The queue is a vector swapped out whole by the writer (memory reused batch after
/// batch), and the writer sleeps on a condition variable until there is work. A
/// client used after `fork()` refuses before it gets here, so no check is needed.
#[derive(Default)]
pub struct LogWriter {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    records: Vec<RequestRecord>,
    dropped: u64,
    /// The writer is blocked waiting for work (so a record must wake it).
    idle: bool,
    stop: bool,
}

impl LogWriter {
    /// Queues a record; never blocks the request beyond a short lock.
    pub fn write(&self, record: RequestRecord) {
        let mut q = self.shared.queue.lock();
        if q.records.len() >= MAX_PENDING {
            q.dropped += 1;
            return;
        }
        q.records.push(record);
        if q.idle {
            q.idle = false;
            drop(q);
            self.shared.wake.notify_one();
            return;
        }
        drop(q);
        let mut thread = self.thread.lock();
        if thread.is_none() {
            let shared = self.shared.clone();
            *thread = Some(
                std::thread::Builder::new()
                    .name("harness-log".into())
                    .spawn(move || write_loop(&shared))
                    .expect("spawn the log writer thread"),
            );
        }
    }

    /// Writes every queued record and stops the thread (the next record starts a new one).
    pub fn flush(&self) {
        // Held throughout, so no record can start a second writer meanwhile.
        let mut thread = self.thread.lock();
        let Some(handle) = thread.take() else { return };
        self.shared.queue.lock().stop = true;
        self.shared.wake.notify_one();
        let _ = handle.join();
        self.shared.queue.lock().stop = false;
    }
}

fn write_loop(shared: &Shared) {
    let mut batch: Vec<RequestRecord> = Vec::new();
    loop {
        let (dropped, stop) = {
            let mut q = shared.queue.lock();
            while q.records.is_empty() && !q.stop && q.dropped == 0 {
                q.idle = true;
                shared.wake.wait(&mut q);
            }
            q.idle = false;
            let stop = q.stop;
            if !stop {
                // Let a batch gather: senders do not wake the writer meanwhile.
                drop(q);
                std::thread::sleep(BATCH_WINDOW);
                q = shared.queue.lock();
            }
            std::mem::swap(&mut batch, &mut q.records);
            (std::mem::take(&mut q.dropped), q.stop)
        };
        if !batch.is_empty() || dropped > 0 {
            let stderr = std::io::stderr();
            // Lock stderr per batch, never across waits, so host code can still write to it.
            let mut out = std::io::BufWriter::with_capacity(64 * 1024, stderr.lock());
            // Serialised straight into the buffer: no string per record.
            for r in batch.drain(..) {
                let _ = serde_json::to_writer(&mut out, &r);
                let _ = out.write_all(b"\n");
            }
            if dropped > 0 {
                let _ = writeln!(out, "{{\"event\":\"harness.log_overflow\",\"dropped_records\":{dropped}}}");
            }
            let _ = out.flush();
        }
        if stop {
            return;
        }
    }
}
