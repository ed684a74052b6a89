//! JSON Schema (draft 2020-12, as `schemars` writes it) read into a small model of named
//! types that every emitter shares: objects, string enums, tagged unions, aliases.
//!
//! Guarantees: every `$defs` entry becomes one named type (in `$defs` order, so output is
//! deterministic); a schema the model cannot express is an error naming its JSON pointer,
//! never skipped.

use serde_json::{Map, Value};

/// A type as a field (or an alias) uses it.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    String,
    /// An integer; `wide` when it may not fit 53 bits (`int64`/`uint64`).
    Int { wide: bool },
    Number,
    Bool,
    /// Any JSON value.
    Any,
    Array(Box<Ty>),
    /// A fixed-length array of these types.
    Tuple(Vec<Ty>),
    /// An object of arbitrary keys, all values of this type.
    Map(Box<Ty>),
    /// A named type.
    Ref(String),
    Nullable(Box<Ty>),
    /// One of these strings.
    Literals(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct Field {
    /// The name on the wire.
    pub name: String,
    pub ty: Ty,
    /// Always present (a view's field, or a required config key).
    pub required: bool,
    pub doc: Option<String>,
    /// The value used when the key is absent.
    pub default: Option<Value>,
    /// What a user said or an upstream answered (`x-sensitive` in the schema): a host's
    /// printed form shows its size only.
    pub sensitive: bool,
}

#[derive(Debug, Clone)]
pub struct Variant {
    /// The tag's value (`"bearer"`).
    pub tag: String,
    pub doc: Option<String>,
    pub fields: Vec<Field>,
    /// A variant that is a named type plus the tag (`RequestFinished` is a `RequestRecord`).
    pub base: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Def {
    Object { fields: Vec<Field>, closed: bool },
    Enum { values: Vec<(String, Option<String>)> },
    /// A union of objects told apart by the string property `tag`.
    Tagged { tag: String, variants: Vec<Variant> },
    Alias(Ty),
}

#[derive(Debug, Clone)]
pub struct TypeDef {
    pub name: String,
    pub doc: Option<String>,
    pub def: Def,
}

/// One read-only view of a client (`views` in the document): a method every host's client
/// gets, generated, that asks the core for the view by name.
#[derive(Debug, Clone)]
pub struct View {
    /// snake_case, as the core names it (`routing_state`).
    pub name: String,
    /// String arguments in order; `true` for an optional one (`endpoint?`), only at the end.
    pub args: Vec<(String, bool)>,
    /// The named type it returns, and whether it is a list of them (`[T]`).
    pub returns: String,
    pub list: bool,
    pub doc: String,
}

/// The error classes every host has (`errors` in the document): the core's kinds, base
/// first, and the view type an error crosses as (its fields are every class's context).
#[derive(Debug, Clone)]
pub struct Errors {
    /// A `$defs` object type (`ErrorView`).
    pub view: String,
    /// (name, one-line doc), the base kind first (`HarnessError`).
    pub kinds: Vec<(String, String)>,
}

/// Every named type of a schema document (`$defs`), in order, the client's views, and the
/// error kinds.
#[derive(Debug, Clone)]
pub struct Model {
    pub types: Vec<TypeDef>,
    pub views: Vec<View>,
    pub errors: Option<Errors>,
}

impl Model {
    pub fn get(&self, name: &str) -> Option<&TypeDef> {
        self.types.iter().find(|t| t.name == name)
    }

    /// Reads `$defs` of `doc`.
    pub fn read(doc: &Value) -> Result<Model, String> {
        let defs = doc.get("$defs").and_then(Value::as_object).ok_or("the document has no $defs object")?;
        let types: Vec<TypeDef> = defs.iter().map(|(name, s)| type_def(name, s, &format!("/$defs/{name}"))).collect::<Result<_, _>>()?;
        let views = doc.get("views").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let views = views.iter().enumerate().map(|(i, v)| view(v, &format!("/views/{i}"), &types)).collect::<Result<_, _>>()?;
        let errors = doc.get("errors").map(|e| errors(e, "/errors", &types)).transpose()?;
        Ok(Model { types, views, errors })
    }

    /// The fields of the error view, or why there are none.
    pub fn error_fields(&self) -> Result<(&Errors, &[Field]), String> {
        let errors = self.errors.as_ref().ok_or("the document has no errors")?;
        match self.get(&errors.view).map(|t| &t.def) {
            Some(Def::Object { fields, .. }) => Ok((errors, fields)),
            _ => Err(format!("/errors/view: `{}` is not an object type of $defs", errors.view)),
        }
    }
}

fn errors(e: &Value, at: &str, types: &[TypeDef]) -> Result<Errors, String> {
    let view = e.get("view").and_then(Value::as_str).ok_or_else(|| format!("{at}/view: expected a string"))?;
    if !types.iter().any(|t| t.name == view && matches!(t.def, Def::Object { .. })) {
        return Err(format!("{at}/view: `{view}` is not an object type of $defs"));
    }
    let raw = e.get("kinds").and_then(Value::as_array).ok_or_else(|| format!("{at}/kinds: expected an array"))?;
    let kinds = raw
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let text = |f: &str| k.get(f).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("{at}/kinds/{i}/{f}: expected a string"));
            Ok((text("name")?, text("doc")?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if kinds.is_empty() {
        return Err(format!("{at}/kinds: no kinds (the first is the base class)"));
    }
    Ok(Errors { view: view.to_string(), kinds })
}

fn view(v: &Value, at: &str, types: &[TypeDef]) -> Result<View, String> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("{at}/{k}: expected a string"));
    let name = text("name")?;
    let returns = text("returns")?;
    let (returns, list) = match returns.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(inner) => (inner.to_string(), true),
        None => (returns, false),
    };
    if !types.iter().any(|t| t.name == returns) {
        return Err(format!("{at}/returns: `{returns}` is not a type of $defs"));
    }
    let raw = v.get("args").and_then(Value::as_array).ok_or_else(|| format!("{at}/args: expected an array"))?;
    let mut args = Vec::new();
    for (i, a) in raw.iter().enumerate() {
        let a = a.as_str().ok_or_else(|| format!("{at}/args/{i}: expected a string"))?;
        match a.strip_suffix('?') {
            Some(n) => args.push((n.to_string(), true)),
            None if args.iter().any(|(_, opt)| *opt) => return Err(format!("{at}/args/{i}: a required argument after an optional one")),
            None => args.push((a.to_string(), false)),
        }
    }
    Ok(View { name, args, returns, list, doc: text("doc")? })
}

fn doc_of(s: &Value) -> Option<String> {
    s.get("description").and_then(Value::as_str).map(str::to_string)
}

fn type_def(name: &str, s: &Value, at: &str) -> Result<TypeDef, String> {
    let doc = doc_of(s);
    if let Some(values) = string_enum(s) {
        return Ok(TypeDef { name: name.into(), doc, def: Def::Enum { values } });
    }
    if let Some(variants) = s.get("oneOf").and_then(Value::as_array) {
        let tagged = variants.iter().enumerate().map(|(i, v)| variant(v, &format!("{at}/oneOf/{i}"))).collect::<Result<Vec<_>, _>>()?;
        return Ok(TypeDef { name: name.into(), doc, def: Def::Tagged { tag: "type".into(), variants: tagged } });
    }
    if is_object_with_properties(s) {
        return Ok(TypeDef { name: name.into(), doc, def: Def::Object { fields: fields(s, at)?, closed: s.get("additionalProperties") == Some(&Value::Bool(false)) } });
    }
    Ok(TypeDef { name: name.into(), doc, def: Def::Alias(ty(s, at)?) })
}

fn is_object_with_properties(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("object") && (s.get("properties").is_some() || s.get("additionalProperties") == Some(&Value::Bool(false)))
}

/// `oneOf` of string consts, or `enum` of strings: the values and their docs.
fn string_enum(s: &Value) -> Option<Vec<(String, Option<String>)>> {
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return values.iter().map(|v| v.as_str().map(|s| (s.to_string(), None))).collect();
    }
    let one_of = s.get("oneOf")?.as_array()?;
    let single = |v: &Value| match v.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
        Some([one]) => one.as_str().map(str::to_string),
        _ => None,
    };
    one_of.iter().map(|v| v.get("const").and_then(Value::as_str).map(str::to_string).or_else(|| single(v)).map(|c| (c, doc_of(v)))).collect()
}

fn variant(v: &Value, at: &str) -> Result<Variant, String> {
    let props = v.get("properties").and_then(Value::as_object).ok_or_else(|| format!("{at}: a union member without properties (only tagged unions are supported)"))?;
    let tag = props
        .get("type")
        .and_then(|t| t.get("const"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}: a union member without a `type` tag (only tagged unions are supported)"))?;
    let base = v.get("$ref").and_then(Value::as_str).map(ref_name).transpose()?;
    let mut fields = fields(v, at)?;
    fields.retain(|f| f.name != "type");
    Ok(Variant { tag: tag.to_string(), doc: doc_of(v), fields, base })
}

fn fields(s: &Value, at: &str) -> Result<Vec<Field>, String> {
    let empty = Map::new();
    let props = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let required: Vec<&str> = s.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    props
        .iter()
        .map(|(name, p)| {
            Ok(Field {
                name: name.clone(),
                ty: ty(p, &format!("{at}/properties/{name}"))?,
                required: required.contains(&name.as_str()),
                doc: doc_of(p),
                default: p.get("default").cloned(),
                sensitive: p.get("x-sensitive").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect()
}

fn ref_name(r: &str) -> Result<String, String> {
    r.strip_prefix("#/$defs/").map(str::to_string).ok_or_else(|| format!("{r}: only local `#/$defs/` references are supported"))
}

/// The type a property (or an alias) has.
pub fn ty(s: &Value, at: &str) -> Result<Ty, String> {
    match s {
        Value::Bool(true) => return Ok(Ty::Any),
        Value::Object(o) if o.is_empty() => return Ok(Ty::Any),
        Value::Object(_) => {}
        _ => return Err(format!("{at}: not a schema")),
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return Ok(Ty::Ref(ref_name(r)?));
    }
    if let Some(any_of) = s.get("anyOf").and_then(Value::as_array) {
        let non_null: Vec<&Value> = any_of.iter().filter(|v| v.get("type").and_then(Value::as_str) != Some("null")).collect();
        if non_null.len() == 1 && any_of.len() == 2 {
            return Ok(Ty::Nullable(Box::new(ty(non_null[0], &format!("{at}/anyOf/0"))?)));
        }
        return Err(format!("{at}: anyOf other than `T or null` is not supported"));
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        let strings: Vec<String> = values.iter().filter_map(Value::as_str).map(str::to_string).collect();
        let nulls = values.iter().filter(|v| v.is_null()).count();
        if strings.len() + nulls != values.len() || strings.is_empty() {
            return Err(format!("{at}/enum: only string values (and null) are supported"));
        }
        let lits = Ty::Literals(strings);
        return Ok(if nulls > 0 { Ty::Nullable(Box::new(lits)) } else { lits });
    }
    if let Some(values) = string_enum(s) {
        return Ok(Ty::Literals(values.into_iter().map(|(v, _)| v).collect()));
    }
    if let Some(c) = s.get("const").and_then(Value::as_str) {
        return Ok(Ty::Literals(vec![c.to_string()]));
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        None => return Ok(Ty::Any),
        Some(_) => return Err(format!("{at}/type: expected a string or an array of strings")),
    };
    let nullable = types.contains(&"null");
    let rest: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    let base = match rest.as_slice() {
        ["string"] => Ty::String,
        ["integer"] => Ty::Int { wide: matches!(s.get("format").and_then(Value::as_str), Some("int64" | "uint64")) },
        ["number"] => Ty::Number,
        ["boolean"] => Ty::Bool,
        ["array"] => match (s.get("prefixItems").and_then(Value::as_array), s.get("items")) {
            (Some(items), _) => Ty::Tuple(items.iter().enumerate().map(|(i, v)| ty(v, &format!("{at}/prefixItems/{i}"))).collect::<Result<_, _>>()?),
            (None, Some(items)) => Ty::Array(Box::new(ty(items, &format!("{at}/items"))?)),
            (None, None) => Ty::Array(Box::new(Ty::Any)),
        },
        ["object"] => match s.get("additionalProperties") {
            Some(v @ Value::Object(_)) => Ty::Map(Box::new(ty(v, &format!("{at}/additionalProperties"))?)),
            _ => Ty::Map(Box::new(Ty::Any)),
        },
        [] => Ty::Any,
        other => return Err(format!("{at}/type: a union of {other:?} is not supported")),
    };
    Ok(if nullable { Ty::Nullable(Box::new(base)) } else { base })
}
