//! The `azure-openai` adapter: an Azure OpenAI deployment. The body and answers are
//! OpenAI's (normalised as for `openai-compatible`); the deployment is in the path
//! (`/openai/deployments/{deployment}/chat/completions`, the provider's `deployment`, else
//! its `model`), the API version a query parameter (the provider's `api_version`, default
//! `2024-10-21`), the key goes in the `api-key` header (the service's `auth`), and Azure's
//! content-filter error (`innererror.code: ResponsibleAIPolicyViolation`) is `content_filter`.

use serde_json::Value;

use super::wire::{self, AnswerFault, ChatAdapter, EventReader, Parsed, RouteDefaults, Shaped};
use crate::routing::config::ProviderConfig;

pub struct Azure;

/// The API version when the provider names none (the current GA version).
pub(crate) const API_VERSION: &str = "2024-10-21";

impl ChatAdapter for Azure {
    fn name(&self) -> &str {
        "azure-openai"
    }

    fn shape(&self, body: &Value, p: &ProviderConfig, route: &RouteDefaults, stream: bool) -> Result<Shaped, String> {
        let mut shaped = super::openai::OpenAi.shape(body, p, route, stream)?;
        shaped.path = Some(path(p, "chat/completions"));
        Ok(shaped)
    }

    fn parse(&self, body: &[u8]) -> Result<Parsed, AnswerFault> {
        super::openai::OpenAi.parse(body)
    }

    fn stream(&self) -> Box<dyn EventReader> {
        super::openai::OpenAi.stream()
    }

    fn error_code(&self, status: u16, body: &[u8]) -> Option<String> {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let err = v.get("error");
        let inner = err.and_then(|e| e.get("innererror")).and_then(|i| i.get("code")).and_then(Value::as_str);
        let code = inner.or_else(|| err.and_then(|e| e.get("code")).and_then(Value::as_str));
        let message = err.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("");
        wire::common_code(status, code, message).map(str::to_string)
    }

    fn embeds(&self) -> bool {
        true
    }

    fn shape_embed(&self, body: &Value, p: &ProviderConfig, _route: &RouteDefaults) -> Result<Shaped, String> {
        Ok(Shaped { body: super::openai::embed_body(body, p), path: Some(path(p, "embeddings")), headers: Vec::new() })
    }

    fn parse_embed(&self, body: &[u8], inputs: usize) -> Result<super::embeddings::Embedded, String> {
        super::embeddings::parse_openai(body, Some(inputs))
    }
}

/// `/openai/deployments/{deployment}/{what}?api-version=...` (the deployment is checked at config load).
pub(crate) fn path(p: &ProviderConfig, what: &str) -> String {
    let deployment = p.deployment.as_deref().or(p.model.as_deref()).unwrap_or_default();
    let version = p.api_version.as_deref().unwrap_or(API_VERSION);
    format!("/openai/deployments/{deployment}/{what}?api-version={version}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_deployment_goes_in_the_path_and_the_version_in_the_query() {
        let mut p = ProviderConfig { id: "az".into(), service: "s".into(), model: Some("gpt-4o".into()), weight: 1, ..Default::default() };
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let s = Azure.shape(&body, &p, &RouteDefaults::default(), true).unwrap();
        assert_eq!(s.path.as_deref(), Some("/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"));
        assert_eq!(s.body["stream"], true);
        p.deployment = Some("prod-4o".into());
        p.api_version = Some("2025-01-01-preview".into());
        assert_eq!(Azure.shape(&body, &p, &RouteDefaults::default(), false).unwrap().path.as_deref(), Some("/openai/deployments/prod-4o/chat/completions?api-version=2025-01-01-preview"));
    }

    #[test]
    fn the_content_filter_error_is_content_filter() {
        let body = br#"{"error":{"code":"content_filter","message":"The response was filtered","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}"#;
        assert_eq!(Azure.error_code(400, body).as_deref(), Some("content_filter"));
        assert_eq!(Azure.error_code(401, br#"{"error":{"code":"401","message":"Access denied"}}"#).as_deref(), Some("auth"));
        assert_eq!(Azure.error_code(404, br#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}"#).as_deref(), Some("not_found_model"));
    }
}
