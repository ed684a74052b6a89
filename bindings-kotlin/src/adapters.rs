//! Host adapters from Kotlin or Java: a provider's wire format written on the JVM, as the
//! core's `HostAdapter` (a UniFFI async foreign trait, like the token provider).
//!
//! The core awaits `call` from a task on its runtime, within the call's deadline. The foreign
//! call only starts a coroutine (the facade's dispatcher runs the host code, `Adapters.kt`)
//! and the future completes when it answers, so no tokio worker ever waits on JVM code; a
//! deadline that passes drops the future, which cancels the coroutine. Whatever the host code
//! throws comes back as `Err("<SimpleName>: <message>")`, which the core turns into a
//! `ProtocolError` naming the adapter and the step; nothing here panics.

use std::sync::Arc;

use harness_core::adapters::host::HostStep;
use harness_core::adapters::HostAdapter;
use harness_core::transport::BoxFuture;

/// Why the host adapter gave no answer: its exception, as text.
#[derive(uniffi::Error, Debug, Clone)]
pub enum AdapterError {
    Raised { reason: String },
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let AdapterError::Raised { reason } = self;
        f.write_str(reason)
    }
}

impl std::error::Error for AdapterError {}

/// An exception the facade did not catch (it catches all, but UniFFI needs a way in).
impl From<uniffi::UnexpectedUniFFICallbackError> for AdapterError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        AdapterError::Raised { reason: e.reason }
    }
}

/// Host code for one wire format: `step` is `build_request`, `parse_response` or
/// `parse_stream_event` (`HostStep::as_str`), `input` and the answer are JSON text
/// (documented in `harness_core::adapters::host`). Implemented by the facade over a
/// `HarnessAdapter` (suspend functions) or an `AsyncHarnessAdapter` (CompletableFutures).
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait NativeAdapter: Send + Sync {
    async fn call(&self, step: String, input: String) -> Result<String, AdapterError>;
}

/// The core's host adapter over a foreign one.
pub(crate) struct HostAdapterBridge(pub Arc<dyn NativeAdapter>);

impl HostAdapter for HostAdapterBridge {
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            match self.0.call(step.as_str().to_string(), input).await {
                Ok(out) => Ok(out),
                Err(AdapterError::Raised { reason }) => Err(reason),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::from_json;
    use crate::values::NativeError;

    struct Echo(Result<String, AdapterError>);

    #[async_trait::async_trait]
    impl NativeAdapter for Echo {
        async fn call(&self, step: String, input: String) -> Result<String, AdapterError> {
            self.0.clone().map(|prefix| format!("{prefix}{step}:{input}"))
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        harness_core::runtime::handle().unwrap().block_on(f)
    }

    #[test]
    fn the_step_crosses_by_name_and_an_exception_as_its_text() {
        let ok = HostAdapterBridge(Arc::new(Echo(Ok(String::new()))));
        assert_eq!(block(HostAdapter::call(&ok, HostStep::ParseStreamEvent, "{}".into())).unwrap(), "parse_stream_event:{}");
        let raised = HostAdapterBridge(Arc::new(Echo(Err(AdapterError::Raised { reason: "IllegalStateException: no".into() }))));
        assert_eq!(block(HostAdapter::call(&raised, HostStep::BuildRequest, "{}".into())).unwrap_err(), "IllegalStateException: no");
    }

    #[test]
    fn a_built_in_name_is_a_config_error_naming_the_field() {
        let c = from_json("{}").unwrap();
        let NativeError::Failure { kind, reason, .. } = c.register_adapter("anthropic".into(), Arc::new(Echo(Ok(String::new())))).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("name:"), "{reason}");
        assert!(c.register_adapter("inhouse".into(), Arc::new(Echo(Ok(String::new())))).is_ok());
    }
}
