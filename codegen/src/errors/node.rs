//! Node: a CommonJS module of one `Error` class per kind under the base kind's class (`code`
//! is the class name, `cause` is kept, an extra such as the raw body is not enumerable), the
//! table of classes by kind (the module's exports), and `errorFrom(view, cause)` (internal:
//! not enumerable), which builds the class of a view
//! the core handed over (camelCased); and its TypeScript declarations.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{layout, Layout, Ref, Slot, Source};
use crate::model::{Model, Ty};
use crate::names::camel;
use crate::typescript::{doc as jsdoc, ts};
use crate::Options;

/// A doc as JSDoc writes it: a field by its JS name, a class by its name.
fn doc(l: &Layout<'_>, text: &str) -> String {
    l.doc(text, |span, r: Ref<'_, '_>| match r {
        Ref::Field(s) => format!("`{}`", s.name),
        _ => format!("`{span}`"),
    })
}

/// A view field's value when it is not given.
fn default(s: &Slot<'_>) -> String {
    match s.source {
        Source::Extra(e) => e.default.clone(),
        Source::View(f) => match &f.ty {
            Ty::Int { .. } | Ty::Number => "0".into(),
            Ty::Bool => "false".into(),
            Ty::Array(_) => "[]".into(),
            Ty::String | Ty::Literals(_) => "''".into(),
            _ => "undefined".into(),
        },
    }
}

/// The TypeScript type of a field, and whether it may be absent.
fn ts_type(s: &Slot<'_>) -> (String, bool) {
    match s.source {
        Source::Extra(e) => (e.ty.clone(), true),
        Source::View(f) => match &f.ty {
            Ty::Nullable(t) => (ts(t), true),
            t => (ts(t), false),
        },
    }
}

fn base_doc(l: &Layout<'_>, opts: &Options) -> String {
    let mut d = format!("Base class of every Harness error; `code` is the class name (the error kind).\n{}", doc(l, &l.kinds[0].1));
    for b in &opts.errors.base_doc {
        d.push('\n');
        d.push_str(&doc(l, b));
    }
    d
}

/// The module (`errors.js`).
pub fn emit_js(model: &Model, opts: &Options) -> Result<String, String> {
    let l = layout(model, &opts.errors, camel)?;
    let base = l.base();
    let mut out = String::new();
    writeln!(out, "// {}", opts.header).unwrap();
    writeln!(out, "'use strict'").unwrap();
    writeln!(out, "// The Harness error classes: one per kind of the core, each with the core's error view as its").unwrap();
    writeln!(out, "// fields (declared in errors.d.ts); index.js exports the classes.").unwrap();
    writeln!(out).unwrap();
    jsdoc(&mut out, "", Some(&base_doc(&l, opts)), None);
    writeln!(out, "class {base} extends Error {{").unwrap();
    writeln!(out, "  constructor(message, fields = {{}}) {{").unwrap();
    writeln!(out, "    super(message, fields.cause === undefined ? undefined : {{ cause: fields.cause }})").unwrap();
    writeln!(out, "    Object.defineProperty(this, 'name', {{ value: new.target.name, enumerable: false, configurable: true, writable: true }})").unwrap();
    writeln!(out, "    this.code = new.target.name").unwrap();
    for s in &l.slots {
        match s.source {
            Source::View(_) => writeln!(out, "    this.{0} = fields.{0} ?? {1}", s.name, default(s)).unwrap(),
            // Data beside the view, not context: kept off the enumerable fields.
            Source::Extra(_) => writeln!(
                out,
                "    Object.defineProperty(this, '{0}', {{ value: fields.{0} ?? {1}, enumerable: false, configurable: true, writable: true }})",
                s.name,
                default(s)
            )
            .unwrap(),
        }
    }
    writeln!(out, "  }}").unwrap();
    writeln!(out, "}}").unwrap();
    for (kind, kdoc) in &l.kinds[1..] {
        writeln!(out).unwrap();
        jsdoc(&mut out, "", Some(&doc(&l, kdoc)), None);
        writeln!(out, "class {kind} extends {base} {{}}").unwrap();
    }
    writeln!(out).unwrap();
    // Plain names: the form Node's ESM loader reads a CommonJS module's exports from, so
    // `index.mjs` re-exports every class through index.js's `...require('./errors')`.
    writeln!(out, "// Every class by its kind name, base first (plain names, which the ESM loader reads).").unwrap();
    writeln!(out, "module.exports = {{").unwrap();
    for (kind, _) in l.kinds {
        writeln!(out, "  {kind},").unwrap();
    }
    writeln!(out, "}}").unwrap();
    writeln!(out, "const errorClasses = module.exports").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "/**").unwrap();
    writeln!(out, " * The core's error view (camelCased, with what crosses beside it) as its class; the message is").unwrap();
    writeln!(out, " * the view's `text` (the core's message without the kind name).").unwrap();
    writeln!(out, " */").unwrap();
    writeln!(out, "function errorFrom(view, cause) {{").unwrap();
    writeln!(out, "  const Cls = errorClasses[view.kind] || {base}").unwrap();
    writeln!(out, "  return new Cls(view.text, {{").unwrap();
    for s in &l.slots {
        let from = match s.source {
            Source::View(f) => format!("view.{}", camel(&f.name)),
            Source::Extra(e) => e.from.clone(),
        };
        writeln!(out, "    {}: {from},", s.name).unwrap();
    }
    writeln!(out, "    cause,").unwrap();
    writeln!(out, "  }})").unwrap();
    writeln!(out, "}}").unwrap();
    writeln!(out).unwrap();
    // Through the alias: the ESM loader's reader sees only `module.exports`, so this stays internal.
    writeln!(out, "// Not enumerable: index.js spreads this module into its exports, which hold only the classes.").unwrap();
    writeln!(out, "Object.defineProperty(errorClasses, 'errorFrom', {{ value: errorFrom }})").unwrap();
    Ok(out)
}

/// The declarations (`errors.d.ts`).
pub fn emit_dts(model: &Model, opts: &Options) -> Result<String, String> {
    let l = layout(model, &opts.errors, camel)?;
    let base = l.base();
    let mut out = String::new();
    writeln!(out, "// {}", opts.header).unwrap();
    writeln!(out).unwrap();
    let mut refs = BTreeSet::new();
    for s in &l.slots {
        if let Source::View(f) = s.source {
            refs.extend(crate::refs_of(&crate::model::Def::Alias(f.ty.clone())));
        }
    }
    if !refs.is_empty() {
        writeln!(out, "import type {{ {} }} from './types'\n", refs.into_iter().collect::<Vec<_>>().join(", ")).unwrap();
    }
    writeln!(out, "/** Fields every Harness error carries; each may be left out. */").unwrap();
    writeln!(out, "export interface {base}Fields {{").unwrap();
    for s in &l.slots {
        writeln!(out, "  {}?: {}", s.name, ts_type(s).0).unwrap();
    }
    writeln!(out, "  cause?: unknown").unwrap();
    writeln!(out, "}}").unwrap();
    writeln!(out).unwrap();
    jsdoc(&mut out, "", Some(&base_doc(&l, opts)), None);
    writeln!(out, "export declare class {base} extends Error {{").unwrap();
    writeln!(out, "  constructor(message: string, fields?: {base}Fields)").unwrap();
    writeln!(out, "  /** The error kind: the class name, e.g. `{}`. */", l.kinds.get(1).map_or(base, |k| k.0.as_str())).unwrap();
    writeln!(out, "  readonly code: string").unwrap();
    for s in &l.slots {
        jsdoc(&mut out, "  ", s.doc().map(|d| doc(&l, d)).as_deref(), None);
        let (ty, optional) = ts_type(s);
        writeln!(out, "  readonly {}{}: {ty}", s.name, if optional { "?" } else { "" }).unwrap();
    }
    writeln!(out, "}}").unwrap();
    for (kind, kdoc) in &l.kinds[1..] {
        writeln!(out).unwrap();
        jsdoc(&mut out, "", Some(&doc(&l, kdoc)), None);
        writeln!(out, "export declare class {kind} extends {base} {{}}").unwrap();
    }
    Ok(out)
}
