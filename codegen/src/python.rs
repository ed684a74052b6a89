//! A Python module of types: `TypedDict`s for inputs (a config: every key optional but the
//! required ones) and for views that cross as dicts, `NamedTuple` classes for views that
//! cross as objects (`Options::classes`, each with a `_from(dict)` that builds nested
//! classes too), `Literal` aliases for string enums, `Union`s for tagged unions. Valid on
//! Python 3.9+ with no dependency beyond `typing`; checked by `mypy --strict`.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::model::{Def, Field, Model, Ty, TypeDef, Variant};
use crate::names::{doc_lines, pascal};
use crate::Options;

const KEYWORDS: [&str; 6] = ["from", "type", "class", "def", "return", "import"];

pub fn emit(model: &Model, opts: &Options) -> String {
    let mut out = String::new();
    writeln!(out, "# {}", opts.header).unwrap();
    writeln!(out, "\"\"\"Types of the config and of what the core hands back, generated from harness-core's schema.\"\"\"").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "from typing import Any, Dict, List, Literal, NamedTuple, Optional, Tuple, TypedDict, Union, cast").unwrap();
    writeln!(out).unwrap();
    let order = dependency_order(model, opts);
    for t in order {
        let ctx = Ctx { input: opts.inputs.contains(&t.name), class: opts.classes.contains(&t.name), opts, model };
        emit_type(&mut out, t, &ctx);
    }
    let mut names: Vec<String> = Vec::new();
    for t in &model.types {
        if opts.skip.contains(&t.name) {
            continue;
        }
        names.push(t.name.clone());
        if let Def::Tagged { variants, .. } = &t.def {
            names.extend(variants.iter().map(|v| variant_name(&t.name, v, opts)));
        }
    }
    if !model.views.is_empty() {
        emit_views(&mut out, model, opts);
        names.push("ClientViews".into());
    }
    writeln!(out, "\n__all__ = [").unwrap();
    for n in names {
        writeln!(out, "    \"{n}\",").unwrap();
    }
    writeln!(out, "]").unwrap();
    out
}

/// `ClientViews`: one method per view of the core, which the clients inherit; each asks
/// the core for the view by name through the client's `_view`.
fn emit_views(out: &mut String, model: &Model, opts: &Options) {
    writeln!(out, "class ClientViews:").unwrap();
    writeln!(out, "    \"\"\"The client's read-only views, each asked of the core by name (generated from its VIEWS).\"\"\"").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "    __slots__ = ()").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "    def _view(self, name: str, args: List[Optional[str]]) -> Any:").unwrap();
    writeln!(out, "        raise NotImplementedError").unwrap();
    for v in &model.views {
        let params: Vec<String> = v.args.iter().map(|(a, opt)| if *opt { format!("{a}: Optional[str] = None") } else { format!("{a}: str") }).collect();
        let one = if opts.classes.contains(&v.returns) { v.returns.clone() } else { format!("\"{}\"", v.returns) };
        let ret = if v.list { format!("List[{one}]") } else { one };
        let args: Vec<&str> = v.args.iter().map(|(a, _)| a.as_str()).collect();
        let call = format!("self._view(\"{}\", [{}])", v.name, args.join(", "));
        let value = match (opts.classes.contains(&v.returns), v.list) {
            (true, true) => format!("[{}._from(x) for x in {call}]", v.returns),
            (true, false) => format!("{}._from({call})", v.returns),
            (false, _) => format!("cast({}, {call})", if v.list { format!("\"List[{}]\"", v.returns) } else { format!("\"{}\"", v.returns) }),
        };
        writeln!(out).unwrap();
        let sig = if params.is_empty() { "self".to_string() } else { format!("self, {}", params.join(", ")) };
        writeln!(out, "    def {}({sig}) -> {ret}:", v.name).unwrap();
        writeln!(out, "        \"\"\"{}\"\"\"", v.doc.replace("\"\"\"", "'''")).unwrap();
        writeln!(out, "        return {value}").unwrap();
    }
    writeln!(out, "\n").unwrap();
}

struct Ctx<'a> {
    input: bool,
    class: bool,
    opts: &'a Options,
    model: &'a Model,
}

/// Types before the types that use them (a `TypedDict` or `NamedTuple` body is evaluated at
/// class creation); cycles, if any, keep `$defs` order.
fn dependency_order<'m>(model: &'m Model, opts: &Options) -> Vec<&'m TypeDef> {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    fn visit<'m>(model: &'m Model, t: &'m TypeDef, done: &mut BTreeSet<&'m str>, out: &mut Vec<&'m TypeDef>, opts: &Options, depth: usize) {
        if done.contains(t.name.as_str()) || opts.skip.contains(&t.name) || depth > 64 {
            return;
        }
        done.insert(&t.name);
        for r in crate::refs_of(&t.def) {
            if let Some(dep) = model.get(&r) {
                visit(model, dep, done, out, opts, depth + 1);
            }
        }
        out.push(t);
    }
    for t in &model.types {
        visit(model, t, &mut done, &mut out, opts, 0);
    }
    out
}

pub(crate) fn py(ty: &Ty) -> String {
    match ty {
        Ty::String => "str".into(),
        Ty::Int { .. } => "int".into(),
        Ty::Number => "float".into(),
        Ty::Bool => "bool".into(),
        Ty::Any => "Any".into(),
        Ty::Array(t) => format!("List[{}]", py(t)),
        Ty::Tuple(ts) => format!("Tuple[{}]", ts.iter().map(py).collect::<Vec<_>>().join(", ")),
        Ty::Map(t) => format!("Dict[str, {}]", py(t)),
        Ty::Ref(n) => format!("\"{n}\""),
        Ty::Nullable(t) => format!("Optional[{}]", py(t)),
        Ty::Literals(v) => format!("Literal[{}]", v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")),
    }
}

fn docstring(out: &mut String, indent: &str, doc: Option<&str>, fields: &[Field]) {
    let mut lines: Vec<String> = doc.map(|d| doc_lines(d).into_iter().map(str::to_string).collect()).unwrap_or_default();
    let documented: Vec<&Field> = fields.iter().filter(|f| f.doc.is_some()).collect();
    if !documented.is_empty() {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        for f in documented {
            lines.push(format!("``{}``: {}", f.name, f.doc.as_deref().unwrap_or_default().replace('\n', " ")));
        }
    }
    if lines.is_empty() {
        return;
    }
    writeln!(out, "{indent}\"\"\"{}", lines[0].replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"")).unwrap();
    for l in &lines[1..] {
        if l.is_empty() {
            writeln!(out).unwrap();
        } else {
            writeln!(out, "{indent}{}", l.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"")).unwrap();
        }
    }
    writeln!(out, "{indent}\"\"\"").unwrap();
}

fn variant_name(union: &str, v: &Variant, opts: &Options) -> String {
    let base = opts.variant_names.get(union).map(String::as_str).unwrap_or(union);
    format!("{}{}", pascal(&v.tag), base)
}

/// A `TypedDict` whose keys are all valid identifiers uses the class syntax; one with a key
/// such as `from` (a keyword) uses the functional syntax.
fn typed_dict(out: &mut String, name: &str, doc: Option<&str>, fields: &[Field], total_keys: &[(String, String)], input: bool) {
    let optional: Vec<&Field> = fields.iter().filter(|f| input && !f.required).collect();
    let required: Vec<&Field> = fields.iter().filter(|f| !(input && !f.required)).collect();
    let keyword = fields.iter().any(|f| KEYWORDS.contains(&f.name.as_str()) && f.name != "type");
    let mut req_items: Vec<(String, String)> = total_keys.to_vec();
    req_items.extend(required.iter().map(|f| (f.name.clone(), py(&f.ty))));
    let opt_items: Vec<(String, String)> = optional.iter().map(|f| (f.name.clone(), py(&f.ty))).collect();
    if keyword {
        // Functional syntax (a key such as `from` is not an identifier): no docstring of its
        // own, and no split into required and optional keys (such keys are only in views,
        // whose keys are all required).
        let dict = |items: &[(String, String)]| items.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect::<Vec<_>>().join(", ");
        let _ = doc;
        if opt_items.is_empty() {
            writeln!(out, "{name} = TypedDict(\"{name}\", {{{}}})", dict(&req_items)).unwrap();
        } else {
            let mut all = req_items.clone();
            all.extend(opt_items);
            writeln!(out, "{name} = TypedDict(\"{name}\", {{{}}}, total=False)", dict(&all)).unwrap();
        }
        writeln!(out, "\n").unwrap();
        return;
    }
    let parent = if !req_items.is_empty() && !opt_items.is_empty() {
        let base = format!("_{name}Required");
        writeln!(out, "class {base}(TypedDict):").unwrap();
        for (k, v) in &req_items {
            writeln!(out, "    {k}: {v}").unwrap();
        }
        writeln!(out, "\n").unwrap();
        Some(base)
    } else {
        None
    };
    match (&parent, opt_items.is_empty()) {
        (Some(p), _) => writeln!(out, "class {name}({p}, total=False):").unwrap(),
        (None, true) => writeln!(out, "class {name}(TypedDict):").unwrap(),
        (None, false) => writeln!(out, "class {name}(TypedDict, total=False):").unwrap(),
    }
    docstring(out, "    ", doc, fields);
    let own: &[(String, String)] = if parent.is_some() { &opt_items } else if opt_items.is_empty() { &req_items } else { &opt_items };
    if own.is_empty() && doc.is_none() {
        writeln!(out, "    pass").unwrap();
    }
    for (k, v) in own {
        writeln!(out, "    {k}: {v}").unwrap();
    }
    writeln!(out, "\n").unwrap();
}

fn emit_type(out: &mut String, t: &TypeDef, ctx: &Ctx<'_>) {
    match &t.def {
        Def::Object { fields, .. } if ctx.class => named_tuple(out, t, fields, ctx),
        Def::Object { fields, .. } => typed_dict(out, &t.name, t.doc.as_deref(), fields, &[], ctx.input),
        Def::Enum { values } => {
            let lits: Vec<String> = values.iter().map(|(v, _)| format!("\"{v}\"")).collect();
            writeln!(out, "{} = Literal[{}]", t.name, lits.join(", ")).unwrap();
            if let Some(d) = &t.doc {
                writeln!(out, "\"\"\"{}\"\"\"", d.replace('\n', " ").replace("\"\"\"", "'''")).unwrap();
            }
            writeln!(out, "\n").unwrap();
        }
        Def::Alias(ty) => {
            writeln!(out, "{} = {}", t.name, py(ty).trim_matches('"')).unwrap();
            writeln!(out, "\n").unwrap();
        }
        Def::Tagged { tag, variants } => {
            let names: Vec<String> = variants.iter().map(|v| variant_name(&t.name, v, ctx.opts)).collect();
            for (v, name) in variants.iter().zip(&names) {
                let mut fields = v.fields.clone();
                if let Some(base) = &v.base {
                    if let Some(TypeDef { def: Def::Object { fields: bf, .. }, .. }) = ctx.model.get(base) {
                        let mut all = bf.clone();
                        all.extend(fields);
                        fields = all;
                    }
                }
                let tag_key = [(tag.clone(), format!("Literal[\"{}\"]", v.tag))];
                typed_dict(out, name, v.doc.as_deref(), &fields, &tag_key, ctx.input);
            }
            writeln!(out, "{} = Union[{}]", t.name, names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")).unwrap();
            if let Some(d) = &t.doc {
                writeln!(out, "\"\"\"{}\"\"\"", d.replace('\n', " ").replace("\"\"\"", "'''")).unwrap();
            }
            writeln!(out, "\n").unwrap();
        }
    }
}

/// How to build a field's value from what crossed (a dict), for a class-typed view.
fn from_expr(ty: &Ty, v: &str, classes: &BTreeSet<String>) -> String {
    match ty {
        Ty::Ref(n) if classes.contains(n) => format!("{n}._from({v})"),
        Ty::Nullable(t) => {
            let inner = from_expr(t, v, classes);
            if inner == v {
                v.to_string()
            } else {
                format!("None if {v} is None else {inner}")
            }
        }
        Ty::Array(t) => {
            let inner = from_expr(t, "x", classes);
            if inner == "x" {
                v.to_string()
            } else {
                format!("[{inner} for x in {v}]")
            }
        }
        Ty::Tuple(ts) => format!("({},)", (0..ts.len()).map(|i| from_expr(&ts[i], &format!("{v}[{i}]"), classes)).collect::<Vec<_>>().join(", ")),
        _ => v.to_string(),
    }
}

fn named_tuple(out: &mut String, t: &TypeDef, fields: &[Field], ctx: &Ctx<'_>) {
    let extra: &[(String, String, String, String)] = ctx.opts.python_extra.get(&t.name).map(Vec::as_slice).unwrap_or(&[]);
    writeln!(out, "class {}(NamedTuple):", t.name).unwrap();
    let mut doc_fields = fields.to_vec();
    for (name, _, _, d) in extra {
        doc_fields.push(Field { name: name.clone(), ty: Ty::Any, required: false, doc: Some(d.clone()), default: None, sensitive: false });
    }
    docstring(out, "    ", t.doc.as_deref(), &doc_fields);
    writeln!(out).unwrap();
    for f in fields {
        let ty = match &f.ty {
            Ty::Tuple(_) => py(&f.ty),
            Ty::Array(inner) if matches!(**inner, Ty::Tuple(_)) => py(&f.ty),
            _ => py(&f.ty),
        };
        writeln!(out, "    {}: {}", f.name, ty).unwrap();
    }
    for (name, ty, default, _) in extra {
        writeln!(out, "    {name}: {ty} = {default}").unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "    @classmethod").unwrap();
    writeln!(out, "    def _from(cls, d: Dict[str, Any]) -> \"{}\":", t.name).unwrap();
    writeln!(out, "        \"\"\"Builds one from the dict that crossed from the core.\"\"\"").unwrap();
    let mut args: Vec<String> = fields.iter().map(|f| format!("{}={}", f.name, from_expr(&f.ty, &format!("d[\"{}\"]", f.name), &ctx.opts.classes))).collect();
    for (name, _, default, _) in extra {
        args.push(format!("{name}=d.get(\"{name}\", {default})"));
    }
    writeln!(out, "        return cls({})", args.join(", ")).unwrap();
    for m in ctx.opts.python_members.get(&t.name).map(Vec::as_slice).unwrap_or(&[]) {
        writeln!(out).unwrap();
        for line in m.lines() {
            writeln!(out, "    {line}").unwrap();
        }
    }
    if fields.iter().any(|f| f.sensitive) {
        // What a user said or a provider answered is not printed: its size only.
        let shown: Vec<String> = fields
            .iter()
            .map(|f| if f.sensitive { format!("{0}=<{{len(self.{0})}} chars>", f.name) } else { format!("{0}={{self.{0}!r}}", f.name) })
            .collect();
        writeln!(out).unwrap();
        writeln!(out, "    def __repr__(self) -> str:").unwrap();
        writeln!(out, "        return f\"{}({})\"", t.name, shown.join(", ")).unwrap();
    }
    writeln!(out, "\n").unwrap();
}

