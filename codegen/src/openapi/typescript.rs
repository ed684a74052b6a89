//! A Node package per service: `index.d.ts` (an interface per object schema, string-literal
//! and discriminated unions, a typed error class per declared error response, and a client
//! class with one method per operation), `index.js` (CommonJS: the readers that check an answer
//! against the document and the client class), `index.mjs` and `index.d.mts` (ESM: the same
//! module instance re-exported, so `instanceof` agrees between `import` and `require`) and
//! `package.json`. Plain JavaScript beside its declarations: nothing to compile. What the
//! packages share (reading, the lossless JSON parse, writing, the call path) is written once,
//! in harness-sdk (`harness-sdk/openapi`).
//!
//! Choices: `int64` (and an `integer` without a format, which has no bound) is `bigint`,
//! read without rounding: JSON.parse rounds integers past 2^53, so an answer with such an
//! integer is read by harness-sdk's own parser from the raw body text; `int32` is `number`.
//! A `date-time` is a `Date` (JavaScript keeps milliseconds), a `date` and a `uuid` are
//! checked strings, `byte` is a `Uint8Array`. Properties keep their names on the wire; a
//! method's parameters are one object with camelCase keys (the body is `body`), and a second
//! argument takes the `AbortSignal` and the timeout. A schema with `readOnly` or `writeOnly`
//! properties is two interfaces, `Name` and `NameInput`, as in Python. Each call's `endpoint`
//! label is the operation's `operationId`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::path::PathBuf;

use serde_json::Value;

use crate::names::{camel, pascal};
use harness_openapi::model::{Api, Content, Def, In, Operation, Param, Prop, Status, Style, Ty};
use super::common::{self, error_responses, holds, http_reason, keeps, Mode};

/// How a package is written.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Harness service the client calls (the config's `services.NAME`).
    pub service: String,
    /// The package's (directory's) name.
    pub package: String,
    /// The spec's file name, for the header.
    pub source: String,
}

/// The version of `harness-sdk/openapi` (its `CONTRACT`) the generated code calls.
const CONTRACT: u32 = 1;

/// Names a type or class may not take: the globals the declarations use or users expect,
/// and the namespace the declarations import harness-sdk as.
const TYPE_RESERVED: [&str; 34] = [
    "Array",
    "ReadonlyArray",
    "Record",
    "Promise",
    "PromiseLike",
    "Date",
    "Uint8Array",
    "ArrayBuffer",
    "Buffer",
    "Error",
    "Object",
    "String",
    "Number",
    "Boolean",
    "Symbol",
    "BigInt",
    "Function",
    "Map",
    "Set",
    "JSON",
    "Math",
    "Partial",
    "Required",
    "Readonly",
    "Pick",
    "Omit",
    "Exclude",
    "Extract",
    "NonNullable",
    "AbortSignal",
    "Response",
    "Request",
    "Headers",
    "harness",
];

/// The package's files, relative to the output directory (`PACKAGE/...`).
pub fn emit(api: &Api, opts: &Options) -> Vec<(PathBuf, String)> {
    let ts = Ts::new(api, opts);
    let dir = PathBuf::from(&opts.package);
    vec![
        (dir.join("index.d.mts"), ts.esm_types()),
        (dir.join("index.d.ts"), ts.declarations()),
        (dir.join("index.js"), ts.javascript()),
        (dir.join("index.mjs"), ts.esm()),
        (dir.join("package.json"), ts.package_json()),
    ]
}

/// A package name npm accepts (and a directory name): lower-case letters, digits, `-`, `_`, `.`.
pub fn check_package(p: &str) -> Result<(), String> {
    let ok = p.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && p.len() <= 214
        && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("--package `{p}`: not an npm package name (lower-case letters, digits, `-`, `_`, `.`)"))
    }
}

/// One typed error class: a status key and the body's type.
struct ErrorClass {
    name: String,
    status: Status,
    content: Content,
}

/// How a property is read and declared.
enum Field {
    Required,
    /// Absent reads as the one tag value that selects this union member.
    Tagged(String),
    /// Absent (or null) reads as this JavaScript value.
    Defaulted(String),
    Optional,
}

struct Ts<'a> {
    api: &'a Api,
    opts: &'a Options,
    /// Whether a type has a request form and a response form.
    split: Vec<bool>,
    names: HashMap<(usize, Mode), String>,
    /// The types written, in order.
    written: Vec<(usize, Mode)>,
    /// A union member's tag property and the one value that selects it.
    tag_defaults: HashMap<usize, (String, String)>,
    errors: Vec<ErrorClass>,
    /// Each operation's method name.
    methods: Vec<String>,
    client: String,
}

impl<'a> Ts<'a> {
    fn new(api: &'a Api, opts: &'a Options) -> Ts<'a> {
        let n = api.types.len();
        let mut split: Vec<bool> =
            api.types.iter().map(|t| matches!(&t.def, Def::Object { props, .. } if props.iter().any(|p| p.read_only || p.write_only))).collect();
        loop {
            let mut changed = false;
            for i in 0..n {
                if split[i] {
                    continue;
                }
                let mut refs = Vec::new();
                harness_openapi::model::def_refs(&api.types[i].def, &mut refs);
                if refs.iter().any(|r| split[*r]) {
                    split[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut ts = Ts {
            api,
            opts,
            split,
            names: HashMap::new(),
            written: Vec::new(),
            tag_defaults: HashMap::new(),
            errors: Vec::new(),
            methods: Vec::new(),
            client: format!("{}Client", harness_openapi::schema::type_name(&opts.service)),
        };
        ts.reach();
        ts.name_types();
        ts.tags();
        ts.name_errors();
        ts.name_methods();
        ts
    }

    fn mode(&self, i: usize, m: Mode) -> Mode {
        if self.split[i] {
            m
        } else {
            Mode::Out
        }
    }

    /// The types the operations use, each in the forms they use it, in `types` order.
    fn reach(&mut self) {
        let mut todo: Vec<(usize, Mode)> = Vec::new();
        for op in &self.api.operations {
            let mut refs = Vec::new();
            op.params.iter().for_each(|p| p.ty.refs(&mut refs));
            if let Some(b) = &op.body {
                b.ty.refs(&mut refs);
            }
            todo.extend(refs.into_iter().map(|i| (i, Mode::In)));
            let mut refs = Vec::new();
            for r in &op.responses {
                if let Content::Json(t) = &r.content {
                    t.refs(&mut refs);
                }
            }
            todo.extend(refs.into_iter().map(|i| (i, Mode::Out)));
        }
        let mut seen = BTreeSet::new();
        while let Some((i, m)) = todo.pop() {
            let m = self.mode(i, m);
            if !seen.insert((i, m)) {
                continue;
            }
            let mut refs = Vec::new();
            match &self.api.types[i].def {
                Def::Object { props, additional } => {
                    props.iter().filter(|p| keeps(p, m)).for_each(|p| p.ty.refs(&mut refs));
                    if let Some(a) = additional {
                        a.refs(&mut refs);
                    }
                }
                def => harness_openapi::model::def_refs(def, &mut refs),
            }
            todo.extend(refs.into_iter().map(|r| (r, m)));
        }
        self.written = seen.into_iter().collect();
    }

    fn name_types(&mut self) {
        let mut taken: BTreeSet<String> = TYPE_RESERVED.iter().map(|s| s.to_string()).collect();
        taken.insert(self.client.clone());
        let mut unique = |wanted: String| {
            let base = if TYPE_RESERVED.contains(&wanted.as_str()) { format!("{wanted}_") } else { wanted };
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{base}{n}");
                n += 1;
            }
            name
        };
        for (i, m) in self.written.clone() {
            if m == Mode::Out {
                let name = unique(self.api.types[i].name.clone());
                self.names.insert((i, m), name);
            }
        }
        for (i, m) in self.written.clone() {
            if m == Mode::In {
                let name = unique(format!("{}Input", self.api.types[i].name));
                self.names.insert((i, m), name);
            }
        }
    }


    /// A union's member selected by exactly one tag value gets that value.
    fn tags(&mut self) {
        self.tag_defaults = common::tag_defaults(self.api, holds);
    }

    fn name_errors(&mut self) {
        let mut taken: BTreeSet<String> = self.names.values().cloned().collect();
        taken.extend(TYPE_RESERVED.iter().map(|s| s.to_string()));
        taken.insert(self.client.clone());
        // One class per (status, body type); the body most operations declare has the plain name.
        let mut by_status: BTreeMap<Status, Vec<(Content, usize)>> = BTreeMap::new();
        for op in &self.api.operations {
            for r in error_responses(op) {
                let list = by_status.entry(r.status).or_default();
                match list.iter_mut().find(|(c, _)| *c == r.content) {
                    Some((_, n)) => *n += 1,
                    None => list.push((r.content.clone(), 1)),
                }
            }
        }
        for (status, mut contents) in by_status {
            let base = match status {
                Status::Code(c) => reason(c).map(str::to_string).unwrap_or_else(|| format!("Status{c}")),
                Status::Range(d) => format!("Status{d}XX"),
                Status::Default => "Default".into(),
            };
            contents.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
            for (k, (content, _)) in contents.into_iter().enumerate() {
                let qualifier = match (&content, k) {
                    (_, 0) => String::new(),
                    (Content::Json(Ty::Named(i)), _) => {
                        let n = &self.api.types[*i].name;
                        n.strip_suffix("Error").filter(|s| !s.is_empty()).unwrap_or(n).to_string()
                    }
                    (_, _) => format!("{}", k + 1),
                };
                let wanted = format!("{base}{qualifier}Error");
                let mut name = wanted.clone();
                let mut n = 2;
                while !taken.insert(name.clone()) {
                    name = format!("{wanted}{n}");
                    n += 1;
                }
                self.errors.push(ErrorClass { name, status, content });
            }
        }
    }

    fn error_class(&self, status: Status, content: &Content) -> &ErrorClass {
        self.errors.iter().find(|e| e.status == status && e.content == *content).expect("every error response has a class")
    }

    fn name_methods(&mut self) {
        let mut taken = BTreeSet::new();
        for op in &self.api.operations {
            let mut wanted = lower_camel(&op.id, "op");
            if wanted == "constructor" {
                wanted.push('_');
            }
            let mut name = wanted.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{wanted}{n}");
                n += 1;
            }
            self.methods.push(name);
        }
    }

    fn header(&self) -> String {
        let api = self.api;
        format!(
            "// Generated by `harness codegen` from {} ({} {}, OpenAPI {}); do not edit. To regenerate: harness codegen --spec {} --lang typescript --service {} --package {}",
            one_line(&self.opts.source),
            one_line(&api.title),
            one_line(&api.api_version),
            one_line(&api.version),
            one_line(&self.opts.source),
            one_line(&self.opts.service),
            self.opts.package
        )
    }

    fn name(&self, i: usize, m: Mode) -> &str {
        &self.names[&(i, self.mode(i, m))]
    }

    /// A type as TypeScript writes it; `param` writes arrays as `ReadonlyArray` (what a caller passes).
    fn ty(&self, t: &Ty, m: Mode, param: bool) -> String {
        match t {
            Ty::String | Ty::Date | Ty::Uuid => "string".into(),
            Ty::Int { wide: false } | Ty::Number => "number".into(),
            Ty::Int { wide: true } => "bigint".into(),
            Ty::Bool => "boolean".into(),
            Ty::DateTime => "Date".into(),
            Ty::Bytes => "Uint8Array".into(),
            Ty::Any => "unknown".into(),
            Ty::Array(t) if param => format!("ReadonlyArray<{}>", self.ty(t, m, false)),
            Ty::Array(t) => format!("Array<{}>", self.ty(t, m, false)),
            Ty::Map(t) => format!("Record<string, {}>", self.ty(t, m, false)),
            Ty::Named(i) => self.name(*i, m).to_string(),
            Ty::Nullable(t) => format!("{} | null", self.ty(t, m, param)),
            Ty::Literals(vs) => vs.iter().map(js_value).collect::<Vec<_>>().join(" | "),
            Ty::Union(ts) => {
                let mut shown: Vec<String> = Vec::new();
                for t in ts {
                    let s = self.ty(t, m, param);
                    if !shown.contains(&s) {
                        shown.push(s);
                    }
                }
                shown.join(" | ")
            }
        }
    }

    /// The reader of a JSON value as `t` (responses only: the `Out` forms).
    fn read(&self, t: &Ty) -> String {
        match t {
            Ty::String => "rt.string".into(),
            Ty::Int { wide: false } => "rt.integer".into(),
            Ty::Int { wide: true } => "rt.int64".into(),
            Ty::Number => "rt.number".into(),
            Ty::Bool => "rt.boolean".into(),
            Ty::DateTime => "rt.dateTime".into(),
            Ty::Date => "rt.date".into(),
            Ty::Uuid => "rt.uuid".into(),
            Ty::Bytes => "rt.bytes".into(),
            Ty::Any => "rt.any".into(),
            Ty::Array(t) => format!("rt.arrayOf({})", self.read(t)),
            Ty::Map(t) => format!("rt.mapOf({})", self.read(t)),
            Ty::Nullable(t) => format!("rt.nullable({})", self.read(t)),
            Ty::Named(i) => format!("${}", self.name(*i, Mode::Out)),
            Ty::Literals(vs) => format!("rt.literal([{}])", vs.iter().map(js_value).collect::<Vec<_>>().join(", ")),
            Ty::Union(ts) => {
                let shown: Vec<String> = ts.iter().map(|t| self.ty(t, Mode::Out, false)).collect();
                format!("rt.oneOf([{}], {})", ts.iter().map(|t| self.read(t)).collect::<Vec<_>>().join(", "), js_str(&shown.join(" or ")))
            }
        }
    }

    /// The properties of an object type in one form, each with how it is read and declared.
    fn fields(&self, i: usize, m: Mode, props: &[Prop]) -> Vec<(Prop, Field)> {
        let mut out: Vec<(Prop, Field)> = Vec::new();
        let tag = self.tag_defaults.get(&i);
        for p in props.iter().filter(|p| keeps(p, m)) {
            let mut p = p.clone();
            if let Some((prop, value)) = tag {
                if *prop == p.name {
                    p.ty = Ty::Literals(vec![Value::String(value.clone())]);
                    out.push((p, Field::Tagged(value.clone())));
                    continue;
                }
            }
            let field = match self.default(&p) {
                Some(d) => Field::Defaulted(d),
                None if p.required => Field::Required,
                None => Field::Optional,
            };
            out.push((p, field));
        }
        if let Some((prop, value)) = tag {
            if !out.iter().any(|(p, _)| p.name == *prop) {
                let p = Prop {
                    name: prop.clone(),
                    ty: Ty::Literals(vec![Value::String(value.clone())]),
                    required: true,
                    doc: Some("The union's tag.".into()),
                    default: None,
                    read_only: false,
                    write_only: false,
                    deprecated: false,
                };
                out.push((p, Field::Tagged(value.clone())));
            }
        }
        out
    }

    /// A property's default as JavaScript, when its type holds it.
    fn default(&self, p: &Prop) -> Option<String> {
        let d = p.default.as_ref()?;
        if d.is_null() || !holds(self.api, &p.ty, d) {
            return None;
        }
        match d {
            Value::Number(n) if wide(self.api, &p.ty) => Some(format!("{n}n")),
            _ => Some(js_value(d)),
        }
    }

    // ---- index.d.ts ----

    fn declarations(&self) -> String {
        let api = self.api;
        let mut out = String::new();
        writeln!(out, "{}", self.header()).unwrap();
        let mut doc = format!(
            "Typed client of the `{}` service, generated from {} ({}{}, OpenAPI {}).\n\n`new {}(client)` calls it through a harness-sdk `Client`; the models are interfaces, each declared error response a class.",
            self.opts.service,
            self.opts.source,
            one_line(&api.title),
            if api.api_version.is_empty() { String::new() } else { format!(" {}", one_line(&api.api_version)) },
            api.version,
            self.client,
        );
        doc.push_str(
            "\n\nTypes: `int64` (and `integer` without a format) is `bigint`, read without rounding (from the raw body text, never through a lossy `number`); `int32` is `number`; `date-time` is a `Date`; `date` and `uuid` are checked strings; `byte` is a `Uint8Array`. Properties keep their names on the wire.",
        );
        write!(doc, "\n\nOperations: {} generated, {} refused.", api.operations.len(), api.refused.len()).unwrap();
        if !api.refused.is_empty() {
            doc.push_str(" Refused (not generated):\n");
            for r in &api.refused {
                let id = r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
                write!(doc, "\n- {} {}{id}: {}", r.method, r.path, r.reason).unwrap();
            }
        }
        comment(&mut out, "", &doc);
        writeln!(out).unwrap();
        writeln!(out, "import * as harness from 'harness-sdk'").unwrap();
        writeln!(out, "import type {{ OperationOptions as $OperationOptions }} from 'harness-sdk/openapi'").unwrap();
        for &(i, m) in &self.written {
            writeln!(out).unwrap();
            self.declare_type(&mut out, i, m);
        }
        for e in &self.errors {
            writeln!(out).unwrap();
            comment(&mut out, "", &self.error_doc(e));
            writeln!(out, "export declare class {} extends harness.{} {{", e.name, error_base(e.status)).unwrap();
            if let Content::Json(t) = &e.content {
                writeln!(out, "  /** The body, read as the document declares it. */").unwrap();
                writeln!(out, "  readonly model: {}", self.ty(t, Mode::Out, false)).unwrap();
            }
            writeln!(out, "}}").unwrap();
        }
        writeln!(out).unwrap();
        writeln!(out, "/**").unwrap();
        writeln!(out, " * Readers of each type as responses carry it, for JSON that arrives another way (a webhook, a queue):").unwrap();
        writeln!(out, " * `read.Order(value)` checks `value` against the document and throws harness-sdk's `SchemaError`").unwrap();
        writeln!(out, " * naming the JSON pointer of the first difference. Parse the text with `parse` from").unwrap();
        writeln!(out, " * `harness-sdk/openapi` to keep `int64` values exact.").unwrap();
        writeln!(out, " */").unwrap();
        writeln!(out, "export declare const read: {{").unwrap();
        for &(i, m) in &self.written {
            if m == Mode::Out {
                let name = self.name(i, m);
                writeln!(out, "  readonly {name}: (value: unknown) => {name}").unwrap();
            }
        }
        writeln!(out, "}}").unwrap();
        writeln!(out).unwrap();
        let mut doc = format!("The `{}` service ({}", self.opts.service, one_line(&api.title));
        if !api.api_version.is_empty() {
            write!(doc, " {}", one_line(&api.api_version)).unwrap();
        }
        doc.push_str(") through a harness-sdk `Client`: its retries, breakers, limits and metrics apply per operation.");
        if let Some(d) = &api.doc {
            doc = format!("{doc}\n\n{d}");
        }
        comment(&mut out, "", &doc);
        writeln!(out, "export declare class {} {{", self.client).unwrap();
        writeln!(out, "  /** Calls go through `client`, to the config's `services.<service>` (default {}). */", js_str(&self.opts.service)).unwrap();
        writeln!(out, "  constructor(client: harness.Client, service?: string)").unwrap();
        for (k, op) in api.operations.iter().enumerate() {
            let sig = self.sig(op);
            writeln!(out).unwrap();
            comment(&mut out, "  ", &self.method_doc(op, &sig));
            let name = &self.methods[k];
            if sig.args.is_empty() {
                writeln!(out, "  {name}(options?: $OperationOptions): Promise<{}>", sig.ret).unwrap();
                continue;
            }
            let optional = if sig.args.iter().any(|a| a.required) { "" } else { "?" };
            writeln!(out, "  {name}(").unwrap();
            writeln!(out, "    params{optional}: {{").unwrap();
            for a in &sig.args {
                if let Some(d) = &a.doc {
                    comment(&mut out, "      ", d);
                }
                writeln!(out, "      {}{}: {}", a.name, if a.required { "" } else { "?" }, a.ty).unwrap();
            }
            writeln!(out, "    }},").unwrap();
            writeln!(out, "    options?: $OperationOptions,").unwrap();
            writeln!(out, "  ): Promise<{}>", sig.ret).unwrap();
        }
        writeln!(out, "}}").unwrap();
        out
    }

    fn declare_type(&self, out: &mut String, i: usize, m: Mode) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        let mut doc = t.doc.clone().unwrap_or_else(|| format!("`{}` (at `{}`).", t.name, t.pointer));
        if self.split[i] {
            let form = match m {
                Mode::Out => "As a response carries it (without write-only properties); requests send ",
                Mode::In => "As a request sends it (without read-only properties); responses carry ",
            };
            // The other form, when an operation uses it.
            if let Some(other) = self.names.get(&(i, if m == Mode::Out { Mode::In } else { Mode::Out })) {
                doc = format!("{doc}\n\n{form}`{other}`.");
            }
        }
        comment(out, "", &doc);
        match &t.def {
            Def::Object { props, additional } => {
                writeln!(out, "export interface {name} {{").unwrap();
                let fields = self.fields(i, m, props);
                let mut index: Vec<String> = Vec::new();
                for (p, f) in &fields {
                    let mut d = p.doc.clone().unwrap_or_default();
                    if p.deprecated {
                        d = format!("@deprecated {d}");
                    }
                    if p.read_only {
                        d.push_str(" (read-only)");
                    }
                    if p.write_only {
                        d.push_str(" (write-only)");
                    }
                    if let Field::Defaulted(v) = f {
                        write!(d, " (default {v})").unwrap();
                    }
                    let d = d.trim();
                    if !d.is_empty() {
                        comment(out, "  ", d);
                    }
                    let optional = matches!(f, Field::Defaulted(_) | Field::Optional);
                    let ty = self.ty(&p.ty, m, false);
                    writeln!(out, "  {}{}: {ty}", prop_key(&p.name), if optional { "?" } else { "" }).unwrap();
                    if !index.contains(&ty) {
                        index.push(ty);
                    }
                    if optional && !index.contains(&"undefined".to_string()) {
                        index.push("undefined".into());
                    }
                }
                if let Some(a) = additional {
                    let a = self.ty(a, m, false);
                    let all = if fields.is_empty() || a == "unknown" {
                        a
                    } else {
                        let mut all = vec![a];
                        for t in index {
                            if !all.contains(&t) {
                                all.push(t);
                            }
                        }
                        all.join(" | ")
                    };
                    writeln!(out, "  /** The keys beside the declared ones. */").unwrap();
                    writeln!(out, "  [key: string]: {all}").unwrap();
                }
                writeln!(out, "}}").unwrap();
            }
            Def::Union { members, .. } => {
                let mut shown: Vec<String> = Vec::new();
                for t in members {
                    let s = self.ty(t, m, false);
                    if !shown.contains(&s) {
                        shown.push(s);
                    }
                }
                writeln!(out, "export type {name} = {}", shown.join(" | ")).unwrap();
            }
            Def::Alias(ty) => writeln!(out, "export type {name} = {}", self.ty(ty, m, false)).unwrap(),
        }
    }

    fn error_doc(&self, e: &ErrorClass) -> String {
        let what = match e.status {
            Status::Code(c) => format!("The service answered {c}{}", http_reason(c).map(|r| format!(" {r}")).unwrap_or_default()),
            Status::Range(d) => format!("The service answered {d}XX"),
            Status::Default => "The service answered an error status its operation does not list (its `default` response)".into(),
        };
        let body = match &e.content {
            Content::Json(_) => "; `model` is its body".to_string(),
            Content::Other(media) => format!(" (`body` holds its {media} body)"),
            Content::None => String::new(),
        };
        format!(
            "{what}{body}. A harness-sdk `{}` (its `code`, the error kind, stays `{}`) with the context Harness gives every error; a body that does not read as the declared type leaves Harness's own error as it was.",
            error_base(e.status),
            error_base(e.status)
        )
    }

    fn method_doc(&self, op: &Operation, sig: &Sig) -> String {
        let mut doc = String::new();
        match (&op.summary, &op.doc) {
            (Some(s), Some(d)) => write!(doc, "{s}\n\n{d}").unwrap(),
            (Some(s), None) => doc.push_str(s),
            (None, Some(d)) => doc.push_str(d),
            (None, None) => {}
        }
        if !doc.is_empty() {
            doc.push_str("\n\n");
        }
        write!(doc, "`{} {}` (endpoint `{}`).", op.method, op.path, op.id).unwrap();
        if !sig.raises.is_empty() {
            let list: Vec<String> = sig.raises.iter().map(|(n, s)| format!("`{n}` ({})", s.key())).collect();
            write!(doc, " Rejects with {}.", list.join(", ")).unwrap();
        }
        if op.deprecated {
            doc.push_str("\n\n@deprecated");
        }
        doc
    }

    fn sig(&self, op: &Operation) -> Sig {
        let mut taken: Vec<String> = Vec::new();
        let mut args = Vec::new();
        if let Some(b) = &op.body {
            taken.push("body".into());
            args.push(Arg { name: "body".into(), ty: self.ty(&b.ty, Mode::In, true), required: b.required, doc: b.doc.clone(), what: What::Body });
        }
        let mut params: Vec<&Param> = op.params.iter().collect();
        params.sort_by_key(|p| {
            (
                !p.required,
                match p.location {
                    In::Path => 0,
                    In::Query => 2,
                    In::Header => 3,
                },
            )
        });
        for p in params {
            let wanted = if p.idempotency_key { "idempotencyKey".to_string() } else { lower_camel(&p.name, "p") };
            let mut name = wanted.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{wanted}{n}");
                n += 1;
            }
            taken.push(name.clone());
            let mut doc = p.doc.clone();
            if p.deprecated {
                doc = Some(format!("@deprecated {}", doc.unwrap_or_default()).trim().to_string());
            }
            let ty = self.ty(&p.ty, Mode::In, true);
            args.push(Arg { name, ty, required: p.required, doc, what: What::Param(p.clone()) });
        }
        args.sort_by_key(|a| !a.required);
        let mut successes: Vec<(Status, &Content)> = op.responses.iter().filter(|r| r.status.success()).map(|r| (r.status, &r.content)).collect();
        if successes.is_empty() {
            if let Some(d) = op.responses.iter().find(|r| r.status == Status::Default) {
                successes.push((Status::Default, &d.content));
            }
        }
        let mut returns: Vec<String> = Vec::new();
        let mut has_none = false;
        for (_, c) in &successes {
            let s = match c {
                Content::None => {
                    has_none = true;
                    continue;
                }
                Content::Json(t) => self.ty(t, Mode::Out, false),
                Content::Other(_) => "Uint8Array".into(),
            };
            if !returns.contains(&s) {
                returns.push(s);
            }
        }
        let ret = match (returns.is_empty(), has_none) {
            (true, _) => "void".to_string(),
            (false, false) => returns.join(" | "),
            (false, true) if returns.iter().any(|r| r == "unknown") => "unknown".into(),
            (false, true) => format!("{} | undefined", returns.join(" | ")),
        };
        let default_is_success = successes.iter().any(|(s, _)| *s == Status::Default);
        let raises: Vec<(String, Status)> = error_responses(op)
            .filter(|r| !(default_is_success && r.status == Status::Default))
            .map(|r| (self.error_class(r.status, &r.content).name.clone(), r.status))
            .collect();
        Sig { args, ret, successes: successes.into_iter().map(|(s, c)| (s, c.clone())).collect(), raises }
    }

    // ---- index.js ----

    fn javascript(&self) -> String {
        let api = self.api;
        let mut out = String::new();
        writeln!(out, "{}", self.header()).unwrap();
        writeln!(out, "'use strict'").unwrap();
        comment(
            &mut out,
            "",
            &format!(
                "The `{}` service's typed client (declared in index.d.ts): readers that check each answer against the document (harness-sdk's `SchemaError` names the JSON pointer of the first value that differs), the typed errors, and `{}`.",
                self.opts.service, self.client
            ),
        );
        writeln!(out).unwrap();
        writeln!(out, "const sdk = require('harness-sdk')").unwrap();
        writeln!(out, "const rt = require('harness-sdk/openapi')").unwrap();
        writeln!(out, "if (rt.CONTRACT !== {CONTRACT}) {{").unwrap();
        writeln!(
            out,
            "  throw new Error(`{}: generated for harness-sdk/openapi contract {CONTRACT}, the installed harness-sdk has ${{rt.CONTRACT}}: regenerate it (harness codegen) or install the harness-sdk it was made with`)",
            self.opts.package
        )
        .unwrap();
        writeln!(out, "}}").unwrap();
        for e in &self.errors {
            writeln!(out).unwrap();
            comment(&mut out, "", &self.error_doc(e));
            writeln!(out, "class {} extends sdk.{} {{}}", e.name, error_base(e.status)).unwrap();
        }
        // The readers: one function per type in its response form, hoisted (types refer to each other).
        for &(i, m) in &self.written {
            if m == Mode::Out {
                writeln!(out).unwrap();
                self.reader(&mut out, i);
            }
        }
        let sigs: Vec<Sig> = api.operations.iter().map(|op| self.sig(op)).collect();
        for (k, op) in api.operations.iter().enumerate() {
            writeln!(out).unwrap();
            self.answer_reader(&mut out, op, &sigs[k], &self.methods[k]);
        }
        writeln!(out).unwrap();
        writeln!(out, "class {} extends rt.Service {{", self.client).unwrap();
        writeln!(out, "  constructor(client, service = {}) {{", js_str(&self.opts.service)).unwrap();
        writeln!(out, "    super(client, service)").unwrap();
        writeln!(out, "  }}").unwrap();
        for (k, op) in api.operations.iter().enumerate() {
            writeln!(out).unwrap();
            self.method(&mut out, op, &sigs[k], &self.methods[k]);
        }
        writeln!(out, "}}").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "const read = Object.freeze({{").unwrap();
        for &(i, m) in &self.written {
            if m == Mode::Out {
                let name = self.name(i, m);
                writeln!(out, "  {name}: (value) => ${name}(value, ''),").unwrap();
            }
        }
        writeln!(out, "}})").unwrap();
        writeln!(out).unwrap();
        // Plain names: the form Node's ESM loader reads a CommonJS module's exports from.
        writeln!(out, "module.exports = {{").unwrap();
        writeln!(out, "  {},", self.client).unwrap();
        writeln!(out, "  read,").unwrap();
        for e in &self.errors {
            writeln!(out, "  {},", e.name).unwrap();
        }
        writeln!(out, "}}").unwrap();
        out
    }

    fn reader(&self, out: &mut String, i: usize) {
        let t = &self.api.types[i];
        let name = self.name(i, Mode::Out);
        writeln!(out, "function ${name}(v, at) {{").unwrap();
        match &t.def {
            Def::Object { props, additional } => {
                let fields = self.fields(i, Mode::Out, props);
                writeln!(out, "  const d = rt.obj(v, at)").unwrap();
                writeln!(out, "  const o = {{}}").unwrap();
                for (p, f) in &fields {
                    let key = js_str(&p.name);
                    let line = match f {
                        Field::Tagged(v) => format!("rt.tagged(o, d, {key}, at, {})", js_str(v)),
                        Field::Required => format!("rt.required(o, d, {key}, at, {})", self.read(&p.ty)),
                        Field::Defaulted(v) => format!("rt.defaulted(o, d, {key}, at, {}, {v})", self.read(&p.ty)),
                        Field::Optional if matches!(p.ty, Ty::Nullable(_) | Ty::Any) || nullable_alias(self.api, &p.ty) => {
                            format!("rt.optionalNullable(o, d, {key}, at, {})", self.read(&p.ty))
                        }
                        Field::Optional => format!("rt.optional(o, d, {key}, at, {})", self.read(&p.ty)),
                    };
                    writeln!(out, "  {line}").unwrap();
                }
                if let Some(a) = additional {
                    writeln!(out, "  rt.rest(o, d, ${name}.keys, at, {})", self.read(a)).unwrap();
                }
                writeln!(out, "  return o").unwrap();
                writeln!(out, "}}").unwrap();
                let keys: Vec<String> = fields.iter().map(|(p, _)| js_str(&p.name)).collect();
                writeln!(out, "${name}.keys = [{}]", keys.join(", ")).unwrap();
            }
            Def::Union { members, tag } => {
                let readers: Vec<String> = members.iter().map(|t| self.read(t)).collect();
                let shown: Vec<String> = members.iter().map(|t| self.ty(t, Mode::Out, false)).collect();
                if let Some(tag) = tag {
                    writeln!(out, "  const tag = rt.tag(v, {})", js_str(&tag.property)).unwrap();
                    for (k, r) in readers.iter().enumerate() {
                        let values: Vec<String> = tag.values.iter().filter(|(_, mi)| *mi == k).map(|(v, _)| js_str(v)).collect();
                        if values.is_empty() {
                            continue;
                        }
                        let test = values.iter().map(|v| format!("tag === {v}")).collect::<Vec<_>>().join(" || ");
                        writeln!(out, "  if ({test}) return {r}(v, at)").unwrap();
                    }
                    if tag.declared {
                        let all: Vec<String> = tag.values.iter().map(|(v, _)| js_str(v)).collect();
                        writeln!(out, "  throw rt.badTag(v, at, {}, [{}])", js_str(&tag.property), all.join(", ")).unwrap();
                        writeln!(out, "}}").unwrap();
                        return;
                    }
                }
                writeln!(out, "  return rt.bestOf(v, at, [{}], {})", readers.join(", "), js_str(&shown.join(" or "))).unwrap();
            }
            Def::Alias(ty) => writeln!(out, "  return {}(v, at)", self.read(ty)).unwrap(),
        }
        if !matches!(t.def, Def::Object { .. }) {
            writeln!(out, "}}").unwrap();
        }
    }

    /// An operation's answer reader: the success body as the document declares it.
    fn answer_reader(&self, out: &mut String, _op: &Operation, sig: &Sig, name: &str) {
        writeln!(out, "function $${name}(res) {{").unwrap();
        let read = |c: &Content| match c {
            Content::None => "undefined".to_string(),
            Content::Other(_) => "res.body".to_string(),
            Content::Json(t) => format!("{}(rt.body(res), '')", self.read(t)),
        };
        let mut distinct: Vec<&Content> = Vec::new();
        for (_, c) in &sig.successes {
            if !distinct.contains(&c) {
                distinct.push(c);
            }
        }
        if distinct.len() > 1 {
            for (s, c) in &sig.successes {
                match s {
                    Status::Code(code) => writeln!(out, "  if (res.status === {code}) return {}", read(c)).unwrap(),
                    Status::Range(d) => writeln!(out, "  if (Math.floor(res.status / 100) === {d}) return {}", read(c)).unwrap(),
                    Status::Default => continue,
                }
            }
        }
        match distinct.first() {
            Some(c) => writeln!(out, "  return {}", read(c)).unwrap(),
            None => writeln!(out, "  return undefined").unwrap(),
        }
        writeln!(out, "}}").unwrap();
    }

    fn method(&self, out: &mut String, op: &Operation, sig: &Sig, name: &str) {
        let arg_of = |p: &Param| {
            sig.args
                .iter()
                .find(|a| matches!(&a.what, What::Param(q) if q.name == p.name && q.location == p.location))
                .map(|a| format!("p.{}", a.name))
                .expect("every param has an argument")
        };
        if sig.args.is_empty() {
            writeln!(out, "  async {name}(options) {{").unwrap();
        } else {
            writeln!(out, "  async {name}(params, options) {{").unwrap();
            writeln!(out, "    const p = params ?? {{}}").unwrap();
        }
        // The path, its parameters percent-encoded.
        let mut pieces: Vec<String> = Vec::new();
        let mut lit = String::new();
        let mut rest = op.path.as_str();
        while let Some(start) = rest.find('{') {
            let Some(end) = rest[start..].find('}') else { break };
            lit.push_str(&rest[..start]);
            if !lit.is_empty() {
                pieces.push(js_str(&lit));
                lit.clear();
            }
            let var = &rest[start + 1..start + end];
            let p = op.params.iter().find(|p| p.location == In::Path && p.name == var).expect("path parameters are checked");
            pieces.push(format!("rt.path({}, {})", arg_of(p), js_str(&arg_of(p)[2..])));
            rest = &rest[start + end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() || pieces.is_empty() {
            pieces.push(js_str(&lit));
        }
        writeln!(out, "    const query = []").unwrap();
        for p in op.params.iter().filter(|p| p.location == In::Query) {
            let sep = match p.style {
                Style::Repeat => "null",
                Style::Comma => "','",
                Style::Space => "' '",
                Style::Pipe => "'|'",
            };
            writeln!(out, "    rt.query(query, {}, {}, {sep})", js_str(&p.name), arg_of(p)).unwrap();
        }
        writeln!(out, "    const headers = []").unwrap();
        for p in op.params.iter().filter(|p| p.location == In::Header && !p.idempotency_key) {
            writeln!(out, "    rt.header(headers, {}, {})", js_str(&p.name), arg_of(p)).unwrap();
        }
        let mut call = vec![
            format!("method: {}", js_str(&op.method)),
            format!("path: {}", pieces.join(" + ")),
            format!("endpoint: {}", js_str(&op.id)),
            "query".to_string(),
            "headers".to_string(),
        ];
        if sig.args.iter().any(|a| matches!(a.what, What::Body)) {
            call.push("json: p.body".into());
        }
        if let Some(p) = op.params.iter().find(|p| p.idempotency_key) {
            let a = arg_of(p);
            call.push(format!("idempotencyKey: {a} === undefined || {a} === null ? undefined : rt.text({a})"));
        }
        let errors: Vec<String> = sig
            .raises
            .iter()
            .map(|(n, s)| {
                let e = self.errors.iter().find(|e| e.name == *n).expect("raised errors have classes");
                let read = match &e.content {
                    Content::Json(t) => self.read(t),
                    _ => "null".into(),
                };
                format!("{}: [{n}, {read}]", js_str(&s.key()))
            })
            .collect();
        let errors = if errors.is_empty() { "{}".to_string() } else { format!("{{ {} }}", errors.join(", ")) };
        writeln!(out, "    return this._send({{ {} }}, options, $${name}, {errors})", call.join(", ")).unwrap();
        writeln!(out, "  }}").unwrap();
    }

    // ---- the ESM forms and package.json ----

    fn esm(&self) -> String {
        format!(
            "{}\n// ESM entry point: the same module instance as index.js (so `instanceof` agrees between `import` and `require`).\nexport * from './index.js'\n",
            self.header()
        )
    }

    fn esm_types(&self) -> String {
        format!("{}\n// ESM type declarations: the same names as index.d.ts.\nexport * from './index.js'\n", self.header())
    }

    fn package_json(&self) -> String {
        let version = if self.api.api_version.split('.').count() == 3 && self.api.api_version.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) {
            self.api.api_version.clone()
        } else {
            "0.0.0".to_string()
        };
        let v = serde_json::json!({
            "name": self.opts.package,
            "version": version,
            "description": format!("Typed client of the {} service, generated by `harness codegen` from {}; do not edit", self.opts.service, self.opts.source),
            "private": true,
            "type": "commonjs",
            "main": "index.js",
            "types": "index.d.ts",
            "exports": {
                ".": {
                    "import": { "types": "./index.d.mts", "default": "./index.mjs" },
                    "require": { "types": "./index.d.ts", "default": "./index.js" }
                },
                "./package.json": "./package.json"
            },
            "peerDependencies": { "harness-sdk": ">=0.1.0" }
        });
        format!("{}\n", serde_json::to_string_pretty(&v).expect("json serialises"))
    }
}

struct Sig {
    args: Vec<Arg>,
    ret: String,
    successes: Vec<(Status, Content)>,
    /// Each declared error response's class and status.
    raises: Vec<(String, Status)>,
}

enum What {
    Param(Param),
    Body,
}

struct Arg {
    name: String,
    ty: String,
    required: bool,
    doc: Option<String>,
    what: What,
}

/// The class Harness raises for a status, which a typed error extends.
fn error_base(status: Status) -> &'static str {
    match status {
        Status::Code(401 | 403) => "AuthError",
        Status::Code(429) => "RateLimitedError",
        _ => "HttpStatusError",
    }
}



/// Whether a named type is an alias of a nullable type.
fn nullable_alias(api: &Api, t: &Ty) -> bool {
    match t {
        Ty::Named(i) => match &api.types[*i].def {
            Def::Alias(Ty::Nullable(_)) => true,
            Def::Alias(inner) => nullable_alias(api, inner),
            _ => false,
        },
        _ => false,
    }
}

/// Whether a type is (an alias of) a wide integer: its JavaScript values are bigints.
fn wide(api: &Api, t: &Ty) -> bool {
    match t {
        Ty::Int { wide } => *wide,
        Ty::Nullable(t) => wide(api, t),
        Ty::Named(i) => match &api.types[*i].def {
            Def::Alias(t) => wide(api, t),
            _ => false,
        },
        _ => false,
    }
}


/// A camelCase identifier starting with a lower-case letter (`X-Tenant` -> `xTenant`,
/// `ListService` -> `listService`); `prefix` goes before one that would start with a digit.
pub fn lower_camel(s: &str, prefix: &str) -> String {
    let c: Vec<char> = camel(&harness_openapi::schema::ident_chars(s)).chars().collect();
    if c.is_empty() {
        return prefix.to_string();
    }
    // A leading acronym is lower-cased up to the capital that starts the next word (`ID` ->
    // `id`, `HTTPStatus` -> `httpStatus`).
    let upper = c.iter().take_while(|c| c.is_ascii_uppercase()).count();
    let lower = match upper {
        0 | 1 => 1,
        n if n == c.len() || !c[n].is_ascii_lowercase() => n,
        n => n - 1,
    };
    let out: String = c.iter().enumerate().map(|(k, ch)| if k < lower { ch.to_ascii_lowercase() } else { *ch }).collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("{prefix}{}", pascal(&out))
    } else {
        out
    }
}

/// A property key as TypeScript writes it: bare when it is an identifier, else quoted.
fn prop_key(name: &str) -> String {
    let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        js_str(name)
    }
}

/// A JavaScript string literal (JSON's escapes are JavaScript's).
pub fn js_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn js_value(v: &Value) -> String {
    match v {
        Value::String(s) => js_str(s),
        other => other.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `/** ... */` comment; `*/` in the text cannot close it.
fn comment(out: &mut String, indent: &str, text: &str) {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let l = l.trim_end().replace("*/", "*\\/");
            l.chars().map(|c| if c.is_control() && c != '\t' { ' ' } else { c }).collect::<String>()
        })
        .collect();
    let mut lines: Vec<String> = lines.into_iter().skip_while(|l| l.is_empty()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    match lines.as_slice() {
        [] => {}
        [one] => writeln!(out, "{indent}/** {one} */").unwrap(),
        many => {
            writeln!(out, "{indent}/**").unwrap();
            for l in many {
                if l.is_empty() {
                    writeln!(out, "{indent} *").unwrap();
                } else {
                    writeln!(out, "{indent} * {l}").unwrap();
                }
            }
            writeln!(out, "{indent} */").unwrap();
        }
    }
}

fn reason(code: u16) -> Option<&'static str> {
    Some(match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        402 => "PaymentRequired",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        408 => "RequestTimeout",
        409 => "Conflict",
        410 => "Gone",
        412 => "PreconditionFailed",
        413 => "PayloadTooLarge",
        415 => "UnsupportedMediaType",
        422 => "UnprocessableEntity",
        423 => "Locked",
        424 => "FailedDependency",
        428 => "PreconditionRequired",
        429 => "TooManyRequests",
        500 => "InternalServer",
        501 => "NotImplemented",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "GatewayTimeout",
        _ => return None,
    })
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_comments_are_safe() {
        assert_eq!(lower_camel("ListService", "op"), "listService");
        assert_eq!(lower_camel("X-Tenant", "p"), "xTenant");
        assert_eq!(lower_camel("post-payments", "op"), "postPayments");
        assert_eq!(lower_camel("3ds", "p"), "p3ds");
        assert_eq!(lower_camel("", "p"), "p");
        assert_eq!(lower_camel("ID", "p"), "id");
        assert_eq!(lower_camel("HTTPStatus", "op"), "httpStatus");
        assert_eq!(lower_camel("URL2Fetch", "op"), "url2Fetch");
        assert_eq!(lower_camel("getHTTPStatus", "op"), "getHTTPStatus");
        assert_eq!(lower_camel("get thing (by id)/v2", "op"), "getThingByIdV2");
        assert_eq!(prop_key("created_at"), "created_at");
        assert_eq!(prop_key("x-rate"), "\"x-rate\"");
        assert_eq!(prop_key("__proto__"), "__proto__");
        let mut out = String::new();
        comment(&mut out, "", "ends */ here\nsecond");
        assert_eq!(out, "/**\n * ends *\\/ here\n * second\n */\n");
        assert!(check_package("orders-client").is_ok());
        assert!(check_package("Orders").is_err());
    }
}

#[cfg(test)]
mod emit_tests {
    use super::*;

    fn hostile() -> Vec<(PathBuf, String)> {
        let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings-node/test/fixtures/hostile.yaml");
        let api = harness_openapi::load(&spec).expect("the fixture reads");
        emit(&api, &Options { service: "hostile".into(), package: "hostile".into(), source: "hostile.yaml".into() })
    }

    #[test]
    fn output_is_deterministic_and_no_text_closes_a_comment() {
        let files = hostile();
        assert_eq!(files, hostile());
        for (path, text) in &files {
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                // In a block comment the only `*/` is the comment's own end (a `//` line ends
                // at its line break only, and the header is one line).
                let ends = line.matches("*/").count();
                assert!(ends == 0 || (ends == 1 && line.trim_end().ends_with("*/")), "{}: {line}", path.display());
            }
        }
    }

    #[test]
    fn names_that_are_globals_or_keywords_are_never_taken() {
        let files = hostile();
        let decls = &files.iter().find(|(p, _)| p.ends_with("index.d.ts")).unwrap().1;
        let js = &files.iter().find(|(p, _)| p.ends_with("index.js")).unwrap().1;
        // A schema named `Date` would hide the global Date the declarations use for date-times.
        assert!(decls.contains("export interface Date_ {"), "{decls}");
        assert!(decls.contains("  when?: Date\n"), "{decls}");
        // `constructor` cannot be a method; the endpoint label stays the operationId.
        assert!(decls.contains("  constructor_(\n"), "{decls}");
        assert!(js.contains("endpoint: \"constructor\""), "{js}");
        // Keys that are not identifiers are quoted; `__proto__` is read as a plain key.
        assert!(decls.contains("  \"x-rate\": number\n"), "{decls}");
        assert!(js.contains("rt.required(o, d, \"__proto__\", at, rt.string)"), "{js}");
    }
}
