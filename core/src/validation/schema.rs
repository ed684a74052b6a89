//! Response schemas: a 2xx JSON body checked against the endpoint's JSON Schema, or
//! against the schema its operation declares for that status (`openapi`).
//!
//! Guarantees: schemas are compiled once per config snapshot (a reload recompiles
//! them); a missing file or an invalid schema is a `ConfigError` naming the field;
//! `enforce` turns a non-matching body into `SchemaError` naming the JSON pointer and
//! what did not match (never the body's values: the message is masked), counted by
//! the breaker only with `breaker_counts`; `warn` returns the response and counts the
//! drift (`harness_schema_violations_total`, an event, a log field); streamed bodies
//! are not validated.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ErrorKind, HarnessError};
use crate::redact::{escape_control, truncate_chars};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidateMode {
    /// A non-matching body is a `SchemaError`.
    #[default]
    Enforce,
    /// The body is returned; the drift is counted and reported.
    Warn,
    Off,
}

/// `services.<name>.endpoints.<"METHOD /template" or "/template">`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// A schema file path (relative to the working directory) or the schema itself.
    pub response_schema: Option<Value>,
    pub validate: ValidateMode,
    /// A `SchemaError` counts as a downstream failure for the breaker.
    pub breaker_counts: bool,
    /// This endpoint's own breaker settings (instead of the service's).
    pub breaker: Option<crate::breaker::BreakerConfig>,
    /// This endpoint's own hedging (instead of the service's).
    pub hedge: Option<crate::hedge::HedgeConfig>,
    /// This endpoint's own caching and coalescing (instead of the service's).
    pub cache: Option<crate::cache::HttpCacheConfig>,
}

/// Which answers a compiled schema is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForStatus {
    /// Every 2xx (an endpoint's `response_schema`).
    Any,
    /// As an operation declares it: a code, a range (`2XX`) or `default`.
    Declared(harness_openapi::model::Status),
}

/// One endpoint's compiled schemas.
pub struct Schema {
    validators: Vec<(ForStatus, jsonschema::Validator)>,
    pub mode: ValidateMode,
    pub breaker_counts: bool,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema").field("mode", &self.mode).finish_non_exhaustive()
    }
}

/// Most mismatches named in one error.
const MAX_NAMED: usize = 3;

impl Schema {
    pub(crate) fn new(validators: Vec<(ForStatus, jsonschema::Validator)>, mode: ValidateMode, breaker_counts: bool) -> Schema {
        Schema { validators, mode, breaker_counts }
    }

    /// The validator for an answer of `status`: the code's own, its range's, `default`'s.
    fn validator_for(&self, status: u16) -> Option<&jsonschema::Validator> {
        use harness_openapi::model::Status;
        let pick = |want: &dyn Fn(&ForStatus) -> bool| self.validators.iter().find(|(s, _)| want(s)).map(|(_, v)| v);
        pick(&|s| *s == ForStatus::Any || *s == ForStatus::Declared(Status::Code(status)))
            .or_else(|| pick(&|s| *s == ForStatus::Declared(Status::Range(status / 100))))
            .or_else(|| pick(&|s| *s == ForStatus::Declared(Status::Default)))
    }

    /// Checks the body of an answer of `status`; `Err(what)` names where and what did not
    /// match. An answer with no schema for its status passes.
    pub fn check(&self, status: u16, body: &[u8]) -> Result<(), String> {
        let Some(validator) = self.validator_for(status) else { return Ok(()) };
        check_with(validator, body)
    }
}

/// Checks `body` against `validator`; `Err(what)` names where and what did not match
/// (masked: never the body's values).
pub(crate) fn check_with(validator: &jsonschema::Validator, body: &[u8]) -> Result<(), String> {
    // serde_json's own nesting limit (128) keeps a hostile body off the stack, in one pass.
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return Err("the body is not JSON (or nested too deep)".into()),
    };
    // Most bodies match: the fast check first, the error walk only when one does not.
    if validator.is_valid(&value) {
        return Ok(());
    }
    let mut named = Vec::new();
    let mut more = 0;
    for e in validator.iter_errors(&value) {
        if named.len() < MAX_NAMED {
            let pointer = e.instance_path().to_string();
            let at = if pointer.is_empty() { "/".to_string() } else { pointer };
            named.push(format!("at {at}: {}", e.masked()));
        } else {
            more += 1;
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    let mut text = named.join("; ");
    if more > 0 {
        text.push_str(&format!(" (and {more} more)"));
    }
    Err(truncate_chars(&escape_control(&text), 600))
}

/// Compiles every endpoint schema of a service.
pub fn compile(service: &str, endpoints: &BTreeMap<String, EndpointConfig>) -> Result<Vec<(String, Arc<Schema>)>, HarnessError> {
    let mut out = Vec::new();
    for (key, ep) in endpoints {
        let field = format!("services.{service}.endpoints.{}.response_schema", escape_control(key));
        let Some(source) = &ep.response_schema else { continue };
        if ep.validate == ValidateMode::Off {
            continue;
        }
        let schema: Value = match source {
            Value::String(path) => {
                let text = crate::config::files::read_text(std::path::Path::new(path), &field)?;
                crate::json::parse_bounded(text.as_bytes()).map_err(|e| HarnessError::config(format!("{field}: {:?} is not JSON: {}", escape_control(path), escape_control(&e))))?
            }
            Value::Object(_) | Value::Bool(_) => source.clone(),
            _ => return Err(HarnessError::config(format!("{field}: expected a file path or a JSON Schema object"))),
        };
        let validator = jsonschema::validator_for(&schema).map_err(|e| HarnessError::config(format!("{field}: not a valid JSON Schema: {}", e.masked())))?;
        out.push((key.clone(), Arc::new(Schema::new(vec![(ForStatus::Any, validator)], ep.validate, ep.breaker_counts))));
    }
    Ok(out)
}

/// Checks an endpoint key (`GET /orders/{id}` or `/orders/{id}`).
pub fn validate_key(service: &str, key: &str) -> Result<(), HarnessError> {
    if key.is_empty() || key.chars().any(char::is_control) || key.len() > 300 {
        return Err(HarnessError::config(format!("services.{service}.endpoints: an endpoint key must be printable, got {:?}", escape_control(key))));
    }
    Ok(())
}

pub use crate::endpoint::key_matches;

/// The `SchemaError` for an enforced mismatch.
pub fn error(status: u16, what: &str) -> HarnessError {
    let mut e = HarnessError::new(ErrorKind::Schema, format!("the response does not match the endpoint's schema: {what}"));
    e.status = Some(status);
    e.code = Some("schema_mismatch".into());
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        let mut eps = BTreeMap::new();
        eps.insert("GET /o/{id}".to_string(), EndpointConfig { response_schema: Some(v), ..Default::default() });
        let (_, s) = compile("svc", &eps).unwrap().pop().unwrap();
        Arc::try_unwrap(s).unwrap()
    }

    #[test]
    fn mismatches_name_the_pointer_and_never_the_value() {
        let s = schema(json!({"type": "object", "required": ["id", "total"], "properties": {"total": {"type": "number"}}}));
        assert!(s.check(200, br#"{"id": 1, "total": 9.5}"#).is_ok());
        let why = s.check(200, br#"{"id": 1, "total": "4111-1111-1111-1111"}"#).unwrap_err();
        assert!(why.contains("at /total") && why.contains("number"), "{why}");
        assert!(!why.contains("4111"), "the value is masked: {why}");
        let why = s.check(201, br#"{"total": 1}"#).unwrap_err();
        assert!(why.contains("at /:") && why.contains("id"), "{why}");
        assert_eq!(s.check(200, b"<html>").unwrap_err(), "the body is not JSON (or nested too deep)");
    }

    #[test]
    fn bad_schemas_and_files_are_config_errors_naming_the_field() {
        let mut eps = BTreeMap::new();
        eps.insert("GET /x".to_string(), EndpointConfig { response_schema: Some(json!({"type": 12})), ..Default::default() });
        let e = compile("orders", &eps).unwrap_err();
        assert!(e.message.starts_with("services.orders.endpoints.GET /x.response_schema: not a valid JSON Schema"), "{}", e.message);
        eps.insert("GET /x".to_string(), EndpointConfig { response_schema: Some(json!("/nonexistent/schema.json")), ..Default::default() });
        assert!(compile("orders", &eps).unwrap_err().message.contains("cannot be read"));
        assert!(key_matches("GET /o/{id}", "GET", "/o/{id}") && key_matches("/o/{id}", "POST", "/o/{id}") && !key_matches("POST /o/{id}", "GET", "/o/{id}"));
    }
}

