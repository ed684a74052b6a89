//! Credentials to and from host code: a Kotlin or Java token provider as the core's
//! `TokenProvider` (a UniFFI async foreign trait), and `credentials_state` flattened.
//!
//! The core calls `fetch` from a task on its runtime, one refresh at a time per credential,
//! bounded by `auth.refresh.timeout_ms`. The foreign call only starts a coroutine (the facade's
//! dispatcher runs the host code) and the future completes when it answers, so no tokio worker
//! ever waits on JVM code; a timed-out refresh drops the future, which cancels the coroutine.

use std::sync::Arc;
use std::time::Duration;

use harness_core::credentials::secret::Secret;
use harness_core::transport::BoxFuture;
use harness_core::{ProviderError, Token, TokenProvider};

/// A token as the facade hands it over. Debug never shows the value.
#[derive(uniffi::Record, Clone)]
pub struct NativeToken {
    pub value: String,
    /// `None`: it does not expire.
    pub expires_in_ms: Option<u64>,
}

impl std::fmt::Debug for NativeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeToken").field("value", &"***").field("expires_in_ms", &self.expires_in_ms).finish()
    }
}

/// Why the host provider gave no token: its exception, as text (never the token).
#[derive(uniffi::Error, Debug, Clone)]
pub enum TokenError {
    Failed { reason: String },
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let TokenError::Failed { reason } = self;
        f.write_str(reason)
    }
}

impl std::error::Error for TokenError {}

/// An exception the facade did not catch (it catches all, but UniFFI needs a way in).
impl From<uniffi::UnexpectedUniFFICallbackError> for TokenError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        TokenError::Failed { reason: e.reason }
    }
}

/// Host code that fetches a token: implemented by the facade over a `suspend` lambda or a
/// Java `CompletableFuture`.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait NativeTokenProvider: Send + Sync {
    async fn fetch(&self) -> Result<NativeToken, TokenError>;
}

/// The core's provider trait over a foreign one.
pub(crate) struct HostProvider(pub Arc<dyn NativeTokenProvider>);

impl TokenProvider for HostProvider {
    fn fetch(&self) -> BoxFuture<'_, Result<Token, ProviderError>> {
        Box::pin(async move {
            match self.0.fetch().await {
                Ok(t) => Ok(Token { value: Secret::new(t.value), expires_in: t.expires_in_ms.map(Duration::from_millis) }),
                Err(TokenError::Failed { reason }) => Err(ProviderError::new(reason)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::from_json;

    struct Fixed(Result<NativeToken, TokenError>);

    #[async_trait::async_trait]
    impl NativeTokenProvider for Fixed {
        async fn fetch(&self) -> Result<NativeToken, TokenError> {
            self.0.clone()
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        harness_core::runtime::handle().unwrap().block_on(f)
    }

    #[test]
    fn a_host_token_becomes_a_core_token_and_its_debug_hides_the_value() {
        let t = NativeToken { value: "tok-secret".into(), expires_in_ms: Some(1500) };
        assert!(!format!("{t:?}").contains("tok-secret"));
        let p = HostProvider(Arc::new(Fixed(Ok(t))));
        let got = block(TokenProvider::fetch(&p)).unwrap();
        assert_eq!(got.value.expose(), "tok-secret");
        assert_eq!(got.expires_in, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn a_host_exception_is_a_provider_error_with_its_message() {
        let p = HostProvider(Arc::new(Fixed(Err(TokenError::Failed { reason: "IllegalStateException: down".into() }))));
        let e = block(TokenProvider::fetch(&p)).unwrap_err();
        assert_eq!(e.message, "IllegalStateException: down");
        assert!(!e.dead);
    }

    #[test]
    fn credentials_state_names_the_type_and_never_the_key() {
        let c = from_json(
            r#"{"services": {"svc": {"base_url": "http://127.0.0.1:1", "auth": {"type": "header", "header": "x-api-key", "keys": [{"value": "key-secret-1", "name": "first"}, {"value": "key-secret-2"}]}}}}"#,
        )
        .unwrap();
        // The view the facade decodes into the generated CredentialState.
        let text = c.view("credentials_state".into(), vec![]).unwrap();
        let states: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(states.as_array().unwrap().len(), 1);
        assert_eq!((states[0]["service"].as_str(), states[0]["type"].as_str()), (Some("svc"), Some("header")));
        assert_eq!(states[0]["keys"].as_array().unwrap().len(), 2);
        assert_eq!(states[0]["keys"][0]["name"], "first");
        assert!(!text.contains("key-secret"));
    }
}
