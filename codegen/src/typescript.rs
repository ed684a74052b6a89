//! TypeScript declarations (`.d.ts`): interfaces, string-literal unions, discriminated
//! unions. Input types (a config) have optional keys; views (the camelCased outputs) have
//! every key, `null` where there is no value; the other outputs (events, records) may leave
//! out a key the schema does not require (the core skips an absent value there).

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::model::{Def, Field, Model, Ty, TypeDef, Variant};
use crate::names::{camel, doc_lines, pascal};
use crate::Options;

pub fn emit(model: &Model, opts: &Options) -> String {
    let mut out = String::new();
    writeln!(out, "// {}", opts.header).unwrap();
    writeln!(out).unwrap();
    for t in &model.types {
        if opts.skip.contains(&t.name) {
            continue;
        }
        let ctx = Ctx { input: opts.inputs.contains(&t.name), camel: opts.camel.contains(&t.name), opts };
        emit_type(&mut out, t, &ctx);
        writeln!(out).unwrap();
    }
    if !model.views.is_empty() {
        // One method per view of the core; the client asks the core for it by name.
        writeln!(out, "/** The client's read-only views, each asked of the core by name (generated from its VIEWS). */").unwrap();
        writeln!(out, "export interface ClientViews {{").unwrap();
        for v in &model.views {
            let params: Vec<String> = v.args.iter().map(|(a, opt)| format!("{}{}: string", camel(a), if *opt { "?" } else { "" })).collect();
            writeln!(out, "  /** {} */", v.doc.replace("*/", "*\\/")).unwrap();
            writeln!(out, "  {}({}): {}{}", camel(&v.name), params.join(", "), v.returns, if v.list { "[]" } else { "" }).unwrap();
        }
        writeln!(out, "}}").unwrap();
    }
    out
}

struct Ctx<'a> {
    input: bool,
    camel: bool,
    opts: &'a Options,
}

pub(crate) fn doc(out: &mut String, indent: &str, doc: Option<&str>, default: Option<&serde_json::Value>) {
    let mut lines: Vec<String> = doc.map(|d| doc_lines(d).into_iter().map(str::to_string).collect()).unwrap_or_default();
    if let Some(d) = default.filter(|d| !d.is_null() && !(d.is_object() && d.as_object().is_some_and(|o| !o.is_empty()))) {
        lines.push(format!("Default: `{d}`."));
    }
    if lines.is_empty() {
        return;
    }
    if lines.len() == 1 {
        writeln!(out, "{indent}/** {} */", lines[0].replace("*/", "*\\/")).unwrap();
        return;
    }
    writeln!(out, "{indent}/**").unwrap();
    for l in lines {
        writeln!(out, "{indent} * {}", l.replace("*/", "*\\/")).unwrap();
    }
    writeln!(out, "{indent} */").unwrap();
}

pub(crate) fn ts(ty: &Ty) -> String {
    match ty {
        Ty::String => "string".into(),
        Ty::Int { .. } | Ty::Number => "number".into(),
        Ty::Bool => "boolean".into(),
        Ty::Any => "unknown".into(),
        Ty::Array(t) => match **t {
            Ty::Nullable(_) | Ty::Literals(_) => format!("Array<{}>", ts(t)),
            _ => format!("{}[]", ts(t)),
        },
        Ty::Tuple(ts_) => format!("[{}]", ts_.iter().map(ts).collect::<Vec<_>>().join(", ")),
        Ty::Map(t) => format!("Record<string, {}>", ts(t)),
        Ty::Ref(name) => name.clone(),
        Ty::Nullable(t) => format!("{} | null", ts(t)),
        Ty::Literals(v) => v.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(" | "),
    }
}

fn field_name(f: &Field, ctx: &Ctx<'_>) -> String {
    let name = if ctx.camel { camel(&f.name) } else { f.name.clone() };
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with(|c: char| c.is_ascii_digit()) {
        name
    } else {
        format!("'{name}'")
    }
}

fn fields(out: &mut String, fields: &[Field], ctx: &Ctx<'_>) {
    for f in fields {
        doc(out, "  ", f.doc.as_deref(), if ctx.input { f.default.as_ref() } else { None });
        let optional = !f.required && (ctx.input || !ctx.camel);
        writeln!(out, "  {}{}: {}", field_name(f, ctx), if optional { "?" } else { "" }, ts(&f.ty)).unwrap();
    }
}

fn variant_name(union: &str, v: &Variant, opts: &Options) -> String {
    let base = opts.variant_names.get(union).map(String::as_str).unwrap_or(union);
    format!("{}{}", pascal(&v.tag), base)
}

fn emit_type(out: &mut String, t: &TypeDef, ctx: &Ctx<'_>) {
    match &t.def {
        Def::Object { fields: fs, .. } => {
            doc(out, "", t.doc.as_deref(), None);
            writeln!(out, "export interface {} {{", t.name).unwrap();
            fields(out, fs, ctx);
            writeln!(out, "}}").unwrap();
        }
        Def::Enum { values } => {
            let mut d = t.doc.clone().unwrap_or_default();
            for (v, vd) in values {
                if let Some(vd) = vd {
                    if !d.is_empty() {
                        d.push('\n');
                    }
                    d.push_str(&format!("- `{v}`: {vd}"));
                }
            }
            doc(out, "", (!d.is_empty()).then_some(d.as_str()), None);
            let union: Vec<String> = values.iter().map(|(v, _)| format!("'{v}'")).collect();
            writeln!(out, "export type {} = {}", t.name, union.join(" | ")).unwrap();
        }
        Def::Alias(ty) => {
            doc(out, "", t.doc.as_deref(), None);
            writeln!(out, "export type {} = {}", t.name, ts(ty)).unwrap();
        }
        Def::Tagged { tag, variants } => {
            doc(out, "", t.doc.as_deref(), None);
            let names: Vec<String> = variants.iter().map(|v| variant_name(&t.name, v, ctx.opts)).collect();
            writeln!(out, "export type {} =\n{}", t.name, names.iter().map(|n| format!("  | {n}")).collect::<Vec<_>>().join("\n")).unwrap();
            for (v, name) in variants.iter().zip(&names) {
                writeln!(out).unwrap();
                doc(out, "", v.doc.as_deref(), None);
                match &v.base {
                    Some(base) => writeln!(out, "export interface {name} extends {base} {{").unwrap(),
                    None => writeln!(out, "export interface {name} {{").unwrap(),
                }
                writeln!(out, "  {tag}: '{}'", v.tag).unwrap();
                fields(out, &v.fields, ctx);
                writeln!(out, "}}").unwrap();
            }
        }
    }
}

/// The names of every type reachable from `roots`.
pub fn reachable(model: &Model, roots: &[&str]) -> BTreeSet<String> {
    crate::reachable(model, roots)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{Model, Options};

    #[test]
    fn a_record_may_leave_out_a_key_a_view_may_not() {
        let schema = json!({"$defs": {
            "Record": {"type": "object", "properties": {
                "ts_ms": {"type": "integer"},
                "route": {"type": ["string", "null"]}
            }, "required": ["ts_ms"]},
            "View": {"type": "object", "properties": {
                "finish_reason": {"type": ["string", "null"]}
            }}
        }});
        let model = Model::read(&schema).unwrap();
        let out = super::emit(&model, &Options { camel: ["View".to_string()].into(), ..Default::default() });
        assert!(out.contains("export interface Record {\n  ts_ms: number\n  route?: string | null\n}"), "{out}");
        assert!(out.contains("export interface View {\n  finishReason: string | null\n}"), "{out}");
    }
}
