//! What a client generator needs of an OpenAPI document, language-neutral: the operations
//! (each with its parameters, JSON body and responses) and the named types they use.

use serde_json::Value;

/// A type as a field, parameter, body or response uses it.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    String,
    /// `int32`, `int64` or no format: a host's integer type is wide enough for each.
    Int {
        wide: bool,
    },
    Number,
    Bool,
    /// `format: date-time` (RFC 3339).
    DateTime,
    /// `format: date`.
    Date,
    /// `format: uuid`.
    Uuid,
    /// `format: byte`: base64 on the wire.
    Bytes,
    /// Any JSON value.
    Any,
    Array(Box<Ty>),
    /// An object of arbitrary keys, each value of this type.
    Map(Box<Ty>),
    /// A named type: an index into `Api::types`.
    Named(usize),
    Nullable(Box<Ty>),
    /// One of these JSON values (strings, integers or booleans): `enum` or `const`.
    Literals(Vec<Value>),
    /// One of these unnamed types (a 3.1 type array such as `[string, integer]`).
    Union(Vec<Ty>),
}

impl Ty {
    /// The named types this type mentions.
    pub fn refs(&self, out: &mut Vec<usize>) {
        match self {
            Ty::Named(i) => out.push(*i),
            Ty::Array(t) | Ty::Map(t) | Ty::Nullable(t) => t.refs(out),
            Ty::Union(ts) => ts.iter().for_each(|t| t.refs(out)),
            _ => {}
        }
    }

    pub fn nullable(self, yes: bool) -> Ty {
        match self {
            Ty::Nullable(_) | Ty::Any => self,
            t if yes => Ty::Nullable(Box::new(t)),
            t => t,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Prop {
    /// The name on the wire.
    pub name: String,
    pub ty: Ty,
    pub required: bool,
    pub doc: Option<String>,
    /// The value a reader assumes when the key is absent (`default`).
    pub default: Option<Value>,
    /// Only in responses (`readOnly`).
    pub read_only: bool,
    /// Only in requests (`writeOnly`).
    pub write_only: bool,
    pub deprecated: bool,
}

/// How a union's members are told apart: the value of one string property.
#[derive(Debug, Clone)]
pub struct Tag {
    pub property: String,
    /// Each tag value and the member (an index into the union's members) it selects.
    pub values: Vec<(String, usize)>,
    /// Declared with `discriminator` (else inferred from members whose property is an enum
    /// with values no other member has): a value that selects nothing is then an error.
    pub declared: bool,
}

#[derive(Debug, Clone)]
pub enum Def {
    /// Properties in document order; `additional` is the type of other keys when the schema
    /// declares one (`additionalProperties: true` or a schema) beside its properties.
    Object { props: Vec<Prop>, additional: Option<Ty> },
    /// `oneOf`/`anyOf`: a value is one of the members.
    Union { members: Vec<Ty>, tag: Option<Tag> },
    /// Another name for a type (an enum, a list, a primitive with a doc).
    Alias(Ty),
}

#[derive(Debug, Clone)]
pub struct TypeDef {
    /// PascalCase, unique in the document.
    pub name: String,
    pub doc: Option<String>,
    pub def: Def,
    /// Where it is defined, as messages show it.
    pub pointer: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    Path,
    Query,
    Header,
}

/// How an array parameter is written (`style`, with `explode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `a,b` (path and header; query with `explode: false`).
    Comma,
    /// `k=a&k=b` (query, `form` with `explode: true`).
    Repeat,
    /// `a b` (`spaceDelimited`).
    Space,
    /// `a|b` (`pipeDelimited`).
    Pipe,
}

#[derive(Debug, Clone)]
pub struct Param {
    /// The name on the wire.
    pub name: String,
    pub location: In,
    pub required: bool,
    pub ty: Ty,
    pub style: Style,
    pub doc: Option<String>,
    /// The `Idempotency-Key` header: Harness sends it and may then retry any method.
    pub idempotency_key: bool,
    pub deprecated: bool,
}

#[derive(Debug, Clone)]
pub struct Body {
    pub required: bool,
    pub ty: Ty,
    pub doc: Option<String>,
}

/// A response's status key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Code(u16),
    /// `4XX`: the first digit.
    Range(u16),
    Default,
}

impl Status {
    pub fn key(&self) -> String {
        match self {
            Status::Code(c) => c.to_string(),
            Status::Range(d) => format!("{d}XX"),
            Status::Default => "default".into(),
        }
    }

    /// A success as Harness sees it (it raises for >= 400).
    pub fn success(&self) -> bool {
        match self {
            Status::Code(c) => *c < 400,
            Status::Range(d) => *d < 4,
            Status::Default => false,
        }
    }
}

/// What a response carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    None,
    Json(Ty),
    /// Not JSON (a host hands over the bytes): the media type.
    Other(String),
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: Status,
    pub content: Content,
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Operation {
    /// `operationId`, or one made from the method and path: the endpoint label.
    pub id: String,
    pub method: String,
    pub path: String,
    pub summary: Option<String>,
    pub doc: Option<String>,
    pub deprecated: bool,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    pub responses: Vec<Response>,
}

/// An operation the generator does not write, and why.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub method: String,
    pub path: String,
    pub id: Option<String>,
    /// `pointer: what is not supported`.
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Api {
    /// `openapi`: `3.0.x` or `3.1.x`.
    pub version: String,
    pub title: String,
    pub api_version: String,
    pub doc: Option<String>,
    pub operations: Vec<Operation>,
    pub refused: Vec<Refusal>,
    /// Every named type read; some only refused operations use.
    pub types: Vec<TypeDef>,
}

impl Api {
    /// The named types the generated operations use, in `types` order.
    pub fn used_types(&self) -> Vec<usize> {
        let mut todo = Vec::new();
        for op in &self.operations {
            op_refs(op, &mut todo);
        }
        let mut seen = vec![false; self.types.len()];
        while let Some(i) = todo.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            def_refs(&self.types[i].def, &mut todo);
        }
        (0..self.types.len()).filter(|i| seen[*i]).collect()
    }
}

pub fn op_refs(op: &Operation, out: &mut Vec<usize>) {
    op.params.iter().for_each(|p| p.ty.refs(out));
    if let Some(b) = &op.body {
        b.ty.refs(out);
    }
    for r in &op.responses {
        if let Content::Json(t) = &r.content {
            t.refs(out);
        }
    }
}

pub fn def_refs(def: &Def, out: &mut Vec<usize>) {
    match def {
        Def::Object { props, additional } => {
            props.iter().for_each(|p| p.ty.refs(out));
            if let Some(a) = additional {
                a.refs(out);
            }
        }
        Def::Union { members, .. } => members.iter().for_each(|m| m.refs(out)),
        Def::Alias(t) => t.refs(out),
    }
}
