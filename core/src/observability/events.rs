//! One client's event queue and the thread that hands events to host sinks.
//!
//! Guarantees: `emit` never blocks and never calls host code (it only enqueues);
//! sinks run on the client's event thread, in order; a slow sink fills the
//! bounded queue and further events are dropped and counted
//! (`harness_events_dropped_total`), never slowing a request; a sink that fails
//! or panics is reported once on stderr and keeps receiving events.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;

use crate::host::{Event, EventSink};
use crate::observability::log::RequestRecord;

/// What the event thread delivers: an event to every listener, or a log record to the host's log sink.
enum Delivery {
    Event(Event),
    Log(RequestRecord),
}

/// Events queued per client before new ones are dropped.
pub const EVENT_QUEUE: usize = 10_000;

struct Sink {
    id: u64,
    sink: Arc<dyn EventSink>,
    reported: AtomicBool,
}

/// Most deliveries handed to sinks in one batch.
const BATCH: usize = 256;

/// The queue's sender, the event thread, and the process that started it.
type Running = (SyncSender<Delivery>, JoinHandle<()>, u32);

pub struct EventHub {
    sinks: Arc<RwLock<Vec<Arc<Sink>>>>,
    next_id: std::sync::atomic::AtomicU64,
    log_sink: Arc<RwLock<Option<Arc<Sink>>>>,
    active: AtomicBool,
    running: Mutex<Option<Running>>,
    dropped: Counter,
}

impl EventHub {
    pub fn new(dropped: Counter) -> Self {
        EventHub {
            sinks: Arc::default(),
            next_id: std::sync::atomic::AtomicU64::new(1),
            log_sink: Arc::default(),
            active: AtomicBool::new(false),
            running: Mutex::new(None),
            dropped,
        }
    }

    /// The host's logging (Python `logging`, SLF4J): gets `RequestFinished` records sent with `log`.
    pub fn set_log_sink(&self, sink: Arc<dyn EventSink>) {
        *self.log_sink.write() = Some(Arc::new(Sink { id: 0, sink, reported: AtomicBool::new(false) }));
    }

    /// Queues a request record for the host's log sink (see `set_log_sink`).
    pub fn log(&self, record: RequestRecord) {
        if self.log_sink.read().is_some() {
            self.deliver(Delivery::Log(record));
        }
    }

    /// Whether anyone listens (so callers can skip building an event).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Adds a listener; the id removes it again.
    pub fn add(&self, sink: Arc<dyn EventSink>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.sinks.write().push(Arc::new(Sink { id, sink, reported: AtomicBool::new(false) }));
        self.active.store(true, Ordering::Release);
        id
    }

    /// Removes a listener; with none left, events are no longer built at all.
    pub fn remove(&self, id: u64) -> bool {
        let mut sinks = self.sinks.write();
        let before = sinks.len();
        sinks.retain(|s| s.id != id);
        self.active.store(!sinks.is_empty(), Ordering::Release);
        sinks.len() != before
    }

    /// Counts events a binding had to drop after the core delivered them.
    pub fn note_dropped(&self, n: u64) {
        self.dropped.inc_by(n);
    }

    /// Queues an event for the sinks; drops (and counts) it when the queue is full.
    pub fn emit(&self, event: Event) {
        if self.is_active() {
            self.deliver(Delivery::Event(event));
        }
    }

    fn deliver(&self, delivery: Delivery) {
        let mut running = self.running.lock();
        if running.as_ref().is_some_and(|r| r.2 != std::process::id()) {
            std::mem::forget(running.take());
        }
        let (tx, _, _) = running.get_or_insert_with(|| {
            let (tx, rx) = sync_channel(EVENT_QUEUE);
            let (sinks, log_sink) = (self.sinks.clone(), self.log_sink.clone());
            let thread = std::thread::Builder::new()
                .name("harness-events".into())
                .spawn(move || dispatch(rx, sinks, log_sink))
                .expect("spawn the event thread");
            (tx, thread, std::process::id())
        });
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(delivery) {
            self.dropped.inc();
        }
    }

    /// Delivers every queued event and stops the thread (the next event starts a new one).
    pub fn flush(&self) {
        let running = self.running.lock().take();
        if let Some((tx, thread, pid)) = running {
            if pid != std::process::id() {
                return;
            }
            drop(tx);
            // A sink must not be able to wait on its own event thread.
            if std::thread::current().id() != thread.thread().id() {
                let _ = thread.join();
            }
        }
    }
}

fn dispatch(rx: Receiver<Delivery>, sinks: Arc<RwLock<Vec<Arc<Sink>>>>, log_sink: Arc<RwLock<Option<Arc<Sink>>>>) {
    let mut events: Vec<Event> = Vec::with_capacity(BATCH);
    let mut logs: Vec<Event> = Vec::new();
    while let Ok(first) = rx.recv() {
        // Whatever else is already queued goes in the same batch: one host crossing for many events.
        for delivery in std::iter::once(first).chain(rx.try_iter().take(BATCH - 1)) {
            match delivery {
                Delivery::Event(e) => events.push(e),
                Delivery::Log(r) => logs.push(Event::RequestFinished(r)),
            }
        }
        if !events.is_empty() {
            // Cloned out so no lock is held while host code runs.
            let current: Vec<Arc<Sink>> = sinks.read().clone();
            for s in current {
                call(&s, &events);
            }
            events.clear();
        }
        if !logs.is_empty() {
            let sink = log_sink.read().clone();
            if let Some(s) = sink {
                call(&s, &logs);
            }
            logs.clear();
        }
    }
}

fn call(s: &Sink, batch: &[Event]) {
    let failure = match catch_unwind(AssertUnwindSafe(|| s.sink.on_events(batch))) {
        Ok(Ok(())) => return,
        Ok(Err(message)) => message,
        Err(_) => "the listener panicked".to_string(),
    };
    if !s.reported.swap(true, Ordering::AcqRel) {
        let line = serde_json::json!({
            "event": "harness.listener_failed",
            "while": batch.first().map(Event::kind).unwrap_or(""),
            "error": crate::redact::escape_control(&failure),
            "note": "reported once per listener; it keeps receiving events",
        });
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Records events; while `hold` is set it stalls, like a listener stuck on I/O.
    struct Slow(Mutex<Vec<String>>, AtomicBool);
    impl EventSink for Slow {
        fn on_event(&self, e: &Event) -> Result<(), String> {
            while self.1.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.0.lock().push(e.kind().to_string());
            Ok(())
        }
    }

    struct Failing(Mutex<u32>);
    impl EventSink for Failing {
        fn on_event(&self, _: &Event) -> Result<(), String> {
            *self.0.lock() += 1;
            Err("boom".into())
        }
    }

    fn reloaded() -> Event {
        Event::ConfigReloaded { version: "v".into(), source: "test".into() }
    }

    #[test]
    fn a_slow_sink_never_blocks_emit_and_drops_are_counted() {
        let dropped = Counter::default();
        let hub = EventHub::new(dropped.clone());
        let slow = Arc::new(Slow(Mutex::new(Vec::new()), AtomicBool::new(true)));
        hub.add(slow.clone());
        let start = std::time::Instant::now();
        for _ in 0..(EVENT_QUEUE + 5_000) {
            hub.emit(reloaded());
        }
        assert!(start.elapsed() < Duration::from_secs(2), "emit blocked: {:?}", start.elapsed());
        assert!(dropped.get() >= 5_000 - BATCH as u64, "a full queue drops: {}", dropped.get());
        slow.1.store(false, Ordering::Release);
        hub.flush();
        let delivered = slow.0.lock().len() as u64;
        assert_eq!(delivered + dropped.get(), (EVENT_QUEUE + 5_000) as u64, "every event delivered or counted");
    }

    #[test]
    fn a_failing_sink_keeps_receiving_and_others_are_unaffected() {
        let hub = EventHub::new(Counter::default());
        let failing = Arc::new(Failing(Mutex::new(0)));
        let ok = Arc::new(Slow(Mutex::new(Vec::new()), AtomicBool::new(false)));
        hub.add(failing.clone());
        hub.add(ok.clone());
        for _ in 0..3 {
            hub.emit(reloaded());
        }
        hub.flush();
        assert_eq!(*failing.0.lock(), 3);
        assert_eq!(ok.0.lock().len(), 3);
    }

    #[test]
    fn no_sink_no_thread() {
        let hub = EventHub::new(Counter::default());
        hub.emit(reloaded());
        assert!(hub.running.lock().is_none());
    }
}
