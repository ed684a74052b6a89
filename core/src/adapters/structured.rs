//! Structured output: a chat request's `response_format` (`json_object`, or `json_schema`
//! with its schema), checked against every answer by the core's JSON Schema validator,
//! whoever answered. An answer that does not match is a failed attempt (the route's
//! `structured_output.on_invalid` says whether it fails over or is an error): a caller
//! never gets invalid JSON labelled as structured.

use serde_json::Value;

use crate::error::HarnessError;

/// What a request's answers must be.
pub(crate) struct Structured {
    /// `json_schema`: the schema's validator; `None` for `json_object` (any JSON object).
    validator: Option<jsonschema::Validator>,
}

impl Structured {
    /// The request's `response_format`, compiled; `None` for text (or none). A schema that
    /// does not compile is a `ConfigError` naming the field.
    pub fn of(body: &Value) -> Result<Option<Structured>, HarnessError> {
        let Some(f) = body.get("response_format").filter(|f| !f.is_null()) else { return Ok(None) };
        match f.get("type").and_then(Value::as_str) {
            Some("text") => Ok(None),
            Some("json_object") => Ok(Some(Structured { validator: None })),
            Some("json_schema") => {
                let schema = f
                    .get("json_schema")
                    .and_then(|s| s.get("schema"))
                    .ok_or_else(|| HarnessError::config("request.params.response_format.json_schema.schema: required with type json_schema"))?;
                let validator = jsonschema::validator_for(schema)
                    .map_err(|e| HarnessError::config(format!("request.params.response_format.json_schema.schema: not a valid JSON Schema: {}", e.masked())))?;
                Ok(Some(Structured { validator: Some(validator) }))
            }
            other => Err(HarnessError::config(format!("request.params.response_format.type: expected text, json_object or json_schema, got {other:?}"))),
        }
    }

    /// Checks an answer's content; `Err` says where it does not match (never its values).
    pub fn check(&self, content: &str) -> Result<(), String> {
        match &self.validator {
            Some(v) => crate::validation::schema::check_with(v, content.as_bytes()),
            None => match serde_json::from_str::<Value>(content) {
                Ok(Value::Object(_)) => Ok(()),
                Ok(_) => Err("the answer is JSON but not an object".into()),
                Err(_) => Err("the answer is not JSON".into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_checked_against_the_requested_format() {
        let schema = json!({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "required": ["age"], "properties": {"age": {"type": "integer"}}}}}});
        let s = Structured::of(&schema).unwrap().unwrap();
        assert!(s.check(r#"{"age": 3}"#).is_ok());
        let why = s.check(r#"{"age": "secret-value"}"#).unwrap_err();
        assert!(why.contains("/age") && !why.contains("secret-value"), "{why}");
        assert!(s.check("not json").is_err());
        let obj = Structured::of(&json!({"response_format": {"type": "json_object"}})).unwrap().unwrap();
        assert!(obj.check("{}").is_ok() && obj.check("[1]").is_err() && obj.check("{").is_err());
        assert!(Structured::of(&json!({"response_format": {"type": "text"}})).unwrap().is_none());
        assert!(Structured::of(&json!({})).unwrap().is_none());
        let e = Structured::of(&json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}})).err().unwrap();
        assert!(e.message.starts_with("request.params.response_format.json_schema.schema: not a valid JSON Schema"), "{}", e.message);
        assert!(Structured::of(&json!({"response_format": {"type": "xml"}})).err().unwrap().message.contains("response_format.type"));
    }
}
