//! The Node event sink: the core calls it on the client's event thread; it queues the
//! event's JSON on the completion queue (whose wake-up is weak, so listening never keeps
//! the process alive) and JS dispatches it to the client's listeners.

use std::sync::Arc;

use harness_core::{Event, EventSink};

use crate::completion::QueueInner;

pub(crate) struct NodeSink {
    queue: Arc<QueueInner>,
    /// How JS knows the client.
    key: u32,
}

impl NodeSink {
    pub(crate) fn new(queue: Arc<QueueInner>, key: u32) -> Self {
        NodeSink { queue, key }
    }
}

impl EventSink for NodeSink {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.queue.push_event(self.key, &event.to_json());
        // A listener that throws is reported in JS (process.emitWarning); it never reaches here.
        Ok(())
    }
}
