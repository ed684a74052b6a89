//! Kotlin: `HarnessException`, a sealed class with one nested class per kind (named without
//! the kind's suffix: `Timeout`; the base kind's class is `Other`), each field a property
//! (a Java getter) read from `HarnessErrorInfo`, the public value a test or a fake builds
//! one from (`@JvmOverloads`: Java sees its fields by position), `HarnessException.of`
//! (the class of an info's kind) and `errorInfo` (an info from the core's error view).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{layout, pair, ErrorOptions, Layout, Ref, Slot, Source};
use crate::kotlin::{kdoc, kt, prop};
use crate::model::{Model, Ty};
use crate::names::camel;
use crate::Options;

const EXCEPTION: &str = "HarnessException";
const INFO: &str = "HarnessErrorInfo";

/// One field as the info's constructor takes it, and as the info and the exception hold it.
struct KtField {
    param: String,
    held: String,
    default: String,
    /// Its value from the core's view (`view`) and the extras beside it.
    from: String,
}

fn one(ty: &Ty, model: &Model, opts: &ErrorOptions) -> Result<String, String> {
    match ty {
        Ty::Ref(n) if opts.pairs.contains(n) => {
            let (a, b) = pair(model, n)?;
            Ok(format!("Pair<{}, {}>", one(&a.ty, model, opts)?, one(&b.ty, model, opts)?))
        }
        Ty::Ref(n) => Err(format!("errors (Kotlin): a field of type `{n}` is not supported")),
        t => Ok(kt(t, &mut BTreeSet::new())),
    }
}

fn field(s: &Slot<'_>, model: &Model, opts: &ErrorOptions) -> Result<KtField, String> {
    let f = match s.source {
        Source::Extra(e) => return Ok(KtField { param: e.ty.clone(), held: e.ty.clone(), default: e.default.clone(), from: s.name.clone() }),
        Source::View(f) => f,
    };
    let view = format!("view.{}", prop(&f.name));
    Ok(match &f.ty {
        Ty::Nullable(t) => {
            let t = format!("{}?", one(t, model, opts)?);
            KtField { param: t.clone(), held: t, default: "null".into(), from: view }
        }
        Ty::Array(t) => {
            let from = match &**t {
                Ty::Ref(n) if opts.pairs.contains(n) => {
                    let (a, b) = pair(model, n)?;
                    format!("{view}.map {{ it.{} to it.{} }}", prop(&a.name), prop(&b.name))
                }
                _ => view,
            };
            let t = format!("List<{}>", one(t, model, opts)?);
            KtField { param: t.clone(), held: t, default: "emptyList()".into(), from }
        }
        t => {
            let ty = one(t, model, opts)?;
            let default = match t {
                Ty::Int { .. } => "0",
                Ty::Number => "0.0",
                Ty::Bool => "false",
                _ => "\"\"",
            };
            match s.fallback {
                Some(_) => KtField { param: format!("{ty}?"), held: ty, default: "null".into(), from: view },
                None => KtField { param: ty.clone(), held: ty, default: default.into(), from: view },
            }
        }
    })
}

fn class_name(kind: &str, base: &str, opts: &ErrorOptions) -> String {
    if kind == base {
        return opts.base_name.clone();
    }
    kind.strip_suffix(opts.strip_suffix.as_str()).filter(|n| !n.is_empty()).unwrap_or(kind).to_string()
}

/// A doc as KDoc writes it: a field as a link to its property, a kind as a link to its class.
fn doc(l: &Layout<'_>, opts: &ErrorOptions, text: &str) -> String {
    l.doc(text, |span, r: Ref<'_, '_>| match r {
        Ref::Field(s) => format!("[{}]", s.name),
        Ref::Kind(k) => format!("[{EXCEPTION}.{}]", class_name(k, l.base(), opts)),
        Ref::Other => format!("`{span}`"),
    })
}

/// The exception tree (`Errors.kt`).
pub fn emit(model: &Model, opts: &Options) -> Result<String, String> {
    let eo = &opts.errors;
    let l = layout(model, eo, camel)?;
    let fields: Vec<KtField> = l.slots.iter().map(|s| field(s, model, eo)).collect::<Result<_, _>>()?;
    let base = l.base();
    let example = l.kinds.get(1).map_or(base, |k| k.0.as_str());
    let kind_doc = format!("The cross-language kind name, e.g. `{example}`.");
    let mut out = String::new();
    writeln!(out, "// {}", opts.header).unwrap();
    writeln!(out).unwrap();
    writeln!(out, "package {}", opts.kotlin_package).unwrap();
    writeln!(out).unwrap();

    // The exception: a table of the kinds, then a property per field.
    writeln!(out, "/**").unwrap();
    writeln!(out, " * Every failure of a Harness call. The subclass says what happened; [kind] carries the").unwrap();
    writeln!(out, " * cross-language name used by the Python and Node bindings and in logs and metrics:").unwrap();
    writeln!(out, " *").unwrap();
    writeln!(out, " * | core kind | Kotlin / Java class |").unwrap();
    writeln!(out, " * |-----------|---------------------|").unwrap();
    for (kind, _) in l.kinds[1..].iter().chain(&l.kinds[..1]) {
        let note = if kind == base { " (base)" } else { "" };
        writeln!(out, " * | `{kind}`{note} | [{EXCEPTION}.{}] |", class_name(kind, base, eo)).unwrap();
    }
    for b in &eo.base_doc {
        writeln!(out, " *").unwrap();
        for line in crate::names::doc_lines(&doc(&l, eo, b)) {
            writeln!(out, " * {}", line.replace("*/", "*\\/")).unwrap();
        }
    }
    writeln!(out, " */").unwrap();
    writeln!(out, "sealed class {EXCEPTION}(private val info: {INFO}) : Exception(info.message) {{").unwrap();
    kdoc(&mut out, "    ", Some(&kind_doc));
    writeln!(out, "    val kind: String get() = info.kind").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        kdoc(&mut out, "    ", s.doc().map(|d| doc(&l, eo, d)).as_deref());
        writeln!(out, "    val {}: {} get() = info.{}", s.name, f.held, s.name).unwrap();
    }
    for (kind, kd) in l.kinds[1..].iter().chain(&l.kinds[..1]) {
        writeln!(out).unwrap();
        kdoc(&mut out, "    ", Some(&doc(&l, eo, kd)));
        writeln!(out, "    class {}(info: {INFO}) : {EXCEPTION}(info)", class_name(kind, base, eo)).unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "    companion object {{").unwrap();
    writeln!(out, "        /** The one place a core error becomes a JVM exception: the class of [info]'s kind. */").unwrap();
    writeln!(out, "        @JvmStatic").unwrap();
    writeln!(out, "        fun of(info: {INFO}): {EXCEPTION} = when (info.kind) {{").unwrap();
    for (kind, _) in &l.kinds[1..] {
        writeln!(out, "            \"{kind}\" -> {}(info)", class_name(kind, base, eo)).unwrap();
    }
    writeln!(out, "            else -> {}(info)", eo.base_name).unwrap();
    writeln!(out, "        }}").unwrap();
    writeln!(out, "    }}").unwrap();
    writeln!(out, "}}").unwrap();

    // The info: kind and whole text first, then the fields in their places.
    writeln!(out).unwrap();
    writeln!(out, "/** What a [{EXCEPTION}] carries; public so tests and fakes can build exceptions. */").unwrap();
    writeln!(out, "class {INFO} @JvmOverloads constructor(").unwrap();
    kdoc(&mut out, "    ", Some(&kind_doc));
    writeln!(out, "    val kind: String,").unwrap();
    writeln!(out, "    /** The whole one-line text: the kind name, the message and its context (never a secret or the body). */").unwrap();
    writeln!(out, "    val message: String,").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        match s.fallback {
            Some(fb) => {
                kdoc(&mut out, "    ", Some(&format!("{} By default `{fb}`.", s.doc().map(|d| doc(&l, eo, d)).unwrap_or_default())));
                writeln!(out, "    {}: {} = {},", s.name, f.param, f.default).unwrap();
            }
            None => {
                kdoc(&mut out, "    ", s.doc().map(|d| doc(&l, eo, d)).as_deref());
                writeln!(out, "    val {}: {} = {},", s.name, f.param, f.default).unwrap();
            }
        }
    }
    writeln!(out, ") {{").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        if let Some(fb) = s.fallback {
            kdoc(&mut out, "    ", s.doc().map(|d| doc(&l, eo, d)).as_deref());
            writeln!(out, "    val {0}: {1} = {0} ?: {fb}", s.name, f.held).unwrap();
        }
    }
    writeln!(out).unwrap();
    writeln!(out, "    // Only the kind and the text: the rest may be large or downstream data (the body).").unwrap();
    writeln!(out, "    override fun toString(): String = \"{INFO}(kind=$kind, message=$message)\"").unwrap();
    writeln!(out, "}}").unwrap();

    // From the core's view, with the extras that cross beside it.
    let (errors, _) = model.error_fields()?;
    let extras: Vec<String> = l.slots.iter().zip(&fields).filter(|(s, _)| matches!(s.source, Source::Extra(_))).map(|(s, f)| format!("{}: {}", s.name, f.param)).collect();
    writeln!(out).unwrap();
    writeln!(out, "/** The info of an error that crossed as the core's [{}], `message` its whole text. */", errors.view).unwrap();
    writeln!(out, "internal fun errorInfo(view: {}, message: String{}): {INFO} = {INFO}(", errors.view, extras.iter().map(|e| format!(", {e}")).collect::<String>()).unwrap();
    writeln!(out, "    kind = view.{},", prop(super::KIND)).unwrap();
    writeln!(out, "    message = message,").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        writeln!(out, "    {} = {},", s.name, f.from).unwrap();
    }
    writeln!(out, ")").unwrap();
    Ok(out)
}
