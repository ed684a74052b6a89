//! Python: one exception class per kind under the base kind's class, each with its docstring;
//! the context fields as attributes set by keyword-only arguments (`HarnessError(text,
//! *, message=..., service=..., ...)`: the native module builds them so), a field only one
//! kind exposes as a read-only property of that class (`TimeoutError.phase`), `kind`, and a
//! `repr` of the class name and `str()` only. Checked by `mypy --strict`.

use std::fmt::Write;

use super::{layout, pair, ErrorOptions, Layout, Ref, Slot, Source};
use crate::model::{Model, Ty};
use crate::Options;

/// The module the classes are imported from (what tracebacks show).
const PACKAGE: &str = "harness";

/// One field as the class holds it and as its constructor takes it.
struct PyField {
    attr: String,
    param: String,
    default: String,
    /// The attribute's value, from the argument.
    store: String,
}

fn one(ty: &Ty, model: &Model, opts: &ErrorOptions) -> Result<String, String> {
    Ok(match ty {
        Ty::String => "str".into(),
        Ty::Int { .. } => "int".into(),
        Ty::Number => "float".into(),
        Ty::Bool => "bool".into(),
        // A constructor takes any string where the view lists some (tests and fakes build errors).
        Ty::Literals(_) => "str".into(),
        Ty::Ref(n) if opts.pairs.contains(n) => {
            let (a, b) = pair(model, n)?;
            format!("Tuple[{}, {}]", one(&a.ty, model, opts)?, one(&b.ty, model, opts)?)
        }
        other => return Err(format!("errors (Python): a field of type {other:?} is not supported")),
    })
}

fn field(s: &Slot<'_>, model: &Model, opts: &ErrorOptions) -> Result<PyField, String> {
    let name = &s.name;
    let f = match s.source {
        Source::Extra(e) => return Ok(PyField { attr: e.ty.clone(), param: e.ty.clone(), default: e.default.clone(), store: name.clone() }),
        Source::View(f) => f,
    };
    Ok(match &f.ty {
        Ty::Nullable(t) => {
            let t = format!("Optional[{}]", one(t, model, opts)?);
            PyField { attr: t.clone(), param: t, default: "None".into(), store: name.clone() }
        }
        Ty::Array(t) => {
            let item = one(t, model, opts)?;
            let store = match &**t {
                Ty::Ref(n) if opts.pairs.contains(n) => format!("[(p[0], p[1]) for p in {name}]"),
                _ => format!("list({name})"),
            };
            PyField { attr: format!("List[{item}]"), param: format!("Sequence[{item}]"), default: "()".into(), store }
        }
        t => {
            let ty = one(t, model, opts)?;
            match s.fallback {
                Some(fb) => PyField { attr: ty.clone(), param: format!("Optional[{ty}]"), default: "None".into(), store: format!("{fb} if {name} is None else {name}") },
                None => {
                    let default = match t {
                        Ty::Int { .. } => "0",
                        Ty::Number => "0.0",
                        Ty::Bool => "False",
                        _ => "\"\"",
                    };
                    PyField { attr: ty.clone(), param: ty, default: default.into(), store: name.clone() }
                }
            }
        }
    })
}

/// A doc as Python writes it: every code span in double backticks.
fn doc(l: &Layout<'_>, text: &str) -> String {
    l.doc(text, |span, _: Ref<'_, '_>| format!("``{span}``")).replace('\n', " ").replace('\\', "\\\\").replace("\"\"\"", "'''")
}

fn docstring(out: &mut String, indent: &str, lines: &[String]) {
    writeln!(out, "{indent}\"\"\"{}", lines[0]).unwrap();
    if lines.len() == 1 {
        out.pop();
        writeln!(out, "\"\"\"").unwrap();
        return;
    }
    for l in &lines[1..] {
        if l.is_empty() {
            writeln!(out).unwrap();
        } else {
            writeln!(out, "{indent}{l}").unwrap();
        }
    }
    writeln!(out, "{indent}\"\"\"").unwrap();
}

/// The exception module (`harness/_errors.py`).
pub fn emit(model: &Model, opts: &Options) -> Result<String, String> {
    let eo = &opts.errors;
    let l = layout(model, eo, str::to_string)?;
    let fields: Vec<PyField> = l.slots.iter().map(|s| field(s, model, eo)).collect::<Result<_, _>>()?;
    let private = |s: &Slot<'_>| eo.only_on.contains_key(s.key);
    let base = l.base();
    let mut out = String::new();
    writeln!(out, "# {}", opts.header).unwrap();
    let shared: Vec<&str> = l.slots.iter().filter(|s| !private(s)).map(|s| s.name.as_str()).collect();
    writeln!(out, "\"\"\"The Harness exception tree: the same names in every Harness language, generated from the").unwrap();
    writeln!(out, "core's error kinds and its error view.").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "The native module raises these; every error carries the context a caller needs").unwrap();
    writeln!(out, "({}).", shared.join(", ")).unwrap();
    writeln!(out, "\"\"\"").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "from typing import List, Optional, Sequence, Tuple").unwrap();
    writeln!(out).unwrap();

    // The base class.
    writeln!(out, "\nclass {base}(Exception):").unwrap();
    let mut lines = vec!["Base class of every Harness error.".to_string(), String::new(), doc(&l, &l.kinds[0].1)];
    for b in &eo.base_doc {
        lines.push(String::new());
        lines.push(doc(&l, b));
    }
    lines.push(String::new());
    for s in l.slots.iter().filter(|s| !private(s)) {
        if let Some(d) = s.doc() {
            lines.push(format!("``{}``: {}", s.name, doc(&l, d)));
        }
    }
    docstring(&mut out, "    ", &lines);
    writeln!(out).unwrap();
    for (s, f) in l.slots.iter().zip(&fields).filter(|(s, _)| !private(s)) {
        writeln!(out, "    {}: {}", s.name, f.attr).unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "    def __init__(").unwrap();
    writeln!(out, "        self,").unwrap();
    writeln!(out, "        text: str = \"\",").unwrap();
    writeln!(out, "        *,").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        writeln!(out, "        {}: {} = {},", s.name, f.param, f.default).unwrap();
    }
    writeln!(out, "    ) -> None:").unwrap();
    writeln!(out, "        super().__init__(text)").unwrap();
    for (s, f) in l.slots.iter().zip(&fields) {
        let attr = if private(s) { format!("_{}", s.name) } else { s.name.clone() };
        writeln!(out, "        self.{attr} = {}", f.store).unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "    @property").unwrap();
    writeln!(out, "    def kind(self) -> str:").unwrap();
    writeln!(out, "        \"\"\"The stable error kind name, the same in every Harness language (e.g. ``{}``).\"\"\"", l.kinds.get(1).map_or(base, |k| k.0.as_str())).unwrap();
    writeln!(out, "        for cls in type(self).__mro__:").unwrap();
    writeln!(out, "            if cls.__name__ in _NAMES and cls.__module__ == \"{PACKAGE}\":").unwrap();
    writeln!(out, "                return cls.__name__").unwrap();
    writeln!(out, "        return \"{base}\"").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "    def __repr__(self) -> str:").unwrap();
    writeln!(out, "        return f\"{{type(self).__name__}}({{str(self)!r}})\"").unwrap();

    // One class per kind, with the fields only it exposes.
    for (kind, kdoc) in &l.kinds[1..] {
        writeln!(out, "\n\nclass {kind}({base}):").unwrap();
        docstring(&mut out, "    ", &[doc(&l, kdoc)]);
        for (s, f) in l.slots.iter().zip(&fields).filter(|(s, _)| eo.only_on.get(s.key) == Some(kind)) {
            writeln!(out).unwrap();
            writeln!(out, "    @property").unwrap();
            writeln!(out, "    def {}(self) -> {}:", s.name, f.attr).unwrap();
            docstring(&mut out, "        ", &[doc(&l, s.doc().unwrap_or(&s.name))]);
            writeln!(out, "        return self._{}", s.name).unwrap();
        }
    }

    writeln!(out, "\n\n# Every class above: the core's error kinds (`ERROR_NAMES` of the native module), base first.").unwrap();
    writeln!(out, "__all__: List[str] = [").unwrap();
    for (k, _) in l.kinds {
        writeln!(out, "    \"{k}\",").unwrap();
    }
    writeln!(out, "]").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "_NAMES = frozenset(__all__)").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "# Shown as ``{PACKAGE}.{}`` in tracebacks, where users import them from.", l.kinds.get(1).map_or(base, |k| k.0.as_str())).unwrap();
    writeln!(out, "for _name in __all__:").unwrap();
    writeln!(out, "    globals()[_name].__module__ = \"{PACKAGE}\"").unwrap();
    writeln!(out, "del _name").unwrap();
    Ok(out)
}
