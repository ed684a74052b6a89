//! The error classes of every host, from the core's kinds (`errors.kinds` in the schema:
//! `ErrorKind::KINDS`, each a name and a one-line doc) and the fields of the view an error
//! crosses as (`errors.view`: `ErrorView`): a Python module of exception classes, a
//! JavaScript module with its declarations, and a Kotlin sealed class. What differs between
//! hosts is translation only (a field's name and place, how a pair is held, a class's name),
//! given by `ErrorOptions`.
//!
//! Guarantees: every kind is a class and every field of the view (but those a host skips)
//! is on every class, so a kind or a field added in the core reaches each host when
//! regenerated; the view's `kind` picks the class and its `text` is the host's message. An
//! option naming a field or kind that does not exist is an error, never ignored.

pub mod kotlin;
pub mod node;
pub mod python;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Def, Field, Model};

/// The view field that names the class (`TimeoutError`).
pub const KIND: &str = "kind";
/// The view field that is a host exception's message (the core's text without the kind name).
pub const TEXT: &str = "text";

/// A field a host's error has beside the view's (the raw downstream body).
#[derive(Debug, Clone, Default)]
pub struct ErrorExtra {
    pub name: String,
    /// The host's type.
    pub ty: String,
    /// Its value when not given.
    pub default: String,
    pub doc: String,
    /// Where its value comes from when an error is built from the view (an expression).
    pub from: String,
}

/// How one host's error classes are written.
#[derive(Debug, Clone, Default)]
pub struct ErrorOptions {
    /// View fields the host leaves out (Node's `message` is the Error's own).
    pub skip: BTreeSet<String>,
    /// A view field's name in the host when it is not the usual one (snake_case in Python,
    /// camelCase elsewhere): `code` is Node's kind, so the downstream's code is `errorCode`.
    pub rename: BTreeMap<String, String>,
    /// Required view fields a constructor may leave out, and what each falls back to (an
    /// expression): Python's `message` falls back to the text.
    pub fallback: BTreeMap<String, String>,
    /// Fields beside the view's.
    pub extra: Vec<ErrorExtra>,
    /// A field (a view field or an extra) placed just before another: where a host's
    /// positional constructor has had it (Java sees its overloads by position).
    pub before: BTreeMap<String, String>,
    /// Python: fields only one kind exposes, as a read-only property of its class.
    pub only_on: BTreeMap<String, String>,
    /// Object types a host holds as pairs (Python tuples, Kotlin `Pair`), not as objects.
    pub pairs: BTreeSet<String>,
    /// The base class's doc beside the kinds' own (what the host adds, e.g. how its message reads).
    pub base_doc: Vec<String>,
    /// Kotlin: a class is named by its kind without this suffix (`TimeoutError` -> `Timeout`) ...
    pub strip_suffix: String,
    /// ... and the base kind's class is this one (`Other`; the base class is the exception itself).
    pub base_name: String,
}

/// Where a host field's value comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    View(&'a Field),
    Extra(&'a ErrorExtra),
}

/// One field of a host's error, in its place.
#[derive(Debug, Clone)]
pub struct Slot<'a> {
    /// Its name in the view (a view field's wire name), or an extra's name.
    pub key: &'a str,
    /// Its name in the host.
    pub name: String,
    pub source: Source<'a>,
    /// What a constructor falls back to when it is not given.
    pub fallback: Option<&'a str>,
}

impl Slot<'_> {
    pub fn doc(&self) -> Option<&str> {
        match self.source {
            Source::View(f) => f.doc.as_deref(),
            Source::Extra(e) => Some(&e.doc),
        }
    }
}

/// What a code span of a doc names.
pub enum Ref<'l, 'a> {
    Field(&'l Slot<'a>),
    Kind(&'l str),
    Other,
}

/// The error classes to write: the kinds (name, doc; the base first) and each field in order.
pub struct Layout<'a> {
    pub kinds: &'a [(String, String)],
    pub slots: Vec<Slot<'a>>,
}

impl<'a> Layout<'a> {
    /// The base kind (`HarnessError`).
    pub fn base(&self) -> &'a str {
        &self.kinds[0].0
    }

    pub fn slot(&self, key: &str) -> Option<&Slot<'a>> {
        self.slots.iter().find(|s| s.key == key)
    }

    /// What a doc's code span names: a field of the error, a kind, or neither.
    pub fn refers(&self, span: &str) -> Ref<'_, 'a> {
        if let Some(s) = self.slot(span) {
            return Ref::Field(s);
        }
        match self.kinds.iter().find(|(k, _)| k == span) {
            Some((k, _)) => Ref::Kind(k),
            None => Ref::Other,
        }
    }

    /// `doc` with each code span (`` `x` ``) written by `write`: how a host refers to a field
    /// or a class. Unbalanced backticks leave the doc as it is.
    pub fn doc(&self, doc: &str, write: impl Fn(&str, Ref<'_, 'a>) -> String) -> String {
        let parts: Vec<&str> = doc.split('`').collect();
        if parts.len().is_multiple_of(2) {
            return doc.to_string();
        }
        parts.iter().enumerate().map(|(i, p)| if i % 2 == 1 { write(p, self.refers(p)) } else { p.to_string() }).collect()
    }
}

/// The kinds and every field a host's error has, each named by `name` (unless renamed) and
/// placed as `opts.before` says.
pub fn layout<'a>(model: &'a Model, opts: &'a ErrorOptions, name: impl Fn(&str) -> String) -> Result<Layout<'a>, String> {
    let (errors, fields) = model.error_fields()?;
    for needed in [KIND, TEXT] {
        if !fields.iter().any(|f| f.name == needed) {
            return Err(format!("errors: `{}` has no `{needed}` field", errors.view));
        }
    }
    let host = |key: &str| opts.rename.get(key).cloned().unwrap_or_else(|| name(key));
    let mut slots: Vec<Slot<'a>> = fields
        .iter()
        .filter(|f| f.name != KIND && f.name != TEXT && !opts.skip.contains(&f.name))
        .map(|f| Slot { key: &f.name, name: host(&f.name), source: Source::View(f), fallback: opts.fallback.get(&f.name).map(String::as_str) })
        .chain(opts.extra.iter().map(|e| Slot { key: &e.name, name: e.name.clone(), source: Source::Extra(e), fallback: None }))
        .collect();
    let known = |key: &str| slots.iter().any(|s| s.key == key);
    for (what, keys) in [("skip", opts.skip.iter().collect::<Vec<_>>()), ("rename", opts.rename.keys().collect()), ("fallback", opts.fallback.keys().collect())] {
        if let Some(k) = keys.into_iter().find(|k| !fields.iter().any(|f| &f.name == *k)) {
            return Err(format!("errors: {what} names `{k}`, which is not a field of `{}`", errors.view));
        }
    }
    for (k, target) in &opts.before {
        if !known(k) || !known(target) {
            return Err(format!("errors: before: `{k}` before `{target}`, which are not both fields of the error"));
        }
    }
    for (k, kind) in &opts.only_on {
        if !known(k) || !errors.kinds.iter().any(|(n, _)| n == kind) {
            return Err(format!("errors: only_on: `{k}` on `{kind}`, which is not a field on a kind"));
        }
    }
    // Each moved field goes just before its target, in order; one whose target is moved
    // itself waits for it.
    let mut pending: Vec<Slot<'a>> = Vec::new();
    slots.retain(|s| {
        let moved = opts.before.contains_key(s.key);
        if moved {
            pending.push(s.clone());
        }
        !moved
    });
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|s| match slots.iter().position(|t| t.key == opts.before[s.key]) {
            Some(i) => {
                slots.insert(i, s.clone());
                false
            }
            None => true,
        });
        if pending.len() == before {
            return Err(format!("errors: `before` goes round in a circle at `{}`", pending[0].key));
        }
    }
    Ok(Layout { kinds: &errors.kinds, slots })
}

/// The two fields of an object type a host holds as a pair (`ProviderError`: provider, error).
pub fn pair<'m>(model: &'m Model, name: &str) -> Result<(&'m Field, &'m Field), String> {
    match model.get(name).map(|t| &t.def) {
        Some(Def::Object { fields, .. }) if fields.len() == 2 => Ok((&fields[0], &fields[1])),
        _ => Err(format!("errors: `{name}` is held as a pair but is not an object of two fields")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Options;

    fn model() -> Model {
        Model::read(&json!({
            "$defs": {
                "View": {"type": "object", "properties": {
                    "kind": {"type": "string", "enum": ["BaseError", "SlowError"]},
                    "message": {"type": "string", "description": "The message alone."},
                    "text": {"type": "string"},
                    "attempts": {"type": "integer", "format": "uint32", "description": "Tries; see `SlowError`."},
                    "code": {"type": ["string", "null"]},
                    "phase": {"type": ["string", "null"], "enum": ["a", "b", null]},
                    "pairs": {"type": "array", "items": {"$ref": "#/$defs/Two"}}
                }, "required": ["kind", "message", "text", "attempts", "code", "phase", "pairs"]},
                "Two": {"type": "object", "properties": {"left": {"type": "string"}, "right": {"type": "string"}}, "required": ["left", "right"]}
            },
            "errors": {"view": "View", "kinds": [{"name": "BaseError", "doc": "Anything."}, {"name": "SlowError", "doc": "Too slow; `phase` says where, `code` why."}]}
        }))
        .unwrap()
    }

    fn body(ty: &str, default: &str, from: &str) -> ErrorExtra {
        ErrorExtra { name: "body".into(), ty: ty.into(), default: default.into(), doc: "Raw bytes.".into(), from: from.into() }
    }

    fn opts(errors: ErrorOptions) -> Options {
        Options { header: "Generated by a test.".into(), kotlin_package: "dev.test".into(), errors, ..Default::default() }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn python_has_a_class_per_kind_keyword_fields_and_a_property_only_its_kind_has() {
        let o = opts(ErrorOptions {
            fallback: map(&[("message", "text")]),
            extra: vec![body("Optional[bytes]", "None", "")],
            before: map(&[("body", "pairs")]),
            only_on: map(&[("phase", "SlowError")]),
            pairs: ["Two".to_string()].into(),
            ..Default::default()
        });
        let out = python::emit(&model(), &o).unwrap();
        assert!(out.starts_with("# Generated by a test.\n"), "{out}");
        assert!(out.contains("class BaseError(Exception):"), "{out}");
        assert!(out.contains("class SlowError(BaseError):\n    \"\"\"Too slow; ``phase`` says where, ``code`` why.\"\"\""), "{out}");
        assert!(out.contains("        text: str = \"\",\n        *,\n        message: Optional[str] = None,\n        attempts: int = 0,\n"), "{out}");
        assert!(out.contains("        phase: Optional[str] = None,\n        body: Optional[bytes] = None,\n        pairs: Sequence[Tuple[str, str]] = (),\n"), "{out}");
        assert!(out.contains("        self.message = text if message is None else message\n"), "{out}");
        assert!(out.contains("        self._phase = phase\n"), "{out}");
        assert!(out.contains("        self.pairs = [(p[0], p[1]) for p in pairs]\n"), "{out}");
        assert!(out.contains("    @property\n    def phase(self) -> Optional[str]:\n"), "{out}");
        assert!(out.contains("    pairs: List[Tuple[str, str]]\n"), "{out}");
        assert!(!out.contains("    phase: Optional[str]\n"), "a field only one kind has is not on the base: {out}");
        assert!(out.contains("__all__: List[str] = [\n    \"BaseError\",\n    \"SlowError\",\n]"), "{out}");
    }

    #[test]
    fn node_renames_skips_and_keeps_an_extra_off_the_enumerable_fields() {
        let o = opts(ErrorOptions {
            skip: ["message".to_string()].into(),
            rename: map(&[("code", "errorCode")]),
            extra: vec![body("Buffer", "undefined", "view.body")],
            ..Default::default()
        });
        let js = node::emit_js(&model(), &o).unwrap();
        assert!(js.contains("    this.errorCode = fields.errorCode ?? undefined\n"), "{js}");
        assert!(js.contains("    this.attempts = fields.attempts ?? 0\n    this.errorCode"), "{js}");
        assert!(js.contains("    this.pairs = fields.pairs ?? []\n"), "{js}");
        assert!(js.contains("Object.defineProperty(this, 'body', { value: fields.body ?? undefined, enumerable: false"), "{js}");
        assert!(!js.contains("this.message"), "{js}");
        assert!(js.contains("/** Too slow; `phase` says where, `errorCode` why. */\nclass SlowError extends BaseError {}"), "{js}");
        assert!(js.contains("    errorCode: view.code,\n"), "{js}");
        assert!(js.contains("    body: view.body,\n    cause,\n"), "{js}");
        let dts = node::emit_dts(&model(), &o).unwrap();
        assert!(dts.contains("import type { Two } from './types'"), "{dts}");
        assert!(dts.contains("  readonly phase?: 'a' | 'b'\n"), "{dts}");
        assert!(dts.contains("  readonly attempts: number\n"), "{dts}");
        assert!(dts.contains("  pairs?: Two[]\n"), "{dts}");
        assert!(dts.contains("export declare class SlowError extends BaseError {}"), "{dts}");
    }

    #[test]
    fn kotlin_names_classes_by_kind_and_keeps_positional_places() {
        let o = opts(ErrorOptions {
            rename: map(&[("message", "reason")]),
            fallback: map(&[("message", "message.removePrefix(\"$kind: \")")]),
            extra: vec![body("ByteArray?", "null", "")],
            before: map(&[("body", "message"), ("message", "pairs")]),
            pairs: ["Two".to_string()].into(),
            strip_suffix: "Error".into(),
            base_name: "Other".into(),
            ..Default::default()
        });
        let out = kotlin::emit(&model(), &o).unwrap();
        assert!(out.contains("package dev.test"), "{out}");
        assert!(out.contains("    class Slow(info: HarnessErrorInfo) : HarnessException(info)"), "{out}");
        assert!(out.contains("    class Other(info: HarnessErrorInfo) : HarnessException(info)"), "{out}");
        assert!(out.contains("            \"SlowError\" -> Slow(info)\n            else -> Other(info)\n"), "{out}");
        // kind, message, then the view's order, with body and reason moved before pairs.
        let params: Vec<&str> = out
            .split("@JvmOverloads constructor(\n")
            .nth(1)
            .unwrap()
            .lines()
            .take_while(|l| *l != ") {")
            .filter(|l| !l.trim_start().starts_with("/**") && !l.trim_start().starts_with('*'))
            .collect();
        assert_eq!(
            params,
            [
                "    val kind: String,",
                "    val message: String,",
                "    val attempts: Int = 0,",
                "    val code: String? = null,",
                "    val phase: String? = null,",
                "    val body: ByteArray? = null,",
                "    reason: String? = null,",
                "    val pairs: List<Pair<String, String>> = emptyList(),",
            ]
        );
        assert!(out.contains("    val reason: String = reason ?: message.removePrefix(\"$kind: \")"), "{out}");
        assert!(out.contains("/** Too slow; [phase] says where, [code] why. */"), "{out}");
        assert!(out.contains("/** Tries; see [HarnessException.Slow]. */"), "{out}");
        assert!(out.contains("internal fun errorInfo(view: View, message: String, body: ByteArray?): HarnessErrorInfo"), "{out}");
        assert!(out.contains("    reason = view.message,\n    pairs = view.pairs.map { it.left to it.right },\n"), "{out}");
    }

    #[test]
    fn an_option_naming_nothing_or_a_circle_is_an_error() {
        let m = model();
        let err = |e: ErrorOptions| python::emit(&m, &opts(e)).unwrap_err();
        assert!(err(ErrorOptions { rename: map(&[("nope", "x")]), ..Default::default() }).contains("`nope`"));
        assert!(err(ErrorOptions { only_on: map(&[("phase", "NoSuchError")]), ..Default::default() }).contains("NoSuchError"));
        assert!(err(ErrorOptions { before: map(&[("code", "phase"), ("phase", "code")]), ..Default::default() }).contains("circle"));
        let bare = Model::read(&json!({"$defs": {}})).unwrap();
        assert_eq!(python::emit(&bare, &opts(ErrorOptions::default())).unwrap_err(), "the document has no errors");
    }
}
