//! A service's OpenAPI document at run time (`services.<name>.openapi`): the core knows
//! each operation, so a request's endpoint label is its `operationId` (metrics, breakers,
//! rate limits and per-endpoint settings are per operation), its answers are checked
//! against the schema the operation declares for their status, and an operation marked
//! `x-idempotent: true` or declaring an `Idempotency-Key` header may be resent.
//!
//! Guarantees: the document (and every file its `$ref`s name) is read once per config
//! snapshot, by the same reader as `harness codegen`; a document that cannot be read, or a
//! schema a validator cannot compile, is a `ConfigError` naming the field and the JSON
//! pointer; a request path matches the operation with the most literal segments (so
//! `/orders/search` wins over `/orders/{id}`); a label the caller gives is kept.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::schema::{ForStatus, Schema, ValidateMode};
use crate::error::HarnessError;
use crate::redact::escape_control;

/// `services.<name>.openapi`: the service's OpenAPI 3.0/3.1 document (or just its path).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OpenApiConfig {
    /// The document (YAML or JSON), relative to the config file's folder. A config file may
    /// write `openapi: orders.yaml` for `openapi: {spec: orders.yaml}`.
    pub spec: String,
    /// What an answer that does not match its operation's declared schema does: `enforce`
    /// (a `SchemaError`), `warn` (counted and reported) or `off`.
    pub validate: ValidateMode,
    /// A `SchemaError` counts as a downstream failure for the breaker.
    pub breaker_counts: bool,
}

/// One operation of the document.
#[derive(Debug)]
pub struct Operation {
    /// The endpoint label: its `operationId`.
    pub id: Arc<str>,
    /// Upper case.
    pub method: String,
    pub template: String,
    /// May be resent whatever its method (`x-idempotent: true`).
    pub idempotent: bool,
    /// Declares an `Idempotency-Key` header: Harness sends one (the caller's, or a fresh
    /// one) so the request may be resent.
    pub idempotency_key: bool,
}

/// The operations of a service's document, most specific template first, and their schemas.
#[derive(Debug, Default)]
pub struct Operations {
    list: Vec<Operation>,
}

impl Operations {
    /// The operation `method` and `path` (relative to the base URL, query ignored) call.
    pub fn find(&self, method: &str, path: &str) -> Option<&Operation> {
        self.list.iter().find(|o| o.method.eq_ignore_ascii_case(method) && crate::endpoint::capture(&o.template, path).is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Reads the document of `services.<service>.openapi`: its operations and, unless
/// `validate: off`, each operation's response schemas keyed by its `operationId`.
#[allow(clippy::type_complexity)]
pub fn load(service: &str, cfg: &OpenApiConfig) -> Result<(Operations, Vec<(String, Arc<Schema>)>), HarnessError> {
    let field = format!("services.{service}.openapi.spec");
    let path = Path::new(&cfg.spec);
    if std::fs::metadata(path).map(|m| !m.is_file()).unwrap_or(true) {
        return Err(HarnessError::config(format!("{field}: {:?} is not a readable file", escape_control(&cfg.spec))));
    }
    let shown = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let ops = harness_openapi::contract::load(path).map_err(|e| HarnessError::config(format!("{field}: {}: {}", escape_control(&shown), escape_control(&e))))?;
    let mut list = Vec::with_capacity(ops.len());
    let mut schemas = Vec::new();
    for op in ops {
        if cfg.validate != ValidateMode::Off && !op.responses.is_empty() {
            let mut validators = Vec::with_capacity(op.responses.len());
            for (status, schema) in &op.responses {
                let v = jsonschema::draft202012::new(schema).map_err(|e| {
                    HarnessError::config(format!(
                        "{field}: {}: the {} response of `{}` is not a valid JSON Schema: {}",
                        escape_control(&shown),
                        status.key(),
                        escape_control(&op.id),
                        e.masked()
                    ))
                })?;
                validators.push((ForStatus::Declared(*status), v));
            }
            schemas.push((op.id.clone(), Arc::new(Schema::new(validators, cfg.validate, cfg.breaker_counts))));
        }
        list.push(Operation { id: op.id.as_str().into(), method: op.method, template: op.path, idempotent: op.idempotent, idempotency_key: op.idempotency_key });
    }
    // Most literal segments first; a stable sort keeps document order among equals.
    list.sort_by_key(|o| std::cmp::Reverse(o.template.split('/').filter(|s| !s.is_empty() && !s.starts_with('{')).count()));
    Ok((Operations { list }, schemas))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, text: &str) -> OpenApiConfig {
        let dir = std::env::temp_dir().join(format!("harness-core-openapi-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.yaml");
        std::fs::write(&path, text).unwrap();
        OpenApiConfig { spec: path.display().to_string(), ..Default::default() }
    }

    const DOC: &str = r#"
openapi: 3.0.3
info: {title: T, version: '1'}
paths:
  /orders/{id}:
    get:
      operationId: getOrder
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses:
        '200': {description: ok, content: {application/json: {schema: {$ref: '#/components/schemas/Order'}}}}
        '2XX': {description: other, content: {application/json: {schema: {type: array}}}}
        default: {description: error, content: {application/json: {schema: {type: object, required: [code]}}}}
  /orders/search:
    get:
      operationId: searchOrders
      responses: {'204': {description: none}}
  /orders:
    post:
      operationId: createOrder
      parameters: [{name: Idempotency-Key, in: header, schema: {type: string}}]
      responses: {'201': {description: made}}
  /jobs:
    post:
      operationId: runJob
      x-idempotent: true
      responses: {'202': {description: queued}}
components:
  schemas:
    Order:
      type: object
      required: [id, total, secret]
      properties:
        id: {type: string}
        total: {type: integer, minimum: 0, exclusiveMinimum: true}
        note: {type: string, nullable: true, maxLength: 5}
        secret: {type: string, writeOnly: true}
"#;

    #[test]
    fn operations_are_found_by_method_and_path_the_most_literal_first() {
        let (ops, _) = load("orders", &spec("find", DOC)).unwrap();
        assert_eq!(ops.find("GET", "/orders/42?x=1").unwrap().id.as_ref(), "getOrder");
        assert_eq!(ops.find("get", "/orders/search").unwrap().id.as_ref(), "searchOrders");
        assert!(ops.find("DELETE", "/orders/42").is_none() && ops.find("GET", "/orders/42/items").is_none());
        let create = ops.find("POST", "/orders").unwrap();
        assert!(create.idempotency_key && !create.idempotent);
        let job = ops.find("POST", "/jobs").unwrap();
        assert!(job.idempotent && !job.idempotency_key);
    }

    #[test]
    fn answers_are_checked_by_the_schema_declared_for_their_status() {
        let (_, schemas) = load("orders", &spec("status", DOC)).unwrap();
        let (key, s) = &schemas[0];
        assert_eq!(key, "getOrder");
        assert!(s.check(200, br#"{"id": "a", "total": 3, "note": null}"#).is_ok(), "nullable, and writeOnly is not required in an answer");
        let why = s.check(200, br#"{"id": "a", "total": "3"}"#).unwrap_err();
        assert!(why.contains("at /total"), "{why}");
        // 3.0's boolean exclusiveMinimum and validation keywords hold.
        assert!(s.check(200, br#"{"id": "a", "total": 0}"#).unwrap_err().contains("at /total"));
        assert!(s.check(200, br#"{"id": "a", "total": 1, "note": "too long"}"#).unwrap_err().contains("at /note"));
        // 206 falls to the 2XX range, and a status with only `default` uses it.
        assert!(s.check(206, b"[]").is_ok() && s.check(206, b"{}").is_err());
        assert!(s.check(299, br#"{"code": 1}"#).is_err(), "2XX applies before default");
    }

    #[test]
    fn a_bad_document_is_a_config_error_naming_the_field_and_the_pointer() {
        let e = load("orders", &spec("badref", &DOC.replace("#/components/schemas/Order", "#/components/schemas/Nope"))).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Config);
        assert!(e.message.starts_with("services.orders.openapi.spec: s.yaml: #/paths/~1orders~1{id}/get/responses/200/content/application~1json/schema/$ref"), "{}", e.message);
        assert!(e.message.contains("nothing is there"), "{}", e.message);
        let e = load("orders", &spec("badstatus", &DOC.replace("'204'", "'299x'"))).unwrap_err();
        assert!(e.message.contains("#/paths/~1orders~1search/get/responses/299x: not a status code"), "{}", e.message);
        let e = load("orders", &spec("badschema", &DOC.replace("type: array", "type: 12"))).unwrap_err();
        assert!(e.message.contains("the 2XX response of `getOrder` is not a valid JSON Schema"), "{}", e.message);
        let e = load("orders", &OpenApiConfig { spec: "/nonexistent/orders.yaml".into(), ..Default::default() }).unwrap_err();
        assert!(e.message.starts_with("services.orders.openapi.spec: \"/nonexistent/orders.yaml\" is not a readable file"), "{}", e.message);
        let e = load("orders", &spec("swagger", "swagger: '2.0'\n")).unwrap_err();
        assert!(e.message.contains("#/openapi: missing"), "{}", e.message);
    }

    #[test]
    fn hostile_references_neither_hang_nor_crash() {
        // A schema that is only a reference to itself, and two that refer to each other.
        let doc = DOC.replace("$ref: '#/components/schemas/Order'", "$ref: '#/components/schemas/Loop'")
            + "    Loop: {$ref: '#/components/schemas/Loop'}\n    Ping: {type: object, properties: {pong: {$ref: '#/components/schemas/Pong'}}}\n    Pong: {type: object, properties: {ping: {$ref: '#/components/schemas/Ping'}}}\n";
        match load("orders", &spec("loop", &doc)) {
            Ok((_, schemas)) => {
                let _ = schemas[0].1.check(200, b"{}");
            }
            Err(e) => assert_eq!(e.kind, crate::error::ErrorKind::Config, "{}", e.message),
        }
        let doc = DOC.replace("$ref: '#/components/schemas/Order'", "$ref: '#/components/schemas/Ping'")
            + "    Ping: {type: object, properties: {pong: {$ref: '#/components/schemas/Pong'}}}\n    Pong: {type: object, properties: {ping: {$ref: '#/components/schemas/Ping'}}}\n";
        let (_, schemas) = load("orders", &spec("pingpong", &doc)).unwrap();
        assert!(schemas[0].1.check(200, br#"{"pong": {"ping": {"pong": {}}}}"#).is_ok());
        assert!(schemas[0].1.check(200, br#"{"pong": {"ping": 3}}"#).unwrap_err().contains("at /pong/ping"));
        // A control character in a key of the document is shown escaped in the error.
        let e = load("orders", &spec("ctl", &DOC.replace("'204'", "\"2\\u001b[31m\""))).unwrap_err();
        assert!(!e.message.contains('\u{1b}'), "{}", e.message);
    }

    #[test]
    fn validate_off_compiles_no_schema_but_keeps_the_operations() {
        let mut cfg = spec("off", DOC);
        cfg.validate = ValidateMode::Off;
        let (ops, schemas) = load("orders", &cfg).unwrap();
        assert!(schemas.is_empty() && !ops.is_empty());
    }
}
