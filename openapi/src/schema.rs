//! Schemas (OpenAPI 3.0's dialect and 3.1's JSON Schema 2020-12) read into `Ty`s and named
//! `TypeDef`s.
//!
//! Guarantees: each schema of `components/schemas` (in any file) is one named type with its
//! own name (PascalCase, made unique), read once; an inline object or union is a named type
//! too, named from where it is used, and read once per place; a keyword that changes what a
//! value may be and that the model cannot express (`not`, `if`, `prefixItems`, ...), or one
//! that is not a schema keyword at all, is an error naming its JSON pointer. Validation
//! keywords (`maxLength`, `pattern`, `minimum`, ...) do not change a type and are left to the
//! JSON Schema validation the core runs on responses.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::loader::{Docs, Loc};
use crate::model::{Def, Prop, Tag, Ty, TypeDef};
use crate::names::pascal;

/// Keywords that say nothing about a value's type (annotations and validation), or that this
/// reader handles itself.
const KNOWN: [&str; 47] = [
    "$ref",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "summary",
    "default",
    "example",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "nullable",
    "format",
    "externalDocs",
    "xml",
    "discriminator",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "type",
    "enum",
    "const",
    "allOf",
    "oneOf",
    "anyOf",
    "maxLength",
    "minLength",
    "pattern",
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "multipleOf",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "contentMediaType",
    "contentEncoding",
    "propertyNames",
];

/// Validation-only keywords beside `KNOWN` (JSON Schema 2020-12).
const VALIDATION: [&str; 5] = ["contains", "minContains", "maxContains", "dependentRequired", "contentSchema"];

/// Keywords that change what a value may be in ways the model cannot express.
const REFUSED: [(&str, &str); 10] = [
    ("not", "`not` is not supported"),
    ("if", "`if`/`then`/`else` is not supported"),
    ("then", "`if`/`then`/`else` is not supported"),
    ("else", "`if`/`then`/`else` is not supported"),
    ("prefixItems", "`prefixItems` (tuples) is not supported"),
    ("patternProperties", "`patternProperties` is not supported"),
    ("dependentSchemas", "`dependentSchemas` is not supported"),
    ("unevaluatedItems", "`unevaluatedItems` is not supported"),
    ("$dynamicRef", "`$dynamicRef` is not supported"),
    ("$recursiveRef", "`$recursiveRef` is not supported"),
];

/// Keywords allowed beside a `$ref` (3.0 ignores siblings; 3.1 applies them: these are the
/// ones that do not change the type, plus `nullable`).
const REF_SIBLINGS: [&str; 10] = ["$ref", "description", "title", "summary", "example", "examples", "deprecated", "readOnly", "writeOnly", "nullable"];

/// What a schema is, before it is given a name.
enum Shape {
    Object { props: Vec<Prop>, additional: Option<Ty> },
    Union { members: Vec<Ty>, tag: Option<Tag> },
    Ty(Ty),
}

pub struct Reader<'d> {
    pub docs: &'d Docs,
    pub types: Vec<TypeDef>,
    /// A type's error, when reading it failed (a type that uses it fails too).
    pub failed: Vec<Option<String>>,
    /// Named (component) schemas and inline objects and unions already read, by place.
    read: HashMap<Loc, Ty>,
    /// Each component schema's name, given before anything is read so that an inline
    /// type never takes a component's name.
    component_names: BTreeMap<Loc, String>,
    taken: BTreeSet<String>,
    depth: usize,
}

impl<'d> Reader<'d> {
    pub fn new(docs: &'d Docs) -> Reader<'d> {
        let mut r =
            Reader { docs, types: Vec::new(), failed: Vec::new(), read: HashMap::new(), component_names: BTreeMap::new(), taken: BTreeSet::new(), depth: 0 };
        for (file, (_, doc)) in docs.files.iter().enumerate() {
            for container in ["/components/schemas", "/$defs", "/definitions"] {
                if let Some(Value::Object(m)) = doc.pointer(container) {
                    for k in m.keys() {
                        let loc = Loc { file, pointer: container.to_string() }.key(k);
                        let name = r.unique(&type_name(k));
                        r.component_names.insert(loc, name);
                    }
                }
            }
        }
        r
    }

    fn unique(&mut self, wanted: &str) -> String {
        let mut name = wanted.to_string();
        let mut n = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{wanted}{n}");
            n += 1;
        }
        name
    }

    fn show(&self, loc: &Loc) -> String {
        self.docs.show(loc)
    }

    /// The type a schema describes; `hint` names an inline object or union.
    pub fn ty(&mut self, s: &Value, at: &Loc, hint: &str) -> Result<Ty, String> {
        if let Some(t) = self.read.get(at) {
            return Ok(t.clone());
        }
        let (shape, nullable) = self.shape(s, at, hint)?;
        match shape {
            Shape::Ty(t) => Ok(t.nullable(nullable)),
            structural => {
                let name = self.unique(&type_name(hint));
                let i = self.push(name, doc(s), at);
                let ty = Ty::Named(i).nullable(nullable);
                self.read.insert(at.clone(), ty.clone());
                self.types[i].def = into_def(structural);
                Ok(ty)
            }
        }
    }

    fn push(&mut self, name: String, doc: Option<String>, at: &Loc) -> usize {
        self.types.push(TypeDef { name, doc, def: Def::Alias(Ty::Any), pointer: self.docs.show(at) });
        self.failed.push(None);
        self.types.len() - 1
    }

    /// A component schema: one named type, read once (a reference to one being read, from a
    /// recursive schema, gets its index at once).
    fn named(&mut self, at: &Loc) -> Result<Ty, String> {
        if let Some(t) = self.read.get(at) {
            let mut refs = Vec::new();
            t.refs(&mut refs);
            if let Some(e) = refs.first().and_then(|i| self.failed[*i].clone()) {
                return Err(e);
            }
            return Ok(t.clone());
        }
        let s = self.docs.get(at).expect("a named location exists");
        let name = self.component_names.get(at).cloned().expect("component names are known");
        let i = self.push(name.clone(), doc(s), at);
        self.read.insert(at.clone(), Ty::Named(i));
        match self.shape(s, at, &name) {
            Ok((Shape::Ty(t), nullable)) => {
                self.types[i].def = Def::Alias(t.nullable(nullable));
                Ok(Ty::Named(i))
            }
            Ok((structural, nullable)) => {
                self.types[i].def = into_def(structural);
                let ty = Ty::Named(i).nullable(nullable);
                self.read.insert(at.clone(), ty.clone());
                Ok(ty)
            }
            Err(e) => {
                self.failed[i] = Some(e.clone());
                Err(e)
            }
        }
    }

    fn is_named(&self, at: &Loc) -> bool {
        self.component_names.contains_key(at)
    }

    fn check_keywords(&self, o: &serde_json::Map<String, Value>, at: &Loc) -> Result<(), String> {
        for k in o.keys() {
            if k.starts_with("x-") || KNOWN.contains(&k.as_str()) || VALIDATION.contains(&k.as_str()) {
                continue;
            }
            if let Some((_, why)) = REFUSED.iter().find(|(r, _)| r == k) {
                return Err(format!("{}: {why}", self.show(&at.key(k))));
            }
            if k == "unevaluatedProperties" && o[k].is_boolean() {
                continue;
            }
            return Err(format!("{}: `{k}` is not a schema keyword this generator knows", self.show(&at.key(k))));
        }
        Ok(())
    }

    fn shape(&mut self, s: &Value, at: &Loc, hint: &str) -> Result<(Shape, bool), String> {
        let o = match s {
            Value::Bool(true) => return Ok((Shape::Ty(Ty::Any), false)),
            Value::Object(o) => o,
            Value::Bool(false) => return Err(format!("{}: the `false` schema (no value is valid) is not supported", self.show(at))),
            _ => return Err(format!("{}: not a schema", self.show(at))),
        };
        self.check_keywords(o, at)?;
        let mut nullable = o.get("nullable") == Some(&Value::Bool(true));
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            if let Some(k) = o.keys().find(|k| !k.starts_with("x-") && !REF_SIBLINGS.contains(&k.as_str())) {
                return Err(format!("{}: `{k}` beside `$ref` is not supported (use allOf)", self.show(&at.key(k))));
            }
            let target = self.docs.target(r, &at.key("$ref"))?;
            if self.is_named(&target) {
                return Ok((Shape::Ty(self.named(&target)?.nullable(nullable)), false));
            }
            let value = self.docs.get(&target).expect("target checked");
            self.depth += 1;
            if self.depth > 40 {
                self.depth -= 1;
                return Err(format!("{}: a cycle of references outside components/schemas", self.show(at)));
            }
            let out = self.shape(value, &target, hint);
            self.depth -= 1;
            let (shape, n) = out?;
            return Ok((shape, n || nullable));
        }
        let types: Vec<&str> = match o.get("type") {
            None => Vec::new(),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => {
                ts.iter().map(|t| t.as_str().ok_or_else(|| format!("{}: expected type names", self.show(&at.key("type"))))).collect::<Result<_, _>>()?
            }
            Some(_) => return Err(format!("{}: expected a type name or an array of them", self.show(&at.key("type")))),
        };
        nullable |= types.contains(&"null");
        let types: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();

        if o.contains_key("allOf") {
            let (shape, n) = self.all_of(o, at, hint)?;
            return Ok((shape, n || nullable));
        }
        for key in ["oneOf", "anyOf"] {
            if o.contains_key(key) {
                let (shape, n) = self.union(o, key, at, hint)?;
                return Ok((shape, n || nullable));
            }
        }
        if let Some(values) = o.get("enum") {
            let (lits, has_null) = self.literals(values, &at.key("enum"))?;
            return Ok((Shape::Ty(lits), nullable || has_null));
        }
        if let Some(c) = o.get("const") {
            if c.is_null() {
                return Ok((Shape::Ty(Ty::Any), true));
            }
            let (lits, _) = self.literals(&Value::Array(vec![c.clone()]), &at.key("const"))?;
            return Ok((Shape::Ty(lits), nullable));
        }
        if o.contains_key("discriminator") && self.is_named(at) {
            if let Some(shape) = self.polymorphic(o, at)? {
                return Ok((shape, nullable));
            }
        }
        let object_like = o.contains_key("properties") || o.contains_key("additionalProperties");
        let ty = match types.as_slice() {
            [] if object_like => return Ok((self.object(o, at, hint)?, nullable)),
            [] if o.contains_key("items") => self.array(o, at, hint)?,
            [] => Ty::Any,
            ["object"] => return Ok((self.object(o, at, hint)?, nullable)),
            [one] => self.primitive(one, o, at, hint)?,
            many => {
                let members = many.iter().map(|t| self.primitive(t, o, at, hint)).collect::<Result<Vec<_>, _>>()?;
                if members.iter().any(|m| matches!(m, Ty::Named(_))) {
                    return Err(format!("{}: a type array with `object` is not supported", self.show(&at.key("type"))));
                }
                Ty::Union(members)
            }
        };
        Ok((Shape::Ty(ty), nullable))
    }

    fn primitive(&mut self, t: &str, o: &serde_json::Map<String, Value>, at: &Loc, hint: &str) -> Result<Ty, String> {
        let format = o.get("format").and_then(Value::as_str);
        Ok(match t {
            "string" => match format {
                Some("date-time") => Ty::DateTime,
                Some("date") => Ty::Date,
                Some("uuid") => Ty::Uuid,
                Some("byte") => Ty::Bytes,
                _ => Ty::String,
            },
            "integer" => Ty::Int { wide: format != Some("int32") },
            "number" => Ty::Number,
            "boolean" => Ty::Bool,
            "array" => self.array(o, at, hint)?,
            "object" => match self.object(o, at, hint)? {
                Shape::Ty(t) => t,
                _ => return Err(format!("{}: an object with properties in a type array is not supported", self.show(&at.key("type")))),
            },
            other => return Err(format!("{}: unknown type `{other}`", self.show(&at.key("type")))),
        })
    }

    fn array(&mut self, o: &serde_json::Map<String, Value>, at: &Loc, hint: &str) -> Result<Ty, String> {
        Ok(match o.get("items") {
            Some(items) => Ty::Array(Box::new(self.ty(items, &at.key("items"), &format!("{hint}Item"))?)),
            None => Ty::Array(Box::new(Ty::Any)),
        })
    }

    fn literals(&self, values: &Value, at: &Loc) -> Result<(Ty, bool), String> {
        let values = values.as_array().ok_or_else(|| format!("{}: expected an array", self.show(at)))?;
        let mut out = Vec::new();
        let mut has_null = false;
        for (i, v) in values.iter().enumerate() {
            match v {
                Value::Null => has_null = true,
                Value::String(_) | Value::Bool(_) => out.push(v.clone()),
                Value::Number(n) if n.is_i64() || n.is_u64() => out.push(v.clone()),
                _ => return Err(format!("{}: only string, integer and boolean enum values are supported", self.show(&at.index(i)))),
            }
        }
        if out.is_empty() {
            return Ok((Ty::Any, has_null));
        }
        let mut unique: Vec<Value> = Vec::new();
        for v in out {
            if !unique.contains(&v) {
                unique.push(v);
            }
        }
        Ok((Ty::Literals(unique), has_null))
    }

    /// `type: object` (or properties without a type): an object type when it has properties
    /// (or is closed), else a map.
    fn object(&mut self, o: &serde_json::Map<String, Value>, at: &Loc, hint: &str) -> Result<Shape, String> {
        let has_props = o.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        let additional = self.additional(o, at, hint)?;
        if !has_props && o.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Ok(Shape::Ty(Ty::Map(Box::new(additional.unwrap_or(Ty::Any)))));
        }
        let mut props = Vec::new();
        let mut required = BTreeSet::new();
        self.props(o, at, hint, &mut props, &mut required)?;
        finish_required(&mut props, &required);
        Ok(Shape::Object { props, additional })
    }

    fn additional(&mut self, o: &serde_json::Map<String, Value>, at: &Loc, hint: &str) -> Result<Option<Ty>, String> {
        Ok(match o.get("additionalProperties") {
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(Ty::Any),
            Some(s) => Some(self.ty(s, &at.key("additionalProperties"), &format!("{hint}Value"))?),
        })
    }

    /// The properties and required names of one object schema, appended (a later property
    /// of the same name replaces the earlier one's type, keeping its place).
    fn props(
        &mut self,
        o: &serde_json::Map<String, Value>,
        at: &Loc,
        hint: &str,
        props: &mut Vec<Prop>,
        required: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        if let Some(r) = o.get("required") {
            let r = r.as_array().ok_or_else(|| format!("{}: expected an array of names", self.show(&at.key("required"))))?;
            required.extend(r.iter().filter_map(Value::as_str).map(str::to_string));
        }
        let Some(p) = o.get("properties") else { return Ok(()) };
        let p = p.as_object().ok_or_else(|| format!("{}: expected an object", self.show(&at.key("properties"))))?;
        for (name, ps) in p {
            let loc = at.key("properties").key(name);
            let ty = self.ty(ps, &loc, &format!("{hint}{}", pascal(&ident_chars(name))))?;
            // Annotations on the property, else on the schema it refers to.
            let target = self.docs.follow(ps, &loc).map(|(v, _)| v).unwrap_or(ps);
            let flag = |k: &str| ps.get(k).or_else(|| target.get(k)).and_then(Value::as_bool).unwrap_or(false);
            let prop = Prop {
                name: name.clone(),
                ty,
                required: false,
                doc: doc(ps),
                default: ps.get("default").or_else(|| target.get("default")).cloned(),
                read_only: flag("readOnly"),
                write_only: flag("writeOnly"),
                deprecated: flag("deprecated"),
            };
            match props.iter_mut().find(|q| q.name == *name) {
                Some(q) => *q = prop,
                None => props.push(prop),
            }
        }
        Ok(())
    }

    /// `allOf`: one part alone (beside annotations) is that part's type; several are merged
    /// into one object (each part an object schema, references followed).
    fn all_of(&mut self, o: &serde_json::Map<String, Value>, at: &Loc, hint: &str) -> Result<(Shape, bool), String> {
        let parts = o["allOf"].as_array().ok_or_else(|| format!("{}: expected an array", self.show(&at.key("allOf"))))?;
        let own = ["properties", "required", "additionalProperties", "oneOf", "anyOf", "items", "enum", "const"].iter().any(|k| o.contains_key(*k));
        if parts.len() == 1 && !own {
            let (shape, n) = self.shape(&parts[0], &at.key("allOf").index(0), hint)?;
            return Ok((shape, n));
        }
        let mut props = Vec::new();
        let mut required = BTreeSet::new();
        let mut additional = None;
        let mut seen = Vec::new();
        self.merge(o, at, hint, &mut props, &mut required, &mut additional, &mut seen)?;
        finish_required(&mut props, &required);
        Ok((Shape::Object { props, additional }, false))
    }

    #[allow(clippy::too_many_arguments)]
    fn merge(
        &mut self,
        o: &serde_json::Map<String, Value>,
        at: &Loc,
        hint: &str,
        props: &mut Vec<Prop>,
        required: &mut BTreeSet<String>,
        additional: &mut Option<Ty>,
        seen: &mut Vec<Loc>,
    ) -> Result<(), String> {
        if seen.contains(at) {
            return Ok(());
        }
        seen.push(at.clone());
        if let Some(parts) = o.get("allOf") {
            let parts = parts.as_array().ok_or_else(|| format!("{}: expected an array", self.show(&at.key("allOf"))))?;
            for (i, part) in parts.iter().enumerate() {
                let loc = at.key("allOf").index(i);
                let (value, loc) = self.docs.follow(part, &loc)?;
                let po = match value {
                    Value::Object(po) => po,
                    Value::Bool(true) => continue,
                    _ => return Err(format!("{}: an allOf part must be an object schema", self.show(&loc))),
                };
                self.check_keywords(po, &loc)?;
                let part_hint = if self.is_named(&loc) { self.component_names[&loc].clone() } else { hint.to_string() };
                self.merge(po, &loc, &part_hint, props, required, additional, seen)?;
            }
        }
        for key in ["oneOf", "anyOf"] {
            if o.contains_key(key) {
                return Err(format!("{}: `{key}` inside `allOf` is not supported", self.show(&at.key(key))));
            }
        }
        if let Some(t) = o.get("type").and_then(Value::as_str) {
            if t != "object" {
                return Err(format!("{}: allOf of a `{t}` with other parts is not supported (only objects merge)", self.show(&at.key("type"))));
            }
        }
        if o.contains_key("enum") || o.contains_key("items") {
            return Err(format!("{}: allOf of a non-object schema with other parts is not supported", self.show(at)));
        }
        self.props(o, at, hint, props, required)?;
        if additional.is_none() {
            *additional = self.additional(o, at, hint)?;
        }
        Ok(())
    }

    /// `oneOf`/`anyOf`: a `null` member makes the rest nullable; literals merge; one member
    /// left is that member; else a union, told apart by its `discriminator`, or by a property
    /// every member has as an enum of values no other member has.
    fn union(&mut self, o: &serde_json::Map<String, Value>, key: &str, at: &Loc, hint: &str) -> Result<(Shape, bool), String> {
        if o.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
            return Err(format!("{}: `{key}` beside `properties` is not supported", self.show(&at.key(key))));
        }
        let raw = o[key].as_array().ok_or_else(|| format!("{}: expected an array", self.show(&at.key(key))))?;
        let mut nullable = false;
        let mut members: Vec<Ty> = Vec::new();
        let mut sources: Vec<Option<Loc>> = Vec::new();
        for (i, m) in raw.iter().enumerate() {
            let loc = at.key(key).index(i);
            let (followed, floc) = self.docs.follow(m, &loc)?;
            let only_null =
                followed.get("type").and_then(Value::as_str) == Some("null") || followed.get("enum").is_some_and(|e| e == &Value::Array(vec![Value::Null]));
            if only_null {
                nullable = true;
                continue;
            }
            let member_hint = match followed.get("title").and_then(Value::as_str) {
                Some(t) if m.get("$ref").is_none() => format!("{hint}{}", pascal(&ident_chars(t))),
                _ => format!("{hint}Option{}", i + 1),
            };
            let ty = self.ty(m, &loc, &member_hint)?;
            if let Ty::Nullable(inner) = ty {
                nullable = true;
                members.push(*inner);
            } else {
                members.push(ty);
            }
            sources.push(m.get("$ref").map(|_| floc));
        }
        if members.is_empty() {
            return Ok((Shape::Ty(Ty::Any), nullable));
        }
        if members.iter().all(|m| matches!(m, Ty::Literals(_))) {
            let mut all = Vec::new();
            for m in &members {
                if let Ty::Literals(v) = m {
                    all.extend(v.iter().filter(|x| !all.contains(*x)).cloned().collect::<Vec<_>>());
                }
            }
            return Ok((Shape::Ty(Ty::Literals(all)), nullable));
        }
        let mut unique: Vec<(Ty, Option<Loc>)> = Vec::new();
        for (m, s) in members.into_iter().zip(sources) {
            if !unique.iter().any(|(u, _)| *u == m) {
                unique.push((m, s));
            }
        }
        if unique.len() == 1 {
            return Ok((Shape::Ty(unique.remove(0).0), nullable));
        }
        let (members, sources): (Vec<Ty>, Vec<Option<Loc>>) = unique.into_iter().unzip();
        let tag = match o.get("discriminator") {
            Some(d) => Some(self.declared_tag(d, &at.key("discriminator"), &members, &sources)?),
            None => self.inferred_tag(&members),
        };
        Ok((Shape::Union { members, tag }, nullable))
    }

    fn declared_tag(&mut self, d: &Value, at: &Loc, members: &[Ty], sources: &[Option<Loc>]) -> Result<Tag, String> {
        let property = d.get("propertyName").and_then(Value::as_str).ok_or_else(|| format!("{}: expected a string", self.show(&at.key("propertyName"))))?;
        let mut values = Vec::new();
        let mut mapped = vec![false; members.len()];
        if let Some(mapping) = d.get("mapping").and_then(Value::as_object) {
            for (value, target) in mapping {
                let t = target.as_str().ok_or_else(|| format!("{}: expected a reference", self.show(&at.key("mapping").key(value))))?;
                let loc = self.mapping_target(t, &at.key("mapping").key(value))?;
                let i = sources
                    .iter()
                    .position(|s| s.as_ref() == Some(&loc))
                    .ok_or_else(|| format!("{}: `{t}` is not a member of the union", self.show(&at.key("mapping").key(value))))?;
                values.push((value.clone(), i));
                mapped[i] = true;
            }
        }
        // A member the mapping does not name is tagged with its schema's name.
        for (i, s) in sources.iter().enumerate() {
            if mapped[i] {
                continue;
            }
            match s.as_ref().and_then(|l| l.pointer.rsplit('/').next().map(|n| n.replace("~1", "/").replace("~0", "~"))) {
                Some(n) if s.as_ref().is_some_and(|l| self.is_named(l)) => values.push((n, i)),
                _ => return Err(format!("{}: member {i} is neither in the mapping nor a named schema", self.show(at))),
            }
        }
        let _ = members;
        Ok(Tag { property: property.to_string(), values, declared: true })
    }

    /// A mapping value: a reference, or a bare schema name (`Cat` for `#/components/schemas/Cat`).
    fn mapping_target(&self, t: &str, at: &Loc) -> Result<Loc, String> {
        if t.contains('#') || t.contains('/') || t.contains('.') {
            self.docs.target(t, at)
        } else {
            Ok(Loc { file: at.file, pointer: "/components/schemas".into() }.key(t))
        }
    }

    fn inferred_tag(&self, members: &[Ty]) -> Option<Tag> {
        let objects: Vec<&Vec<Prop>> = members
            .iter()
            .map(|m| match m {
                Ty::Named(i) => match &self.types[*i].def {
                    Def::Object { props, .. } => Some(props),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<_>>()?;
        'candidates: for p in objects[0] {
            let mut values: Vec<(String, usize)> = Vec::new();
            for (i, props) in objects.iter().enumerate() {
                let Some(q) = props.iter().find(|q| q.name == p.name) else { continue 'candidates };
                let Ty::Literals(lits) = &q.ty else { continue 'candidates };
                for l in lits {
                    let Some(s) = l.as_str() else { continue 'candidates };
                    if values.iter().any(|(v, _)| v == s) {
                        continue 'candidates;
                    }
                    values.push((s.to_string(), i));
                }
            }
            return Some(Tag { property: p.name.clone(), values, declared: false });
        }
        None
    }

    /// A component with a `discriminator` and no `oneOf`: the schemas its mapping names (and
    /// those that extend it with `allOf` in the same file), told apart by the property.
    fn polymorphic(&mut self, o: &serde_json::Map<String, Value>, at: &Loc) -> Result<Option<Shape>, String> {
        let d = &o["discriminator"];
        let dat = at.key("discriminator");
        let property = d.get("propertyName").and_then(Value::as_str).ok_or_else(|| format!("{}: expected a string", self.show(&dat.key("propertyName"))))?;
        let mut targets: Vec<(String, Loc)> = Vec::new();
        if let Some(mapping) = d.get("mapping").and_then(Value::as_object) {
            for (value, target) in mapping {
                let t = target.as_str().ok_or_else(|| format!("{}: expected a reference", self.show(&dat.key("mapping").key(value))))?;
                targets.push((value.clone(), self.mapping_target(t, &dat.key("mapping").key(value))?));
            }
        }
        if let Some(Value::Object(schemas)) = self.docs.files[at.file].1.pointer("/components/schemas") {
            for (name, s) in schemas {
                let loc = Loc { file: at.file, pointer: "/components/schemas".into() }.key(name);
                let extends = s.get("allOf").and_then(Value::as_array).is_some_and(|parts| {
                    parts.iter().enumerate().any(|(i, p)| {
                        p.get("$ref").and_then(Value::as_str).is_some_and(|r| self.docs.target(r, &loc.key("allOf").index(i)).ok().as_ref() == Some(at))
                    })
                });
                if extends && !targets.iter().any(|(_, l)| *l == loc) {
                    targets.push((name.clone(), loc));
                }
            }
        }
        if targets.is_empty() {
            return Ok(None);
        }
        let mut members = Vec::new();
        let mut values = Vec::new();
        for (value, loc) in targets {
            if !self.is_named(&loc) {
                return Err(format!("{}: the mapping of `{value}` must name a schema of components/schemas", self.show(&dat)));
            }
            let ty = self.named(&loc)?;
            let i = match members.iter().position(|m| *m == ty) {
                Some(i) => i,
                None => {
                    members.push(ty);
                    members.len() - 1
                }
            };
            values.push((value, i));
        }
        Ok(Some(Shape::Union { members, tag: Some(Tag { property: property.to_string(), values, declared: true }) }))
    }
}

fn into_def(shape: Shape) -> Def {
    match shape {
        Shape::Object { props, additional } => Def::Object { props, additional },
        Shape::Union { members, tag } => Def::Union { members, tag },
        Shape::Ty(t) => Def::Alias(t),
    }
}

/// Marks required properties; a required name no property declares is a property of any type.
fn finish_required(props: &mut Vec<Prop>, required: &BTreeSet<String>) {
    for p in props.iter_mut() {
        p.required = required.contains(&p.name);
    }
    for r in required {
        if !props.iter().any(|p| p.name == *r) {
            props.push(Prop { name: r.clone(), ty: Ty::Any, required: true, doc: None, default: None, read_only: false, write_only: false, deprecated: false });
        }
    }
}

pub fn doc(s: &Value) -> Option<String> {
    let text = s.get("description").or_else(|| s.get("title")).and_then(Value::as_str)?.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Letters, digits and separators only (a separator where anything else was).
pub fn ident_chars(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// A PascalCase type name from a schema's key (`messaging.v1.service` -> `MessagingV1Service`).
pub fn type_name(s: &str) -> String {
    let p = pascal(&ident_chars(s));
    match p.chars().next() {
        None => "Type".into(),
        Some(c) if c.is_ascii_digit() => format!("T{p}"),
        _ => p,
    }
}
