//! The audit log: one JSON line per request to a rotating file, written on the
//! client's own thread, and/or one `audit_record` event per request to host listeners.
//!
//! Guarantees: off unless `audit.enabled`; never a header value, token or query
//! string; bodies only with `include_bodies`, and then every JSON field named in
//! `mask` (any depth, case-insensitive) and every match of `patterns` is `***`
//! before anything is written, and known secrets are scrubbed as in log lines;
//! the file rotates at `max_bytes` keeping `keep` old files; a full queue drops
//! records and counts them (`harness_audit_dropped_total`), never blocking a request.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::HarnessError;
use crate::redact::{escape_control, Secrets};

/// Records queued before new ones are dropped (and counted).
const QUEUE: usize = 100_000;
/// Longest body kept in a record (after masking).
const MAX_BODY: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    pub enabled: bool,
    pub sink: AuditSink,
    pub include_bodies: bool,
    /// JSON field names whose values are masked (any depth, case-insensitive).
    pub mask: Vec<String>,
    /// Regular expressions whose matches in string values are masked.
    pub patterns: Vec<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: false,
            sink: AuditSink::default(),
            include_bodies: false,
            mask: ["password", "passwd", "secret", "token", "access_token", "refresh_token", "authorization", "card_number", "cvv", "id_card", "phone"]
                .into_iter()
                .map(String::from)
                .collect(),
            patterns: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSink {
    /// The file (default `audit.jsonl`, unless the records go to listeners only).
    pub file: Option<String>,
    pub max_bytes: u64,
    pub keep: u32,
    /// Each record also goes to the client's listeners as an `audit_record` event.
    pub listener: bool,
}

impl Default for AuditSink {
    fn default() -> Self {
        AuditSink { file: None, max_bytes: 100 * 1024 * 1024, keep: 5, listener: false }
    }
}

impl AuditSink {
    /// Where records are written: the named file, else `audit.jsonl` unless only listeners were asked for.
    pub fn file(&self) -> Option<&str> {
        match (&self.file, self.listener) {
            (Some(f), _) => Some(f),
            (None, false) => Some("audit.jsonl"),
            (None, true) => None,
        }
    }
}

impl AuditConfig {
    pub fn validate(&self) -> Result<(), HarnessError> {
        if !self.enabled {
            return Ok(());
        }
        if self.sink.file.as_deref() == Some("") {
            return Err(HarnessError::config("audit.sink.file: expected a path, got an empty string"));
        }
        if self.sink.max_bytes < 1024 {
            return Err(HarnessError::config(format!("audit.sink.max_bytes: expected an integer >= 1024, got {}", self.sink.max_bytes)));
        }
        for (i, p) in self.patterns.iter().enumerate() {
            regex::Regex::new(p).map_err(|e| HarnessError::config(format!("audit.patterns[{i}]: not a regular expression: {}", escape_control(&e.to_string()))))?;
        }
        Ok(())
    }
}

/// One request, as the audit log keeps it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditRecord {
    pub ts_ms: u64,
    pub client: Arc<str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The service, or the route the caller named.
    pub service: Arc<str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Arc<str>>,
    pub endpoint: Arc<str>,
    pub method: Arc<str>,
    pub status: Option<u16>,
    /// `ok`, or the error kind.
    pub outcome: &'static str,
    pub attempts: u32,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    pub trace_id: String,
    /// With `include_bodies`, already masked; a host's printed form leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-sensitive" = true))]
    pub request_body: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-sensitive" = true))]
    pub response_body: Option<Value>,
}

/// Masks bodies as the config says.
pub struct Masker {
    fields: Vec<String>,
    patterns: Vec<regex::Regex>,
}

impl Masker {
    pub fn new(cfg: &AuditConfig) -> Self {
        Masker {
            fields: cfg.mask.iter().map(|f| f.to_ascii_lowercase()).collect(),
            patterns: cfg.patterns.iter().filter_map(|p| regex::Regex::new(p).ok()).collect(),
        }
    }

    /// A body as the audit record holds it: masked JSON, or a note for anything else.
    pub fn body(&self, bytes: &[u8], secrets: &Secrets) -> Value {
        let scrubbed = secrets.scrub_bytes(bytes);
        let bytes = scrubbed.as_deref().unwrap_or(bytes);
        match crate::json::parse_bounded(bytes) {
            Ok(mut v) => {
                self.mask(&mut v);
                let text = v.to_string();
                if text.len() > MAX_BODY {
                    Value::String(format!("<{} bytes of JSON, over the audit limit>", text.len()))
                } else {
                    v
                }
            }
            Err(_) => Value::String(format!("<{} bytes, not JSON>", bytes.len())),
        }
    }

    /// Masks in place, without recursion (bodies may be deep).
    fn mask(&self, v: &mut Value) {
        let mut stack: Vec<&mut Value> = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::Object(map) => {
                    for (k, child) in map.iter_mut() {
                        if self.fields.iter().any(|f| f.eq_ignore_ascii_case(k)) {
                            *child = Value::String("***".into());
                        } else {
                            stack.push(child);
                        }
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::String(s) => {
                    for p in &self.patterns {
                        if p.is_match(s) {
                            *s = p.replace_all(s, "***").into_owned();
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A client's audit file: a queue and a writer thread, started on first use and
/// replaced when a reload changes the sink (the old writer drains what it holds, then ends).
pub struct AuditLog {
    tx: Mutex<Option<(AuditSink, SyncSender<Msg>)>>,
    dropped: Counter,
}

enum Msg {
    Record(Box<AuditRecord>),
    Flush(std::sync::mpsc::Sender<()>),
}

impl AuditLog {
    pub fn new(dropped: Counter) -> Self {
        AuditLog { tx: Mutex::new(None), dropped }
    }

    /// Queues a record for `sink`; never blocks.
    pub fn write(&self, sink: &AuditSink, record: AuditRecord) {
        let Some(file) = sink.file() else { return };
        let mut slot = self.tx.lock();
        if slot.as_ref().is_none_or(|(current, _)| current != sink) {
            *slot = Some((sink.clone(), start(file.to_string(), sink.clone())));
        }
        let (_, tx) = slot.as_ref().expect("just set");
        match tx.try_send(Msg::Record(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.inc();
            }
        }
    }

    /// Waits until every queued record is written.
    pub fn flush(&self) {
        let tx = self.tx.lock().as_ref().map(|(_, tx)| tx.clone());
        if let Some(tx) = tx {
            let (done, wait) = std::sync::mpsc::channel();
            if tx.send(Msg::Flush(done)).is_ok() {
                let _ = wait.recv_timeout(std::time::Duration::from_secs(5));
            }
        }
    }
}

fn start(file: String, sink: AuditSink) -> SyncSender<Msg> {
    let (tx, rx) = sync_channel(QUEUE);
    let _ = std::thread::Builder::new().name("harness-audit".into()).spawn(move || writer(file, sink, rx));
    tx
}

fn writer(file_name: String, sink: AuditSink, rx: Receiver<Msg>) {
    let path = PathBuf::from(&file_name);
    let mut file: Option<std::fs::File> = None;
    let mut size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut reported = false;
    for msg in rx {
        let record = match msg {
            Msg::Record(r) => r,
            Msg::Flush(done) => {
                if let Some(f) = file.as_mut() {
                    let _ = f.flush();
                }
                let _ = done.send(());
                continue;
            }
        };
        let mut line = serde_json::to_vec(&*record).unwrap_or_default();
        line.push(b'\n');
        if size + line.len() as u64 > sink.max_bytes && size > 0 {
            file = None;
            rotate(&path, sink.keep);
            size = 0;
        }
        if file.is_none() {
            match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => file = Some(f),
                Err(e) => {
                    if !reported {
                        eprintln!("{{\"event\":\"harness.audit_unwritable\",\"file\":{:?},\"error\":{:?}}}", file_name, e.to_string());
                        reported = true;
                    }
                    continue;
                }
            }
        }
        if let Some(f) = file.as_mut() {
            if f.write_all(&line).is_ok() {
                size += line.len() as u64;
            }
        }
    }
}

/// `audit.jsonl` -> `audit.jsonl.1` -> ... -> `audit.jsonl.<keep>` (the oldest is dropped).
fn rotate(path: &std::path::Path, keep: u32) {
    let name = |i: u32| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{i}"));
        PathBuf::from(p)
    };
    if keep == 0 {
        let _ = std::fs::remove_file(path);
        return;
    }
    let _ = std::fs::remove_file(name(keep));
    for i in (1..keep).rev() {
        let _ = std::fs::rename(name(i), name(i + 1));
    }
    let _ = std::fs::rename(path, name(1));
}

/// The bodies of a request and its answer, masked, when the config asks for them.
pub fn bodies(cfg: &AuditConfig, masker: &Masker, request: Option<&Bytes>, response: Option<&Bytes>, secrets: &Secrets) -> (Option<Value>, Option<Value>) {
    if !cfg.include_bodies {
        return (None, None);
    }
    (request.map(|b| masker.body(b, secrets)), response.map(|b| masker.body(b, secrets)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_and_patterns_are_masked_at_any_depth() {
        let cfg = AuditConfig { patterns: vec![r"\b\d{4}-\d{4}-\d{4}-\d{4}\b".into()], ..Default::default() };
        let m = Masker::new(&cfg);
        let body = json!({"user": {"Password": "hunter2", "phone": "555-0100", "note": "card 4111-1111-1111-1111 ok"}, "items": [{"card_number": "4111"}]});
        let v = m.body(body.to_string().as_bytes(), &Secrets::default());
        let text = v.to_string();
        assert!(!text.contains("hunter2") && !text.contains("555-0100") && !text.contains("4111"), "{text}");
        assert_eq!(v["user"]["note"], "card *** ok");
        assert_eq!(m.body(b"<html>", &Secrets::default()), json!("<6 bytes, not JSON>"));
    }

    #[test]
    fn the_file_rotates_keeping_the_configured_number() {
        let dir = std::env::temp_dir().join(format!("harness-audit-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("a.jsonl");
        for _ in 0..3 {
            std::fs::write(&path, b"x").unwrap();
            rotate(&path, 2);
        }
        assert!(!path.exists());
        assert!(dir.join("a.jsonl.1").exists() && dir.join("a.jsonl.2").exists() && !dir.join("a.jsonl.3").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
