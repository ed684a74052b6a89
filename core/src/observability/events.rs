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
    sink: Arc<dyn EventSink>,
    reported: AtomicBool,
}

/// The queue's sender, the event thread, and the process that started it.
type Running = (SyncSender<Delivery>, JoinHandle<()>, u32);

pub struct EventHub {
    sinks: Arc<RwLock<Vec<Arc<Sink>>>>,
    log_sink: Arc<RwLock<Option<Arc<Sink>>>>,
    active: AtomicBool,
    running: Mutex<Option<Running>>,
    dropped: Counter,
}

impl EventHub {
    pub fn new(dropped: Counter) -> Self {
        EventHub {
            sinks: Arc::default(),
            log_sink: Arc::default(),
            active: AtomicBool::new(false),
            running: Mutex::new(None),
            dropped,
        }
    }

    /// The host's logging (Python `logging`, SLF4J): gets `RequestFinished` records sent with `log`.
    pub fn set_log_sink(&self, sink: Arc<dyn EventSink>) {
        *self.log_sink.write() = Some(Arc::new(Sink { sink, reported: AtomicBool::new(false) }));
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

    pub fn add(&self, sink: Arc<dyn EventSink>) {
        self.sinks.write().push(Arc::new(Sink { sink, reported: AtomicBool::new(false) }));
        self.active.store(true, Ordering::Release);
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
    while let Ok(delivery) = rx.recv() {
        match delivery {
            Delivery::Event(event) => {
                // Cloned out so no lock is held while host code runs.
                let current: Vec<Arc<Sink>> = sinks.read().clone();
                for s in current {
                    call(&s, &event);
                }
            }
            Delivery::Log(record) => {
                let sink = log_sink.read().clone();
                if let Some(s) = sink {
                    call(&s, &Event::RequestFinished(record));
                }
            }
        }
    }
}

fn call(s: &Sink, event: &Event) {
    let failure = match catch_unwind(AssertUnwindSafe(|| s.sink.on_event(event))) {
        Ok(Ok(())) => return,
        Ok(Err(message)) => message,
        Err(_) => "the listener panicked".to_string(),
    };
    if !s.reported.swap(true, Ordering::AcqRel) {
        let line = serde_json::json!({
            "event": "harness.listener_failed",
            "while": event.kind(),
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
        assert!(dropped.get() >= 4_999, "a full queue drops: {}", dropped.get());
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
