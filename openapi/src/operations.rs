//! The operations of a document: each path's methods with their parameters, JSON request
//! body and responses. An operation with something the model cannot express is refused, with
//! the pointer and the reason, and the others are still read.

use serde_json::Value;

use crate::loader::{Docs, Loc};
use crate::model::{Api, Body, Content, Def, In, Operation, Param, Refusal, Response, Status, Style, Ty};
use crate::schema::{doc, Reader};
use crate::names::pascal;

pub(crate) const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// Header parameters OpenAPI says a client ignores (the body, the answer and credentials
/// set them).
const IGNORED_HEADERS: [&str; 3] = ["accept", "content-type", "authorization"];

pub fn read(docs: &Docs) -> Result<Api, String> {
    let root = docs.root();
    let version = match (root.get("openapi").and_then(Value::as_str), root.get("swagger")) {
        (Some(v), _) if v.starts_with("3.0") || v.starts_with("3.1") => v.to_string(),
        (Some(v), _) => return Err(format!("#/openapi: version {v} is not supported (3.0 and 3.1 are)")),
        (None, Some(_)) => return Err("#/swagger: OpenAPI 2.0 (Swagger) is not supported; convert the document to 3.0 or 3.1".into()),
        (None, None) => return Err("#/openapi: missing (not an OpenAPI document)".into()),
    };
    let info = root.get("info");
    let text = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
    let mut reader = Reader::new(docs);
    let mut operations = Vec::new();
    let mut refused = Vec::new();
    let paths_loc = Loc { file: 0, pointer: String::new() }.key("paths");
    let paths = match root.get("paths") {
        Some(Value::Object(p)) => p.clone(),
        None => Default::default(),
        Some(_) => return Err("#/paths: expected an object".into()),
    };
    for (path, item) in &paths {
        let item_loc = paths_loc.key(path);
        let (item, item_loc) = docs.follow(item, &item_loc)?;
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let at = item_loc.key(method);
            let id = op.get("operationId").and_then(Value::as_str).map(str::to_string);
            let refuse = |reason: String| Refusal { method: method.to_uppercase(), path: path.clone(), id: id.clone(), reason };
            let n = operations.len() + refused.len();
            match operation(&mut reader, path, method, item, &item_loc, op, &at) {
                Ok(o) => operations.push((n, o)),
                Err(reason) => refused.push((n, refuse(reason))),
            }
        }
    }
    alias_cycles(&mut reader);
    // A type read while an operation was read may have failed later (a recursive type whose
    // other property is unsupported): an operation that uses it is refused after all.
    let mut kept = Vec::new();
    for (n, op) in operations {
        match failed_type(&reader, &op) {
            Some(reason) => refused.push((n, Refusal { method: op.method.clone(), path: op.path.clone(), id: Some(op.id.clone()), reason })),
            None => kept.push(op),
        }
    }
    // In document order.
    refused.sort_by_key(|(n, _)| *n);
    let refused: Vec<Refusal> = refused.into_iter().map(|(_, r)| r).collect();
    let mut ids = std::collections::BTreeSet::new();
    for op in &kept {
        if !ids.insert(op.id.clone()) {
            return Err(format!("two operations have the operationId `{}`", op.id));
        }
    }
    Ok(Api { version, title: text("title"), api_version: text("version"), doc: info.and_then(doc), operations: kept, refused, types: reader.types })
}

/// Named types that are each other with nothing between (`A: {$ref: B}`, `B: {$ref: A}`, or a
/// union that is a member of itself) describe no value: they fail, naming where.
fn alias_cycles(reader: &mut Reader<'_>) {
    let direct = |def: &Def| -> Vec<usize> {
        let strip = |t: &Ty| match t {
            Ty::Nullable(inner) => match **inner {
                Ty::Named(j) => Some(j),
                _ => None,
            },
            Ty::Named(j) => Some(*j),
            _ => None,
        };
        match def {
            Def::Alias(t) => strip(t).into_iter().collect(),
            Def::Union { members, .. } => members.iter().filter_map(strip).collect(),
            Def::Object { .. } => Vec::new(),
        }
    };
    for start in 0..reader.types.len() {
        let mut todo = direct(&reader.types[start].def);
        let mut seen = vec![false; reader.types.len()];
        while let Some(j) = todo.pop() {
            if j == start {
                let t = &reader.types[start];
                reader.failed[start] = Some(format!("{}: `{}` refers to itself with no type between", t.pointer, t.name));
                break;
            }
            if !std::mem::replace(&mut seen[j], true) {
                todo.extend(direct(&reader.types[j].def));
            }
        }
    }
}

fn failed_type(reader: &Reader<'_>, op: &Operation) -> Option<String> {
    let mut todo = Vec::new();
    crate::model::op_refs(op, &mut todo);
    let mut seen = vec![false; reader.types.len()];
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        if let Some(e) = &reader.failed[i] {
            return Some(e.clone());
        }
        crate::model::def_refs(&reader.types[i].def, &mut todo);
    }
    None
}

/// `getOrders`, or, without an operationId, one from the method and path (`get /orders/{id}`
/// -> `get_orders_id`).
pub(crate) fn operation_id(op: &Value, method: &str, path: &str) -> String {
    match op.get("operationId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => {
            let words: Vec<String> = path.split(['/', '{', '}', '-', '.', '_']).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
            format!("{method}_{}", words.join("_"))
        }
    }
}

fn operation(reader: &mut Reader<'_>, path: &str, method: &str, item: &Value, item_loc: &Loc, op: &Value, at: &Loc) -> Result<Operation, String> {
    let docs = reader.docs;
    let id = operation_id(op, method, path);
    let hint = pascal(&crate::schema::ident_chars(&id));
    // Path-level parameters, then the operation's (which replace one of the same name and place).
    let mut raw: Vec<(Value, Loc)> = Vec::new();
    for (list, loc) in [(item.get("parameters"), item_loc.key("parameters")), (op.get("parameters"), at.key("parameters"))] {
        let Some(list) = list else { continue };
        let list = list.as_array().ok_or_else(|| format!("{}: expected an array", docs.show(&loc)))?;
        for (i, p) in list.iter().enumerate() {
            let (p, ploc) = docs.follow(p, &loc.index(i))?;
            let key = |v: &Value| (v.get("name").cloned(), v.get("in").cloned());
            raw.retain(|(q, _)| key(q) != key(p));
            raw.push((p.clone(), ploc));
        }
    }
    let mut params = Vec::new();
    for (p, ploc) in &raw {
        if let Some(param) = parameter(reader, p, ploc, &hint)? {
            params.push(param);
        }
    }
    for var in template_vars(path) {
        if !params.iter().any(|p| p.location == In::Path && p.name == var) {
            return Err(format!("{}: the path parameter `{var}` is not declared", docs.show(at)));
        }
    }
    let body = match op.get("requestBody") {
        Some(b) => request_body(reader, b, &at.key("requestBody"), &hint)?,
        None => None,
    };
    let mut responses = Vec::new();
    if let Some(rs) = op.get("responses") {
        let rs = rs.as_object().ok_or_else(|| format!("{}: expected an object", docs.show(&at.key("responses"))))?;
        let mut first_success = true;
        for (key, r) in rs {
            let rloc = at.key("responses").key(key);
            let status = status(key).ok_or_else(|| format!("{}: not a status code, range (4XX) or `default`", docs.show(&rloc)))?;
            let name = if status.success() && std::mem::replace(&mut first_success, false) {
                format!("{hint}Response")
            } else if status.success() {
                format!("{hint}Response{}", status.key())
            } else {
                format!("{hint}Error{}", pascal(&status.key()))
            };
            let (r, rloc) = docs.follow(r, &rloc)?;
            let content = match media(r.get("content"), &rloc.key("content"), docs)? {
                Media::None => Content::None,
                Media::Json(s, sloc) => Content::Json(match s {
                    Some(s) => reader.ty(s, &sloc, &name)?,
                    None => Ty::Any,
                }),
                Media::Other(m) => Content::Other(m),
            };
            responses.push(Response { status, content, doc: doc(r) });
        }
    }
    Ok(Operation {
        id,
        method: method.to_uppercase(),
        path: path.to_string(),
        summary: op.get("summary").and_then(Value::as_str).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        doc: op.get("description").and_then(Value::as_str).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        deprecated: op.get("deprecated") == Some(&Value::Bool(true)),
        params,
        body,
        responses,
    })
}

fn template_vars(path: &str) -> Vec<String> {
    path.split('{').skip(1).filter_map(|s| s.split_once('}').map(|(v, _)| v.to_string())).collect()
}

pub(crate) fn status(key: &str) -> Option<Status> {
    if key == "default" {
        return Some(Status::Default);
    }
    let b = key.as_bytes();
    if b.len() == 3 && (b'1'..=b'5').contains(&b[0]) {
        if b[1..].eq_ignore_ascii_case(b"XX") {
            return Some(Status::Range((b[0] - b'0') as u16));
        }
        return key.parse().ok().map(Status::Code);
    }
    None
}

enum Media<'a> {
    None,
    /// The schema (if any) and where it is.
    Json(Option<&'a Value>, Loc),
    Other(String),
}

pub(crate) fn is_json(media: &str) -> bool {
    let m = media.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
}

/// A `content` map's JSON media type (preferred), else its first one.
fn media<'a>(content: Option<&'a Value>, at: &Loc, docs: &Docs) -> Result<Media<'a>, String> {
    let Some(content) = content else { return Ok(Media::None) };
    let content = content.as_object().ok_or_else(|| format!("{}: expected an object", docs.show(at)))?;
    if let Some((m, v)) = content.iter().find(|(m, _)| is_json(m)) {
        return Ok(Media::Json(v.get("schema"), at.key(m).key("schema")));
    }
    Ok(match content.keys().next() {
        Some(m) => Media::Other(m.clone()),
        None => Media::None,
    })
}

fn request_body(reader: &mut Reader<'_>, b: &Value, at: &Loc, hint: &str) -> Result<Option<Body>, String> {
    let docs = reader.docs;
    let (b, bloc) = docs.follow(b, at)?;
    let required = b.get("required") == Some(&Value::Bool(true));
    match media(b.get("content"), &bloc.key("content"), docs)? {
        Media::None => Ok(None),
        Media::Json(s, sloc) => {
            let ty = match s {
                Some(s) => reader.ty(s, &sloc, &format!("{hint}Request"))?,
                None => Ty::Any,
            };
            Ok(Some(Body { required, ty, doc: doc(b) }))
        }
        Media::Other(_) => {
            let kinds: Vec<&str> = b["content"].as_object().map(|c| c.keys().map(String::as_str).collect()).unwrap_or_default();
            Err(format!("{}: a request body of {} is not supported (only JSON bodies are)", docs.show(&bloc.key("content")), kinds.join(", ")))
        }
    }
}

fn parameter(reader: &mut Reader<'_>, p: &Value, at: &Loc, hint: &str) -> Result<Option<Param>, String> {
    let docs = reader.docs;
    let name = p.get("name").and_then(Value::as_str).ok_or_else(|| format!("{}: a parameter without a name", docs.show(at)))?;
    let location = match p.get("in").and_then(Value::as_str) {
        Some("path") => In::Path,
        Some("query") => In::Query,
        Some("header") => In::Header,
        Some("cookie") => return Err(format!("{}: cookie parameters are not supported", docs.show(&at.key("in")))),
        other => return Err(format!("{}: unknown parameter location {other:?}", docs.show(&at.key("in")))),
    };
    if location == In::Header && IGNORED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Ok(None);
    }
    let Some(schema) = p.get("schema") else {
        let why = if p.get("content").is_some() { "a parameter with `content` (not `schema`) is not supported" } else { "a parameter without a schema" };
        return Err(format!("{}: {why}", docs.show(at)));
    };
    let ty = reader.ty(schema, &at.key("schema"), &format!("{hint}{}", pascal(&crate::schema::ident_chars(name))))?;
    let scalar = |t: &Ty| scalar(reader, t);
    let is_array = match resolve(reader, &ty) {
        Ty::Array(item) if scalar(&item) => true,
        t if scalar(&t) => false,
        _ => return Err(format!("{}: a parameter of object type is not supported (only scalars and arrays of scalars)", docs.show(&at.key("schema")))),
    };
    let explode_default = location == In::Query && p.get("style").and_then(Value::as_str).is_none_or(|s| s == "form");
    let explode = p.get("explode").and_then(Value::as_bool).unwrap_or(explode_default);
    let style = match (location, p.get("style").and_then(Value::as_str)) {
        (In::Path | In::Header, None | Some("simple")) => Style::Comma,
        (In::Query, None | Some("form")) if explode => Style::Repeat,
        (In::Query, None | Some("form")) => Style::Comma,
        (In::Query, Some("spaceDelimited")) if is_array && !explode => Style::Space,
        (In::Query, Some("pipeDelimited")) if is_array && !explode => Style::Pipe,
        (In::Query, Some("spaceDelimited" | "pipeDelimited")) => Style::Repeat,
        (_, Some(s)) => return Err(format!("{}: style `{s}` is not supported here", docs.show(&at.key("style")))),
    };
    Ok(Some(Param {
        name: name.to_string(),
        location,
        required: location == In::Path || p.get("required") == Some(&Value::Bool(true)),
        ty,
        style,
        doc: doc(p),
        idempotency_key: location == In::Header && name.eq_ignore_ascii_case("idempotency-key"),
        deprecated: p.get("deprecated") == Some(&Value::Bool(true)),
    }))
}

/// A type with its aliases seen through (and nullability dropped).
fn resolve(reader: &Reader<'_>, t: &Ty) -> Ty {
    let mut t = t.clone();
    for _ in 0..16 {
        t = match t {
            Ty::Nullable(inner) => *inner,
            Ty::Named(i) => match &reader.types[i].def {
                Def::Alias(a) => a.clone(),
                _ => return Ty::Named(i),
            },
            other => return other,
        };
    }
    t
}

fn scalar(reader: &Reader<'_>, t: &Ty) -> bool {
    match resolve(reader, t) {
        Ty::String | Ty::Int { .. } | Ty::Number | Ty::Bool | Ty::DateTime | Ty::Date | Ty::Uuid | Ty::Bytes | Ty::Literals(_) => true,
        Ty::Union(ts) => ts.iter().all(|t| scalar(reader, t)),
        // A value of no declared type is sent as its text.
        Ty::Any => true,
        _ => false,
    }
}
