//! The one structured record per request, and where it goes.
//!
//! The record has named fields and is formatted to JSON only at the edge (the
//! stderr writer). Host listeners get the record itself; they are called after
//! every lock is released. No header, query string or body is ever in a record.

use std::io::Write;
use std::sync::mpsc;
use std::sync::OnceLock;

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Unix time in milliseconds when the request ended.
    pub ts_ms: u64,
    pub client: String,
    pub trace_id: String,
    pub span_id: String,
    pub service: String,
    pub endpoint: String,
    pub method: String,
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

/// Writes JSON lines to stderr from one background thread, so a request never
/// waits on the terminal or a pipe.
pub fn write_stderr(record: &RequestRecord) {
    static SENDER: OnceLock<mpsc::SyncSender<String>> = OnceLock::new();
    let tx = SENDER.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel::<String>(65536);
        std::thread::Builder::new()
            .name("harness-log".into())
            .spawn(move || {
                let stderr = std::io::stderr();
                while let Ok(line) = rx.recv() {
                    // Lock per batch, never across waits, so host code can still write to stderr.
                    let mut out = std::io::BufWriter::new(stderr.lock());
                    let _ = writeln!(out, "{line}");
                    while let Ok(more) = rx.try_recv() {
                        let _ = writeln!(out, "{more}");
                    }
                    let _ = out.flush();
                }
            })
            .expect("spawn the log writer thread");
        tx
    });
    // A full queue drops the line rather than stall a request; the metrics still count it.
    let _ = tx.try_send(record.to_json());
}
