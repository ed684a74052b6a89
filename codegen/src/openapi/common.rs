//! What every host's emitter decides the same way from the model: a type's two forms
//! (`Mode`), which properties each form keeps, an operation's error responses, the default tag
//! value of a union member, and a status's reason phrase.

use std::collections::HashMap;

use serde_json::Value;

use harness_openapi::model::{Api, Def, Operation, Prop, Status, Ty};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Mode {
    /// As responses carry it (no `writeOnly` properties).
    Out,
    /// As requests send it (no `readOnly` properties).
    In,
}

/// Whether a property is part of an object type's form.
pub(super) fn keeps(p: &Prop, m: Mode) -> bool {
    match m {
        Mode::Out => !p.write_only,
        Mode::In => !p.read_only,
    }
}

pub(super) fn error_responses(op: &Operation) -> impl Iterator<Item = &harness_openapi::model::Response> {
    let has_success = op.responses.iter().any(|r| r.status.success());
    op.responses.iter().filter(move |r| !r.status.success() && (has_success || r.status != Status::Default))
}

/// A union's member selected by exactly one tag value gets that value (its property and value),
/// where the property, if declared, can hold it (as the host's `holds` reads a JSON value).
pub(super) fn tag_defaults(api: &Api, holds: fn(&Api, &Ty, &Value) -> bool) -> HashMap<usize, (String, String)> {
    let mut seen: HashMap<usize, Option<(String, String)>> = HashMap::new();
    for t in &api.types {
        let Def::Union { members, tag: Some(tag) } = &t.def else { continue };
        for (mi, m) in members.iter().enumerate() {
            let Ty::Named(j) = m else { continue };
            if !matches!(api.types[*j].def, Def::Object { .. }) {
                continue;
            }
            let values: Vec<&String> = tag.values.iter().filter(|(_, k)| *k == mi).map(|(v, _)| v).collect();
            let this = match values.as_slice() {
                [one] => Some((tag.property.clone(), (*one).clone())),
                _ => None,
            };
            match seen.get(j) {
                Some(prev) if *prev != this => {
                    seen.insert(*j, None);
                }
                Some(_) => {}
                None => {
                    seen.insert(*j, this);
                }
            }
        }
    }
    let mut out = HashMap::new();
    for (j, v) in seen {
        let Some((property, value)) = v else { continue };
        if let Def::Object { props, .. } = &api.types[j].def {
            if let Some(p) = props.iter().find(|p| p.name == property) {
                if !holds(api, &p.ty, &Value::String(value.clone())) {
                    continue;
                }
            }
        }
        out.insert(j, (property, value));
    }
    out
}

/// Whether a JSON value is one of type `t` (an integer of any width).
/// Whether a value (a default) is one the type holds.
pub(super) fn holds(api: &Api, t: &Ty, v: &Value) -> bool {
    match (t, v) {
        (Ty::Nullable(_), Value::Null) => true,
        (Ty::Nullable(t), v) => holds(api, t, v),
        (Ty::String, Value::String(_)) => true,
        (Ty::Int { .. }, Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Ty::Number, Value::Number(_)) => true,
        (Ty::Bool, Value::Bool(_)) => true,
        (Ty::Literals(vs), v) => vs.contains(v),
        (Ty::Named(i), v) => match &api.types[*i].def {
            Def::Alias(t) => holds(api, t, v),
            _ => false,
        },
        _ => false,
    }
}

pub(super) fn http_reason(code: u16) -> Option<&'static str> {
    Some(match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        423 => "Locked",
        424 => "Failed Dependency",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}
