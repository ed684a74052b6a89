//! Host adapters written in JS (`client.registerAdapter(name, { buildRequest, parseResponse,
//! parseStreamEvent })`): the core's `HostAdapter` for a JS object, each step one call into
//! JS through `host.rs` (a weak threadsafe function, answers settled by id). The JS wrapper
//! (`index.js`) runs the method for the step; a throw or rejection becomes
//! `"<Name>: <message>"`, which the core names with the adapter and step.

use std::sync::Arc;

use harness_core::adapters::host::HostStep;
use harness_core::adapters::HostAdapter;
use harness_core::transport::BoxFuture;
use napi::bindgen_prelude::*;

use crate::host::{Answer, AskArgs, JsHost};

pub(crate) struct NodeHostAdapter(JsHost);

impl HostAdapter for NodeHostAdapter {
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Answer> {
        self.0.call(step.as_str(), input)
    }
}

/// `ask` is `(id, step, input) => ...`: it runs the JS adapter's method and settles `id`.
pub(crate) fn node_adapter(ask: Function<AskArgs, Unknown<'static>>) -> Result<Arc<dyn HostAdapter>> {
    Ok(Arc::new(NodeHostAdapter(JsHost::new(ask, "adapter")?)))
}
