//! Host-language types from JSON Schema (draft 2020-12, as `schemars` writes it): the
//! config and views of harness-core for the bindings (`harness types`), one model read
//! once and written as TypeScript declarations, a Python module and Kotlin classes; and
//! each host's error classes, from the core's error kinds and its error view (`errors`).
//! Typed service clients from OpenAPI documents are `openapi` (`harness codegen`).
//!
//! Guarantees: the output is deterministic (the schema's order, no timestamps), so it can
//! be checked in and compared (`harness types --check`); a schema the model cannot
//! express fails with its JSON pointer, never silently.

pub mod errors;
pub mod kotlin;
pub mod model;
pub use harness_openapi::names;
pub mod openapi;
pub mod python;
pub mod typescript;

use std::collections::{BTreeMap, BTreeSet};

pub use model::{Def, Model, Ty};

/// How one language's file is written.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The file's first line (after the comment marker): that it is generated, and how.
    pub header: String,
    /// Types read as inputs: every key optional unless required.
    pub inputs: BTreeSet<String>,
    /// TypeScript: types whose keys a host sees in camelCase (views the binding converts).
    pub camel: BTreeSet<String>,
    /// Python: views that cross as objects (`NamedTuple` classes) rather than dicts.
    pub classes: BTreeSet<String>,
    /// Python: fields a class has beside the view's (name, type, default, doc).
    pub python_extra: BTreeMap<String, Vec<(String, String, String, String)>>,
    /// Kotlin: properties a class has beside the view's, not read from the wire
    /// (`@Transient`): (name, type, default, doc).
    pub kotlin_extra: BTreeMap<String, Vec<(String, String, String, String)>>,
    /// Python: members of a class (each a block of lines), e.g. a derived property.
    pub python_members: BTreeMap<String, Vec<String>>,
    /// Kotlin: a type's name when it differs from the schema's (`Event` -> `HarnessEvent`).
    pub kotlin_names: BTreeMap<String, String>,
    /// Kotlin: tagged unions whose variants are nested classes named by their tag
    /// (`HarnessEvent.RequestFinished`), each with a `type` property giving the tag.
    pub kotlin_nested: BTreeSet<String>,
    /// Kotlin: members (lines) in a class's body, e.g. a derived property.
    pub kotlin_members: BTreeMap<String, Vec<String>>,
    /// Types left out of the file.
    pub skip: BTreeSet<String>,
    /// A tagged union's variant names end with this instead of the union's name.
    pub variant_names: BTreeMap<String, String>,
    /// Kotlin: the package.
    pub kotlin_package: String,
    /// The error classes (`errors::*::emit`).
    pub errors: errors::ErrorOptions,
}

/// The named types a definition refers to.
pub fn refs_of(def: &Def) -> Vec<String> {
    fn walk(ty: &Ty, out: &mut Vec<String>) {
        match ty {
            Ty::Ref(n) => out.push(n.clone()),
            Ty::Array(t) | Ty::Map(t) | Ty::Nullable(t) => walk(t, out),
            Ty::Tuple(ts) => ts.iter().for_each(|t| walk(t, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    match def {
        Def::Object { fields, .. } => fields.iter().for_each(|f| walk(&f.ty, &mut out)),
        Def::Tagged { variants, .. } => {
            for v in variants {
                out.extend(v.base.iter().cloned());
                v.fields.iter().for_each(|f| walk(&f.ty, &mut out));
            }
        }
        Def::Alias(t) => walk(t, &mut out),
        Def::Enum { .. } => {}
    }
    out
}

/// Every type reachable from `roots` (the roots included).
pub fn reachable(model: &Model, roots: &[&str]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(t) = model.get(&name) {
            todo.extend(refs_of(&t.def));
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> serde_json::Value {
        json!({"$defs": {
            "Conf": {"type": "object", "additionalProperties": false, "description": "A config.", "properties": {
                "base_url": {"type": "string", "default": ""},
                "retry_after_ms": {"type": ["integer", "null"], "format": "uint64", "description": "How long.", "default": null},
                "mode": {"$ref": "#/$defs/Mode", "default": "a"},
                "auth": {"anyOf": [{"$ref": "#/$defs/Auth"}, {"type": "null"}]},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}}
            }, "required": ["base_url"]},
            "Mode": {"oneOf": [{"type": "string", "const": "a", "description": "First."}, {"type": "string", "enum": ["b-c"]}]},
            "Auth": {"oneOf": [
                {"type": "object", "properties": {"type": {"type": "string", "const": "bearer"}, "token": {"type": ["string", "null"]}}, "required": ["type"]},
                {"type": "object", "properties": {"type": {"type": "string", "const": "callback"}}, "required": ["type"]}
            ]},
            "View": {"type": "object", "properties": {
                "trace_id": {"type": "string"},
                "pairs": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}},
                "from": {"type": "string"},
                "state": {"type": "string", "enum": ["open", "closed"]},
                "text": {"type": "string", "x-sensitive": true}
            }, "required": ["trace_id", "pairs", "from", "state", "text"]}
        }})
    }

    fn opts() -> Options {
        let model = Model::read(&schema()).unwrap();
        Options {
            header: "Generated by a test.".into(),
            inputs: reachable(&model, &["Conf"]),
            camel: ["View".to_string()].into(),
            variant_names: [("Auth".to_string(), "Auth".to_string())].into(),
            kotlin_package: "dev.test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn typescript_inputs_are_optional_views_are_camel_and_unions_are_discriminated() {
        let out = typescript::emit(&Model::read(&schema()).unwrap(), &opts());
        assert!(out.starts_with("// Generated by a test."), "{out}");
        assert!(out.contains("export interface Conf {\n  /** Default: `\"\"`. */\n  base_url: string\n"), "{out}");
        assert!(out.contains("  retry_after_ms?: number | null\n"), "{out}");
        assert!(out.contains("export type Mode = 'a' | 'b-c'"), "{out}");
        assert!(out.contains("export type Auth =\n  | BearerAuth\n  | CallbackAuth"), "{out}");
        assert!(out.contains("export interface BearerAuth {\n  type: 'bearer'\n  token?: string | null\n}"), "{out}");
        assert!(out.contains("  headers?: Record<string, string>\n"), "{out}");
        assert!(out.contains("  traceId: string\n  pairs: [string, number][]\n  from: string\n  state: 'open' | 'closed'\n"), "{out}");
    }

    #[test]
    fn python_uses_typed_dicts_literals_and_named_tuples() {
        let model = Model::read(&schema()).unwrap();
        let mut o = opts();
        o.classes = ["View".to_string()].into();
        let out = python::emit(&model, &o);
        assert!(out.contains("class _ConfRequired(TypedDict):\n    base_url: str"), "{out}");
        assert!(out.contains("class Conf(_ConfRequired, total=False):"), "{out}");
        assert!(out.contains("Mode = Literal[\"a\", \"b-c\"]"), "{out}");
        assert!(out.contains("Auth = Union[\"BearerAuth\", \"CallbackAuth\"]"), "{out}");
        assert!(out.contains("class View(NamedTuple):"), "{out}");
        assert!(out.contains("pairs=[(x[0], x[1],) for x in d[\"pairs\"]]"), "{out}");
        assert!(out.contains("text=<{len(self.text)} chars>"), "{out}");
        // Types come before the types that use them.
        assert!(out.find("Mode = Literal").unwrap() < out.find("class Conf(").unwrap());
    }

    #[test]
    fn kotlin_has_serial_names_nullable_inputs_and_sealed_unions() {
        let out = kotlin::emit(&Model::read(&schema()).unwrap(), &opts());
        assert!(out.contains("package dev.test"), "{out}");
        assert!(out.contains("    @SerialName(\"retry_after_ms\") val retryAfterMs: Long? = null,"), "{out}");
        assert!(out.contains("    @SerialName(\"base_url\") val baseUrl: String,"), "{out}");
        assert!(out.contains("sealed interface Auth"), "{out}");
        assert!(out.contains("@SerialName(\"bearer\")\ndata class BearerAuth(\n"), "{out}");
        assert!(out.contains("@SerialName(\"callback\")\nclass CallbackAuth : Auth"), "{out}");
        assert!(out.contains("    @SerialName(\"b-c\") B_C(\"b-c\"),"), "{out}");
        assert!(out.contains("@Serializable(with = StringIntSerializer::class) Pair<String, Int>"), "{out}");
        // What a user said is printed as its size only.
        assert!(out.contains("override fun toString(): String = \"View(traceId=$traceId, pairs=$pairs, from=$from, state=$state, text=${text.length} chars)\""), "{out}");
        assert!(out.contains("    @SerialName(\"from\") val from: String,"), "{out}");
    }

    #[test]
    fn what_the_model_cannot_express_names_its_pointer() {
        let bad = json!({"$defs": {"X": {"type": "object", "properties": {"y": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}});
        assert_eq!(Model::read(&bad).unwrap_err(), "/$defs/X/properties/y: anyOf other than `T or null` is not supported");
    }
}
