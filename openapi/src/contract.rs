//! What the core needs of a service's spec at run time: each operation's method, path
//! template and `operationId` (the endpoint label), whether it may be resent (`x-idempotent`,
//! an `Idempotency-Key` header parameter), and its responses' JSON Schemas, bundled so a
//! validator can compile each one alone.
//!
//! Guarantees: read from the documents directly, not from the client model, so an operation
//! the generator refuses (a form body, say) still has its label and its response schemas;
//! every `$ref` (local or file-relative) becomes a `#/$defs/..` entry of the bundled schema,
//! each target once; OpenAPI 3.0's dialect is rewritten as JSON Schema 2020-12 (`nullable`,
//! boolean `exclusiveMinimum`/`exclusiveMaximum`); a `writeOnly` property is not required in
//! an answer; annotations (`example`, `discriminator`, `xml`, `x-*`) are dropped; a reference
//! that cannot be followed is an error naming where it is written.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::loader::{Docs, Loc};
use crate::model::Status;
use crate::operations::{is_json, operation_id, status, METHODS};

/// One operation as the core runs it.
#[derive(Debug, Clone)]
pub struct OpContract {
    /// `operationId` (or one made from the method and path, as the generator makes it).
    pub id: String,
    /// Upper case.
    pub method: String,
    /// The path template as written (`/orders/{order_id}`).
    pub path: String,
    /// Marked `x-idempotent: true`: safe to resend whatever the method.
    pub idempotent: bool,
    /// The operation declares an `Idempotency-Key` header parameter.
    pub idempotency_key: bool,
    /// Each declared response with a JSON body and a schema: its status key and the schema,
    /// self-contained (JSON Schema 2020-12, references under `$defs`).
    pub responses: Vec<(Status, Value)>,
}

/// Every operation of the document, in document order.
pub fn read(docs: &Docs) -> Result<Vec<OpContract>, String> {
    let root = docs.root();
    let v30 = match root.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.0") => true,
        Some(v) if v.starts_with("3.1") => false,
        Some(v) => return Err(format!("#/openapi: version {v} is not supported (3.0 and 3.1 are)")),
        None => return Err("#/openapi: missing (not an OpenAPI 3.0 or 3.1 document)".into()),
    };
    let paths_loc = Loc { file: 0, pointer: String::new() }.key("paths");
    let paths = match root.get("paths") {
        Some(Value::Object(p)) => p,
        None => return Ok(Vec::new()),
        Some(_) => return Err("#/paths: expected an object".into()),
    };
    let mut out = Vec::new();
    for (path, item) in paths {
        let (item, item_loc) = docs.follow(item, &paths_loc.key(path))?;
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let at = item_loc.key(method);
            let mut idempotency_key = false;
            for (list, loc) in [(item.get("parameters"), item_loc.key("parameters")), (op.get("parameters"), at.key("parameters"))] {
                for (i, p) in list.and_then(Value::as_array).into_iter().flatten().enumerate() {
                    let (p, _) = docs.follow(p, &loc.index(i))?;
                    let header = p.get("in").and_then(Value::as_str) == Some("header");
                    idempotency_key |= header && p.get("name").and_then(Value::as_str).is_some_and(|n| n.eq_ignore_ascii_case("idempotency-key"));
                }
            }
            let mut responses = Vec::new();
            if let Some(rs) = op.get("responses").and_then(Value::as_object) {
                for (key, r) in rs {
                    let rloc = at.key("responses").key(key);
                    let status = status(key).ok_or_else(|| format!("{}: not a status code, range (4XX) or `default`", docs.show(&rloc)))?;
                    let (r, rloc) = docs.follow(r, &rloc)?;
                    let Some(content) = r.get("content").and_then(Value::as_object) else { continue };
                    let Some((media, m)) = content.iter().find(|(m, _)| is_json(m)) else { continue };
                    let Some(schema) = m.get("schema") else { continue };
                    let sloc = rloc.key("content").key(media).key("schema");
                    responses.push((status, Bundler::new(docs, v30).bundle(schema, &sloc)?));
                }
            }
            out.push(OpContract {
                id: operation_id(op, method, path),
                method: method.to_uppercase(),
                path: path.clone(),
                idempotent: op.get("x-idempotent") == Some(&Value::Bool(true)),
                idempotency_key,
                responses,
            });
        }
    }
    Ok(out)
}

/// Keywords whose value is one schema, or (`items` in 3.0's dialect) an array of them.
const ONE: [&str; 12] = [
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "contentSchema",
];
/// Keywords whose value is an array of schemas.
const MANY: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const NAMED: [&str; 5] = ["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];
/// Annotations a validator has no use for (and whose values may hold anything, `$ref` too).
const DROPPED: [&str; 9] = ["nullable", "discriminator", "xml", "externalDocs", "example", "examples", "readOnly", "writeOnly", "deprecated"];

struct Bundler<'a> {
    docs: &'a Docs,
    v30: bool,
    /// Each referenced place's name under `$defs`.
    names: HashMap<Loc, String>,
    defs: Map<String, Value>,
    todo: Vec<(Loc, String)>,
}

impl<'a> Bundler<'a> {
    fn new(docs: &'a Docs, v30: bool) -> Self {
        Bundler { docs, v30, names: HashMap::new(), defs: Map::new(), todo: Vec::new() }
    }

    fn bundle(mut self, schema: &Value, at: &Loc) -> Result<Value, String> {
        let root = self.convert(schema, at)?;
        while let Some((loc, name)) = self.todo.pop() {
            let value = self.docs.get(&loc).expect("a target is checked when it is named");
            let converted = self.convert(value, &loc)?;
            self.defs.insert(name, converted);
        }
        let mut root = match root {
            Value::Object(m) if !m.contains_key("$defs") => m,
            other => {
                let mut m = Map::new();
                m.insert("allOf".into(), json!([other]));
                m
            }
        };
        root.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
        if !self.defs.is_empty() {
            root.insert("$defs".into(), Value::Object(std::mem::take(&mut self.defs)));
        }
        Ok(Value::Object(root))
    }

    /// The `$defs` name of a referenced place (the last pointer segment, numbered).
    fn name_for(&mut self, loc: Loc) -> String {
        if let Some(n) = self.names.get(&loc) {
            return n.clone();
        }
        let last = loc.pointer.rsplit('/').next().unwrap_or("");
        let word: String = last.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(40).collect();
        let name = format!("{}_{word}", self.names.len());
        self.names.insert(loc.clone(), name.clone());
        self.todo.push((loc, name.clone()));
        name
    }

    fn convert(&mut self, v: &Value, at: &Loc) -> Result<Value, String> {
        let m = match v {
            Value::Bool(_) => return Ok(v.clone()),
            Value::Object(m) => m,
            _ => return Err(format!("{}: a schema must be an object", self.docs.show(at))),
        };
        let mut out = Map::new();
        if let Some(r) = m.get("$ref") {
            let r = r.as_str().ok_or_else(|| format!("{}: `$ref` must be a string", self.docs.show(&at.key("$ref"))))?;
            let target = self.docs.target(r, &at.key("$ref"))?;
            out.insert("$ref".into(), json!(format!("#/$defs/{}", self.name_for(target))));
            // 3.0: keys beside a `$ref` are ignored.
            if self.v30 {
                return Ok(Value::Object(out));
            }
        }
        for (k, x) in m {
            let here = at.key(k);
            let k = k.as_str();
            if k == "$ref" || DROPPED.contains(&k) || k.starts_with("x-") {
                continue;
            }
            let converted = if ONE.contains(&k) {
                match x {
                    Value::Array(xs) => Value::Array(xs.iter().enumerate().map(|(i, s)| self.convert(s, &here.index(i))).collect::<Result<_, _>>()?),
                    _ => self.convert(x, &here)?,
                }
            } else if MANY.contains(&k) {
                let xs = x.as_array().ok_or_else(|| format!("{}: expected an array of schemas", self.docs.show(&here)))?;
                Value::Array(xs.iter().enumerate().map(|(i, s)| self.convert(s, &here.index(i))).collect::<Result<_, _>>()?)
            } else if NAMED.contains(&k) {
                let xs = x.as_object().ok_or_else(|| format!("{}: expected an object of schemas", self.docs.show(&here)))?;
                let mut named = Map::new();
                for (name, s) in xs {
                    named.insert(name.clone(), self.convert(s, &here.key(name))?);
                }
                Value::Object(named)
            } else {
                x.clone()
            };
            out.insert(k.to_string(), converted);
        }
        // 3.0's boolean bounds: `minimum: 0, exclusiveMinimum: true` is `exclusiveMinimum: 0`.
        for (bound, exclusive) in [("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")] {
            if let Some(Value::Bool(yes)) = out.get(exclusive).cloned() {
                out.remove(exclusive);
                if yes {
                    if let Some(b) = out.remove(bound) {
                        out.insert(exclusive.into(), b);
                    }
                }
            }
        }
        // A writeOnly property is never in an answer, so it cannot be required there.
        if let (Some(Value::Array(required)), Some(Value::Object(props))) = (out.get("required").cloned(), m.get("properties")) {
            let kept: Vec<Value> = required
                .into_iter()
                .filter(|name| {
                    let Some(p) = name.as_str().and_then(|n| props.get(n)) else { return true };
                    let p = self.docs.follow(p, at).map(|(p, _)| p).unwrap_or(p);
                    p.get("writeOnly") != Some(&Value::Bool(true))
                })
                .collect();
            out.insert("required".into(), Value::Array(kept));
        }
        if m.get("nullable") == Some(&Value::Bool(true)) {
            match out.get("type").cloned() {
                Some(Value::String(t)) => {
                    out.insert("type".into(), json!([t, "null"]));
                    if let Some(Value::Array(e)) = out.get_mut("enum") {
                        if !e.contains(&Value::Null) {
                            e.push(Value::Null);
                        }
                    }
                }
                _ => return Ok(json!({"anyOf": [Value::Object(out), {"type": "null"}]})),
            }
        }
        Ok(Value::Object(out))
    }
}

/// Reads the spec at `path` (and every file it refers to) for the core.
pub fn load(path: &std::path::Path) -> Result<Vec<OpContract>, String> {
    read(&Docs::load(path)?)
}
