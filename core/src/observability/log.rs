//! The one structured record per request, and the client's own stderr writer.
//!
//! The record has named fields and is formatted to JSON only at the edge (the
//! writer thread). Guarantees: no header, query string or body is ever in a
//! record; the writer belongs to one client (closing it flushes only that
//! client's records), starts with the first record and sleeps until there is
//! work (no polling); a full queue drops records and says how many in its own line.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Unix time in milliseconds when the request ended.
    pub ts_ms: u64,
    pub client: Arc<str>,
    pub trace_id: crate::observability::trace::TraceId,
    pub span_id: crate::observability::trace::SpanId,
    pub service: Arc<str>,
    pub endpoint: Arc<str>,
    pub method: Arc<str>,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub attempts: u32,
    pub retry_count: u32,
    pub breaker: &'static str,
    /// Whether the body was streamed to the caller.
    pub streamed: bool,
    pub error_kind: Option<&'static str>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

impl RequestRecord {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record always serialises")
    }
}

/// Most records queued before new ones are dropped (and counted).
const MAX_PENDING: usize = 100_000;

/// One client's stderr writer: a queue and a thread started on first use.
#[derive(Default)]
pub struct LogWriter {
    state: Mutex<Option<Running>>,
    dropped: Arc<AtomicU64>,
}

struct Running {
    tx: SyncSender<RequestRecord>,
    thread: JoinHandle<()>,
    pid: u32,
}

impl LogWriter {
    /// Queues a record; never blocks the request.
    pub fn write(&self, record: RequestRecord) {
        let mut state = self.state.lock();
        // A forked child has no writer thread: start its own.
        if state.as_ref().is_some_and(|r| r.pid != std::process::id()) {
            std::mem::forget(state.take());
        }
        let running = state.get_or_insert_with(|| {
            let (tx, rx) = sync_channel(MAX_PENDING);
            let dropped = self.dropped.clone();
            let thread = std::thread::Builder::new()
                .name("harness-log".into())
                .spawn(move || write_loop(rx, dropped))
                .expect("spawn the log writer thread");
            Running { tx, thread, pid: std::process::id() }
        });
        if let Err(TrySendError::Full(_)) = running.tx.try_send(record) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes every queued record and stops the thread (the next record starts a new one).
    pub fn flush(&self) {
        let running = self.state.lock().take();
        if let Some(r) = running {
            if r.pid != std::process::id() {
                std::mem::forget(r);
                return;
            }
            drop(r.tx);
            let _ = r.thread.join();
        }
    }
}

/// After waking for a record, wait this long for more: one wake-up and one write per
/// batch under load, instead of one per request.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

fn write_loop(rx: Receiver<RequestRecord>, dropped: Arc<AtomicU64>) {
    // Blocks until there is work; ends when the writer is flushed or dropped.
    while let Ok(first) = rx.recv() {
        // Not waiting in `recv` while it sleeps, so senders wake no one meanwhile.
        std::thread::sleep(BATCH_WINDOW);
        let stderr = std::io::stderr();
        // Lock stderr per batch, never across waits, so host code can still write to it.
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, stderr.lock());
        // Serialised straight into the buffer: no string per record.
        for r in std::iter::once(first).chain(rx.try_iter().take(65_536)) {
            let _ = serde_json::to_writer(&mut out, &r);
            let _ = out.write_all(b"\n");
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(out, "{{\"event\":\"harness.log_overflow\",\"dropped_records\":{lost}}}");
        }
        let _ = out.flush();
    }
}
