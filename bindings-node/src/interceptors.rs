//! Interceptors written in JS (`client.use({ name, before, after, services, level, wantBody })`):
//! the core's `HostInterceptor` for a JS object, each phase one call into JS through `host.rs`
//! (a weak threadsafe function, answers settled by id), so JS runs on its own thread and no
//! tokio worker waits on it. The JS wrapper (`index.js`) turns the core's JSON into the
//! camelCase request or response, runs `before` or `after` and crosses its changes, or a
//! `Reject` as `{"fail": ...}`; any other throw becomes `"<Name>: <message>"`. The core owns
//! the rest: the time limit, checking the changes, the error.

use std::sync::Arc;

use harness_core::interceptors::{HostInterceptor, Level, Phase, Registration};
use harness_core::transport::BoxFuture;
use harness_core::HarnessError;
use napi::bindgen_prelude::*;

use crate::host::{Answer, AskArgs, JsHost};

pub(crate) struct NodeInterceptor(JsHost);

impl HostInterceptor for NodeInterceptor {
    fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Answer> {
        self.0.call(phase.as_str(), input)
    }
}

/// The registration from JS's fields (`level` is `application`, `attempt` or absent).
pub(crate) fn registration(name: String, level: Option<String>, services: Option<Vec<String>>, before: bool, after: bool, want_body: bool) -> std::result::Result<Registration, HarnessError> {
    Ok(Registration {
        name,
        level: level.map(|l| Level::parse("level", &l)).transpose()?,
        services: services.unwrap_or_default(),
        before,
        after,
        want_body,
    })
}

/// `ask` is `(id, phase, input) => ...`: it runs the JS interceptor's function and settles `id`.
pub(crate) fn node_interceptor(ask: Function<AskArgs, Unknown<'static>>) -> Result<Arc<dyn HostInterceptor>> {
    Ok(Arc::new(NodeInterceptor(JsHost::new(ask, "interceptor")?)))
}
