//! Host interceptors from Kotlin or Java: a team's own rules on every call, as the core's
//! `HostInterceptor` (a UniFFI async foreign trait, like host adapters and token providers).
//!
//! The core awaits `call` from a task on its runtime, within `interceptors.timeout_ms` and the
//! call's deadline. The foreign call only starts a coroutine (the facade's dispatcher runs the
//! host code, `Interceptors.kt`) and the future completes when it answers, so no tokio worker
//! ever waits on JVM code; a timeout drops the future, which cancels the coroutine. Whatever the
//! host code throws comes back as `Err("<SimpleName>: <message>")`, which the core turns into an
//! `InterceptorError` (code `raised`); a `Reject` the facade has already written as
//! `{"fail": ...}`. Nothing here panics.

use std::sync::Arc;

use harness_core::interceptors::{HostInterceptor, Level, Phase, Registration};
use harness_core::transport::BoxFuture;

use crate::values::NativeError;

/// Why the host interceptor gave no answer: its exception, as text.
#[derive(uniffi::Error, Debug, Clone)]
pub enum InterceptorHostError {
    Raised { reason: String },
}

impl std::fmt::Display for InterceptorHostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let InterceptorHostError::Raised { reason } = self;
        f.write_str(reason)
    }
}

impl std::error::Error for InterceptorHostError {}

/// An exception the facade did not catch (it catches all, but UniFFI needs a way in).
impl From<uniffi::UnexpectedUniFFICallbackError> for InterceptorHostError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        InterceptorHostError::Raised { reason: e.reason }
    }
}

/// Host code run on calls: `phase` is `before` or `after` (`Phase::as_str`), `input` and the
/// answer are JSON text (documented in `harness_core::interceptors`). Implemented by the
/// facade over an `Interceptor` (suspend functions) or an `AsyncInterceptor` (CompletableFutures).
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait NativeInterceptor: Send + Sync {
    async fn call(&self, phase: String, input: String) -> Result<String, InterceptorHostError>;
}

/// What the facade registers besides the interceptor (the core's `Registration`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRegistration {
    pub name: String,
    /// `application`, `attempt`, or `None` (the config's `interceptors.levels`, else application).
    pub level: Option<String>,
    pub services: Vec<String>,
    pub before: bool,
    pub after: bool,
    pub want_body: bool,
}

impl TryFrom<NativeRegistration> for Registration {
    type Error = NativeError;

    fn try_from(r: NativeRegistration) -> Result<Self, NativeError> {
        let level = r.level.as_deref().map(|l| Level::parse("level", l)).transpose()?;
        Ok(Registration { name: r.name, level, services: r.services, before: r.before, after: r.after, want_body: r.want_body })
    }
}

/// The core's host interceptor over a foreign one.
pub(crate) struct HostInterceptorBridge(pub Arc<dyn NativeInterceptor>);

impl HostInterceptor for HostInterceptorBridge {
    fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            match self.0.call(phase.as_str().to_string(), input).await {
                Ok(out) => Ok(out),
                Err(InterceptorHostError::Raised { reason }) => Err(reason),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::from_json;

    struct Echo(Result<String, InterceptorHostError>);

    #[async_trait::async_trait]
    impl NativeInterceptor for Echo {
        async fn call(&self, phase: String, input: String) -> Result<String, InterceptorHostError> {
            self.0.clone().map(|prefix| format!("{prefix}{phase}:{input}"))
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        harness_core::runtime::handle().unwrap().block_on(f)
    }

    fn reg(name: &str, level: Option<&str>) -> NativeRegistration {
        NativeRegistration { name: name.into(), level: level.map(str::to_string), services: vec![], before: true, after: false, want_body: false }
    }

    #[test]
    fn the_phase_crosses_by_name_and_an_exception_as_its_text() {
        let ok = HostInterceptorBridge(Arc::new(Echo(Ok(String::new()))));
        assert_eq!(block(HostInterceptor::call(&ok, Phase::After, "{}".into())).unwrap(), "after:{}");
        let raised = HostInterceptorBridge(Arc::new(Echo(Err(InterceptorHostError::Raised { reason: "IllegalStateException: no".into() }))));
        assert_eq!(block(HostInterceptor::call(&raised, Phase::Before, "{}".into())).unwrap_err(), "IllegalStateException: no");
    }

    #[test]
    fn a_bad_level_or_name_is_a_config_error_naming_the_field() {
        let c = from_json("{}").unwrap();
        let host = || Arc::new(Echo(Ok(String::new()))) as Arc<dyn NativeInterceptor>;
        let NativeError::Failure { kind, reason, .. } = c.add_interceptor(reg("x", Some("call")), host()).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("level:"), "{reason}");
        let NativeError::Failure { kind, reason, .. } = c.add_interceptor(reg("a b", None), host()).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("name:"), "{reason}");
        c.add_interceptor(reg("tenant", Some("attempt")), host()).unwrap();
        assert!(c.remove_interceptor("tenant".into()));
        assert!(!c.remove_interceptor("tenant".into()));
    }
}
