//! A Python package per service: `models.py` (a dataclass per object schema, with
//! `from_json`/`to_json`; `Literal` and `Union` aliases), `errors.py` (an
//! `harness.HttpStatusError` subclass per declared error response, its body parsed as
//! `model`), `client.py` (a sync and an async client class, one keyword-only typed method per
//! operation, on `harness.Client` / `harness.AsyncClient`) and `py.typed`. What they share is
//! `harness._openapi`, shipped in the harness package (never copied): `__init__.py` checks at
//! import that the installed harness provides the contract the package was written for.
//! Python 3.9+, no dependency beyond `harness`; checked by `mypy --strict` and `pyright --strict`
//! (a module imports only the names it uses).
//!
//! Choices: a schema with `readOnly` or `writeOnly` properties (or one that uses such a
//! schema) is two classes, `Name` as responses carry it and `NameInput` as requests do; an
//! optional property is `Optional[T] = None` (left out of the JSON when None) unless it has a
//! default, or it is nullable too: then it is `Union[T, None, Unset] = UNSET`, so that `None`
//! is sent as JSON `null` (a PATCH that clears it) and `UNSET` leaves it out (a PATCH that keeps
//! it), and a response reads an absent key as `UNSET`; a union member tagged by one
//! discriminator value gets that value as its default; a method's name is the operationId in
//! snake_case (any character that is not an ASCII letter or digit separates words), while each
//! call's `endpoint` label is the operationId exactly.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::path::PathBuf;

use serde_json::Value;

use harness_openapi::model::{Api, Content, Def, In, Operation, Param, Prop, Status, Style, Ty};
use super::common::{self, error_responses, holds, http_reason, keeps, Mode};
use crate::names::pascal;

/// How a package is written.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Harness service the clients call (the config's `services.NAME`).
    pub service: String,
    /// The package's (directory's) name.
    pub package: String,
    /// The spec's file name, for the header.
    pub source: String,
}

/// The version of `harness._openapi` the generated code is written for (its `CONTRACT`).
const CONTRACT: u32 = 1;

/// The default of an optional property that may be null: absent, as against `None` (`null`).
const UNSET: &str = "_rt.UNSET";

const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
    "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Names a field may not take: builtins that annotations or class bodies use, and the
/// members every model has, and the lowercase names the modules import (so that a module's
/// imports can be told from the identifiers its code uses).
const FIELD_RESERVED: [&str; 13] = ["str", "int", "float", "bool", "bytes", "frozenset", "self", "cls", "from_json", "to_json", "cast", "dataclass", "harness"];

/// Names of the generated modules' own imports, which a type may not take.
const TYPE_RESERVED: [&str; 24] = [
    "Any",
    "Callable",
    "ClassVar",
    "Dict",
    "FrozenSet",
    "List",
    "Literal",
    "Mapping",
    "Optional",
    "Sequence",
    "Tuple",
    "Union",
    "cast",
    "dataclass",
    "harness",
    "HarnessError",
    "HttpStatusError",
    "AuthError",
    "RateLimitedError",
    "Response",
    "SyncService",
    "AsyncService",
    "Unset",
    "UNSET",
];

/// The package's files, relative to the output directory (`PACKAGE/...`).
pub fn emit(api: &Api, opts: &Options) -> Vec<(PathBuf, String)> {
    let py = Py::new(api, opts);
    let dir = PathBuf::from(&opts.package);
    vec![
        (dir.join("__init__.py"), py.init()),
        (dir.join("client.py"), py.client()),
        (dir.join("errors.py"), py.errors()),
        (dir.join("models.py"), py.models()),
        (dir.join("py.typed"), String::new()),
    ]
}

/// One typed error class: a status key and the body's type.
struct ErrorClass {
    name: String,
    status: Status,
    content: Content,
}

struct Py<'a> {
    api: &'a Api,
    opts: &'a Options,
    /// Whether a type has a request form and a response form.
    split: Vec<bool>,
    names: HashMap<(usize, Mode), String>,
    /// The types written, in order (a class or an alias each).
    written: Vec<(usize, Mode)>,
    /// A union member's tag property and the one value that selects it.
    tag_defaults: HashMap<usize, (String, String)>,
    errors: Vec<ErrorClass>,
    /// Each operation's method name.
    methods: Vec<String>,
    client: String,
}

impl<'a> Py<'a> {
    fn new(api: &'a Api, opts: &'a Options) -> Py<'a> {
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
        let mut py = Py {
            api,
            opts,
            split,
            names: HashMap::new(),
            written: Vec::new(),
            tag_defaults: HashMap::new(),
            errors: Vec::new(),
            methods: Vec::new(),
            client: format!("{}Client", pascal(&harness_openapi::schema::ident_chars(&opts.service))),
        };
        py.reach();
        py.name_types();
        py.tags();
        py.name_errors();
        py.name_methods();
        py
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
        self.written.sort_by_key(|(i, m)| (*i, *m));
    }

    fn name_types(&mut self) {
        let mut taken: BTreeSet<String> = TYPE_RESERVED.iter().chain(KEYWORDS.iter()).map(|s| s.to_string()).collect();
        taken.insert(self.client.clone());
        taken.insert(format!("Async{}", self.client));
        let mut unique = |wanted: String| {
            // (`parse_X` is the reader of alias `X`.)
            let base = if wanted.starts_with("parse_") || (taken.contains(&wanted) && (KEYWORDS.contains(&wanted.as_str()) || TYPE_RESERVED.contains(&wanted.as_str()))) {
                format!("{wanted}_")
            } else {
                wanted
            };
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{base}{n}");
                n += 1;
            }
            name
        };
        // Response forms (and the one form of unsplit types) keep the document's names.
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
        taken.insert(format!("Async{}", self.client));
        // Each status key's bodies across the operations: one class per (status, body type);
        // the body most operations declare has the plain name (`BadRequestError`).
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
                    name = format!("{base}{qualifier}Error{n}");
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
            let wanted = ident(&snake(&op.id), &[]);
            let mut name = wanted.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{wanted}_{n}");
                n += 1;
            }
            self.methods.push(name);
        }
    }

    fn header(&self) -> String {
        let api = self.api;
        format!(
            "# Generated by `harness codegen` from {} ({} {}, OpenAPI {}); do not edit. To regenerate: harness codegen --spec {} --lang python --service {} --package {}",
            self.opts.source,
            one_line(&api.title),
            one_line(&api.api_version),
            api.version,
            self.opts.source,
            self.opts.service,
            self.opts.package
        )
    }

    fn name(&self, i: usize, m: Mode) -> &str {
        &self.names[&(i, self.mode(i, m))]
    }

    /// A type as Python writes it; `prefix` qualifies named types (`_m.` outside models.py);
    /// `quote` quotes named types that are not yet defined (an alias's right-hand side).
    fn ty(&self, t: &Ty, m: Mode, prefix: &str, quote: &dyn Fn(usize) -> bool, input: bool) -> String {
        let rec = |t: &Ty| self.ty(t, m, prefix, quote, input);
        match t {
            Ty::String => "str".into(),
            Ty::Int { .. } => "int".into(),
            Ty::Number => "float".into(),
            Ty::Bool => "bool".into(),
            Ty::DateTime => "_dt.datetime".into(),
            Ty::Date => "_dt.date".into(),
            Ty::Uuid => "_uuid.UUID".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Any => "Any".into(),
            Ty::Array(t) if input => format!("Sequence[{}]", self.ty(t, m, prefix, quote, false)),
            Ty::Array(t) => format!("List[{}]", rec(t)),
            Ty::Map(t) => format!("Dict[str, {}]", self.ty(t, m, prefix, quote, false)),
            Ty::Named(i) => {
                let n = format!("{prefix}{}", self.name(*i, m));
                if quote(*i) {
                    format!("\"{n}\"")
                } else {
                    n
                }
            }
            Ty::Nullable(t) => format!("Optional[{}]", rec(t)),
            Ty::Literals(vs) => format!("Literal[{}]", vs.iter().map(py_value).collect::<Vec<_>>().join(", ")),
            Ty::Union(ts) => format!("Union[{}]", ts.iter().map(|t| self.ty(t, m, prefix, quote, false)).collect::<Vec<_>>().join(", ")),
        }
    }

    fn plain(&self, t: &Ty, m: Mode, prefix: &str) -> String {
        self.ty(t, m, prefix, &|_| false, false)
    }

    /// How to read a JSON value as `t`: a `Parse` expression, and whether what it returns is
    /// typed `Any` (a literal or an unnamed union, which a return then casts).
    fn parse(&self, t: &Ty, m: Mode, prefix: &str) -> (String, bool) {
        let rec = |t: &Ty| self.parse(t, m, prefix).0;
        match t {
            Ty::String => ("_rt.string".into(), false),
            Ty::Int { .. } => ("_rt.integer".into(), false),
            Ty::Number => ("_rt.number".into(), false),
            Ty::Bool => ("_rt.boolean".into(), false),
            Ty::DateTime => ("_rt.date_time".into(), false),
            Ty::Date => ("_rt.date".into(), false),
            Ty::Uuid => ("_rt.uuid".into(), false),
            Ty::Bytes => ("_rt.byte".into(), false),
            Ty::Any => ("_rt.any_".into(), false),
            Ty::Array(t) => (format!("_rt.list_of({})", rec(t)), false),
            Ty::Map(t) => (format!("_rt.dict_of({})", rec(t)), false),
            Ty::Nullable(t) => (format!("_rt.nullable({})", rec(t)), false),
            Ty::Named(i) => match &self.api.types[*i].def {
                Def::Object { .. } => (format!("{prefix}{}.from_json", self.name(*i, m)), false),
                _ => (format!("{prefix}parse_{}", self.name(*i, m)), false),
            },
            Ty::Literals(vs) => (format!("_rt.literal(({},))", vs.iter().map(py_value).collect::<Vec<_>>().join(", ")), true),
            Ty::Union(ts) => {
                let shown: Vec<String> = ts.iter().map(|t| self.plain(t, m, "")).collect();
                (format!("_rt.one_of(({},), {})", ts.iter().map(rec).collect::<Vec<_>>().join(", "), py_str(&shown.join(" or "))), true)
            }
        }
    }

    /// An expression reading `data` at `at` as `t`, typed as `declared` says.
    fn read_as(&self, t: &Ty, m: Mode, prefix: &str, data: &str, at: &str) -> String {
        let (p, any) = self.parse(t, m, prefix);
        let call = format!("{p}({data}, {at})");
        if any {
            format!("cast({}, {call})", self.plain(t, m, prefix))
        } else {
            call
        }
    }

    // ---- models.py ----

    fn models(&self) -> String {
        let mut out = String::new();
        writeln!(out, "{}", self.header()).unwrap();
        writeln!(out, "\"\"\"The types of the ``{}`` service's operations, as its document declares them.", self.opts.service).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "Each object is a dataclass with ``from_json`` (which raises ``harness.SchemaError`` naming the").unwrap();
        writeln!(out, "JSON pointer of the first value that does not match) and ``to_json``.").unwrap();
        let head = out;
        let mut out = String::new();
        // Classes first (their annotations are never evaluated), then aliases in the order
        // they use each other (an alias's right-hand side is evaluated at import).
        for &(i, m) in &self.written {
            if let Def::Object { props, additional } = &self.api.types[i].def {
                self.class(&mut out, i, m, props, additional.as_ref());
            }
        }
        let aliases: Vec<(usize, Mode)> = self.written.iter().copied().filter(|(i, _)| !matches!(self.api.types[*i].def, Def::Object { .. })).collect();
        let mut state: HashMap<(usize, Mode), u8> = HashMap::new();
        for a in &aliases {
            self.alias_in_order(&mut out, *a, &mut state);
        }
        writeln!(out, "\n\n__all__ = [").unwrap();
        for &(i, m) in &self.written {
            writeln!(out, "    {},", py_str(self.name(i, m))).unwrap();
        }
        writeln!(out, "]").unwrap();
        let unset = if out.contains(UNSET) {
            "An optional property that may also be null is ``UNSET`` when absent, so that ``None`` is sent as\n``null`` (a PATCH that clears it) and ``UNSET`` is left out (a PATCH that keeps it).\n"
        } else {
            ""
        };
        format!("{head}{unset}\"\"\"\n\n{}{out}", imports(&out))
    }

    fn alias_in_order(&self, out: &mut String, (i, m): (usize, Mode), state: &mut HashMap<(usize, Mode), u8>) {
        if state.contains_key(&(i, m)) {
            return;
        }
        state.insert((i, m), 1);
        let mut refs = Vec::new();
        harness_openapi::model::def_refs(&self.api.types[i].def, &mut refs);
        for r in refs {
            if !matches!(self.api.types[r].def, Def::Object { .. }) {
                self.alias_in_order(out, (r, self.mode(r, m)), state);
            }
        }
        // Anything still being written refers back to this one: quote it.
        let quote = |r: usize| !matches!(self.api.types[r].def, Def::Object { .. }) && state.get(&(r, self.mode(r, m))) == Some(&1);
        self.alias(out, i, m, &quote);
        state.insert((i, m), 2);
    }

    fn alias(&self, out: &mut String, i: usize, m: Mode, quote: &dyn Fn(usize) -> bool) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        writeln!(out, "\n").unwrap();
        match &t.def {
            Def::Alias(ty) => {
                writeln!(out, "{name} = {}", self.ty(ty, m, "", quote, false)).unwrap();
                docstring(out, "", t.doc.as_deref(), &[]);
                writeln!(out, "\n").unwrap();
                writeln!(out, "def parse_{name}(data: Any, at: str = \"\") -> {name}:").unwrap();
                let (p, any) = self.parse(ty, m, "");
                let any = any && *ty != Ty::Any;
                if any {
                    writeln!(out, "    return cast({name}, {p}(data, at))").unwrap();
                } else {
                    writeln!(out, "    return {p}(data, at)").unwrap();
                }
            }
            Def::Union { members, tag } => {
                let shown: Vec<String> = members.iter().map(|t| self.ty(t, m, "", quote, false)).collect();
                writeln!(out, "{name} = Union[{}]", shown.join(", ")).unwrap();
                docstring(out, "", t.doc.as_deref(), &[]);
                writeln!(out, "\n").unwrap();
                writeln!(out, "def parse_{name}(data: Any, at: str = \"\") -> {name}:").unwrap();
                let parsers: Vec<String> = members.iter().map(|t| self.parse(t, m, "").0).collect();
                let names: Vec<String> = members.iter().map(|t| self.plain(t, m, "")).collect();
                let expected = py_str(&names.join(" or "));
                if let Some(tag) = tag {
                    writeln!(out, "    tag = _rt.tag(data, {})", py_str(&tag.property)).unwrap();
                    for (k, p) in parsers.iter().enumerate() {
                        let values: Vec<String> = tag.values.iter().filter(|(_, mi)| *mi == k).map(|(v, _)| py_str(v)).collect();
                        match values.as_slice() {
                            [] => continue,
                            [one] => writeln!(out, "    if tag == {one}:").unwrap(),
                            many => writeln!(out, "    if tag in ({}):", many.join(", ")).unwrap(),
                        }
                        let (_, any) = self.parse(&members[k], m, "");
                        if any {
                            writeln!(out, "        return cast({name}, {p}(data, at))").unwrap();
                        } else {
                            writeln!(out, "        return {p}(data, at)").unwrap();
                        }
                    }
                    if tag.declared {
                        let all: Vec<String> = tag.values.iter().map(|(v, _)| py_str(v)).collect();
                        let expected = py_str(&format!("one of {}", all.join(", ")));
                        writeln!(
                            out,
                            "    raise _rt.drift(_rt.child(at, {}) if isinstance(data, dict) else at, {expected}, tag if isinstance(data, dict) else data)",
                            py_str(&tag.property)
                        )
                        .unwrap();
                        return;
                    }
                }
                writeln!(out, "    return cast({name}, _rt.best_of(data, at, ({},), {expected}))", parsers.join(", ")).unwrap();
            }
            Def::Object { .. } => unreachable!("objects are classes"),
        }
    }

    /// The fields of an object type in one form: (python name, prop), declared order.
    fn fields(&self, i: usize, m: Mode, props: &'a [Prop]) -> Vec<(String, Prop)> {
        let mut out: Vec<(String, Prop)> = Vec::new();
        let mut taken: Vec<String> = Vec::new();
        for p in props.iter().filter(|p| keeps(p, m)) {
            let mut p = p.clone();
            if let Some((prop, value)) = self.tag_defaults.get(&i) {
                if *prop == p.name {
                    p.default = Some(Value::String(value.clone()));
                }
            }
            let name = unique_ident(&snake(&p.name), &mut taken);
            out.push((name, p));
        }
        if let Some((prop, value)) = self.tag_defaults.get(&i) {
            if !out.iter().any(|(_, p)| p.name == *prop) {
                let name = unique_ident(&snake(prop), &mut taken);
                let p = Prop {
                    name: prop.clone(),
                    ty: Ty::Literals(vec![Value::String(value.clone())]),
                    required: false,
                    doc: Some("The union's tag.".into()),
                    default: Some(Value::String(value.clone())),
                    read_only: false,
                    write_only: false,
                    deprecated: false,
                };
                out.push((name, p));
            }
        }
        out
    }

    /// A field's Python default, if it has one: the schema's default when the type holds it.
    fn default(&self, p: &Prop) -> Option<String> {
        let d = p.default.as_ref()?;
        if d.is_null() || !holds(self.api, &p.ty, d) {
            return None;
        }
        Some(py_value(d))
    }

    fn class(&self, out: &mut String, i: usize, m: Mode, props: &'a [Prop], additional: Option<&Ty>) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        let fields = self.fields(i, m, props);
        let mut taken: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let extra = additional.map(|a| (unique_ident("additional_properties", &mut taken), a));
        writeln!(out, "\n").unwrap();
        writeln!(out, "@dataclass").unwrap();
        writeln!(out, "class {name}:").unwrap();
        let mut docs: Vec<(String, String)> = Vec::new();
        for (n, p) in &fields {
            let mut d = field_doc(p, p.doc.as_deref().unwrap_or_default());
            if *n != p.name {
                d = format!("{d} (``{}`` in JSON)", p.name).trim().to_string();
            }
            if !d.is_empty() {
                docs.push((n.clone(), d));
            }
        }
        if let Some((n, _)) = &extra {
            docs.push((n.clone(), "The keys beside the declared ones.".into()));
        }
        let mut doc = t.doc.clone().unwrap_or_else(|| format!("``{}`` (at ``{}``).", t.name, t.pointer));
        if self.split[i] {
            let form = match m {
                Mode::Out => "As a response carries it (without write-only properties); requests send ",
                Mode::In => "As a request sends it (without read-only properties); responses carry ",
            };
            let other = self.names.get(&(i, if m == Mode::Out { Mode::In } else { Mode::Out })).cloned().unwrap_or_else(|| format!("{name} in another form"));
            doc = format!("{doc}\n\n{form}``{other}``.");
        }
        let doc = Some(doc);
        docstring(out, "    ", doc.as_deref(), &docs);
        writeln!(out).unwrap();
        // Fields without a default first (a dataclass requires it), each group in document order.
        let mut ordered: Vec<(&String, &Prop, Option<String>)> = Vec::new();
        for (n, p) in &fields {
            let d = self.default(p);
            if p.required && d.is_none() {
                ordered.push((n, p, None));
            }
        }
        for (n, p) in &fields {
            let d = self.default(p);
            if !(p.required && d.is_none()) {
                let absent = if matches!(p.ty, Ty::Nullable(_)) || nullable_alias(self.api, &p.ty) { UNSET } else { "None" };
                ordered.push((n, p, Some(d.unwrap_or_else(|| absent.into()))));
            }
        }
        for (n, p, d) in &ordered {
            let ty = self.plain(&p.ty, m, "");
            match d {
                None => writeln!(out, "    {n}: {ty}").unwrap(),
                Some(d) if d == UNSET => match &p.ty {
                    Ty::Nullable(inner) => writeln!(out, "    {n}: Union[{}, None, _rt.Unset] = {UNSET}", self.plain(inner, m, "")).unwrap(),
                    _ => writeln!(out, "    {n}: Union[{ty}, _rt.Unset] = {UNSET}").unwrap(),
                },
                Some(d) if d == "None" && !matches!(p.ty, Ty::Nullable(_) | Ty::Any) => writeln!(out, "    {n}: Optional[{ty}] = None").unwrap(),
                Some(d) => writeln!(out, "    {n}: {ty} = {d}").unwrap(),
            }
        }
        if let Some((n, a)) = &extra {
            writeln!(out, "    {n}: Dict[str, {}] = _field(default_factory=dict)", self.plain(a, m, "")).unwrap();
        }
        if !ordered.is_empty() || extra.is_some() {
            writeln!(out).unwrap();
        }
        let keys: Vec<String> = fields.iter().map(|(_, p)| py_str(&p.name)).collect();
        let keys = if keys.is_empty() { "frozenset()".to_string() } else { format!("frozenset({{{}}})", keys.join(", ")) };
        writeln!(out, "    _KEYS: ClassVar[FrozenSet[str]] = {keys}").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "    @classmethod").unwrap();
        writeln!(out, "    def from_json(cls, data: Any, at: str = \"\") -> {name}:").unwrap();
        writeln!(out, "        \"\"\"Reads one from its JSON value; ``harness.SchemaError`` names the first value that does not match.\"\"\"").unwrap();
        writeln!(out, "        d = _rt.obj(data, at)").unwrap();
        if ordered.is_empty() && extra.is_none() {
            writeln!(out, "        return cls()").unwrap();
        } else {
            writeln!(out, "        return cls(").unwrap();
            for (n, p, d) in &ordered {
                let (parse, _) = self.parse(&p.ty, m, "");
                let key = py_str(&p.name);
                let value = match d {
                    None => format!("_rt.required(d, {key}, at, {parse})"),
                    Some(d) if d == UNSET => match &p.ty {
                        Ty::Nullable(inner) => format!("_rt.optional_or_unset(d, {key}, at, {})", self.parse(inner, m, "").0),
                        _ => format!("_rt.optional_nullable_or_unset(d, {key}, at, {parse})"),
                    },
                    Some(d) if d == "None" => format!("_rt.optional(d, {key}, at, {parse})"),
                    Some(d) => format!("_rt.defaulted(d, {key}, at, {parse}, {d})"),
                };
                writeln!(out, "            {n}={value},").unwrap();
            }
            if let Some((n, a)) = &extra {
                writeln!(out, "            {n}=_rt.rest(d, cls._KEYS, at, {}),", self.parse(a, m, "").0).unwrap();
            }
            writeln!(out, "        )").unwrap();
        }
        writeln!(out).unwrap();
        writeln!(out, "    def to_json(self) -> Dict[str, Any]:").unwrap();
        if ordered.iter().any(|(_, _, d)| d.as_deref() == Some(UNSET)) {
            writeln!(out, "        \"\"\"Its JSON value (an optional field that is None is left out, or if it may be null, one that is UNSET).\"\"\"").unwrap();
        } else {
            writeln!(out, "        \"\"\"Its JSON value (an optional field that is None is left out).\"\"\"").unwrap();
        }
        let always: Vec<String> = ordered
            .iter()
            .filter(|(_, _, d)| d.as_deref() != Some("None") && d.as_deref() != Some(UNSET))
            .map(|(n, p, _)| format!("{}: {}", py_str(&p.name), dumped(&p.ty, &format!("self.{n}"))))
            .collect();
        writeln!(out, "        out: Dict[str, Any] = {{{}}}", always.join(", ")).unwrap();
        for (n, p, d) in &ordered {
            if d.as_deref() == Some("None") {
                writeln!(out, "        if self.{n} is not None:").unwrap();
                writeln!(out, "            out[{}] = {}", py_str(&p.name), dumped(&p.ty, &format!("self.{n}"))).unwrap();
            }
            if d.as_deref() == Some(UNSET) {
                writeln!(out, "        if not isinstance(self.{n}, _rt.Unset):").unwrap();
                writeln!(out, "            out[{}] = {}", py_str(&p.name), dumped(&p.ty, &format!("self.{n}"))).unwrap();
            }
        }
        if let Some((n, _)) = &extra {
            writeln!(out, "        for k, v in self.{n}.items():").unwrap();
            writeln!(out, "            out.setdefault(k, _rt.dump(v))").unwrap();
        }
        writeln!(out, "        return out").unwrap();
    }

    // ---- errors.py ----

    fn errors(&self) -> String {
        let mut out = String::new();
        writeln!(out, "{}", self.header()).unwrap();
        writeln!(out, "\"\"\"The ``{}`` service's typed errors: one class per declared error response.", self.opts.service).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "Each is a ``harness.HttpStatusError`` (and an ``AuthError`` for 401 and 403, a").unwrap();
        writeln!(out, "``RateLimitedError`` for 429, as Harness raises them) with the context Harness gives every").unwrap();
        writeln!(out, "error; ``model`` is the body read as the declared type. A body that does not read as that").unwrap();
        writeln!(out, "type leaves the error Harness raised as it was.").unwrap();
        writeln!(out, "\"\"\"").unwrap();
        let head = out;
        let mut out = String::new();
        for e in &self.errors {
            let bases = match e.status {
                Status::Code(401 | 403) => "AuthError, HttpStatusError",
                Status::Code(429) => "RateLimitedError, HttpStatusError",
                _ => "HttpStatusError",
            };
            let what = match e.status {
                Status::Code(c) => format!("The service answered {c}{}", reason_text(c).map(|r| format!(" {r}")).unwrap_or_default()),
                Status::Range(d) => format!("The service answered {d}XX"),
                Status::Default => "The service answered an error status its operation does not list (its `default` response)".into(),
            };
            writeln!(out, "\n").unwrap();
            writeln!(out, "class {}({bases}):", e.name).unwrap();
            match &e.content {
                Content::Json(t) => {
                    let ty = self.plain(t, Mode::Out, "_m.");
                    writeln!(out, "    \"\"\"{what}; ``model`` is its body.\"\"\"").unwrap();
                    writeln!(out).unwrap();
                    writeln!(out, "    model: {ty}").unwrap();
                    writeln!(out).unwrap();
                    writeln!(out, "    @classmethod").unwrap();
                    writeln!(out, "    def from_error(cls, error: HarnessError) -> {}:", e.name).unwrap();
                    writeln!(out, "        \"\"\"The typed error for ``error``, its body read as ``model`` (``harness.SchemaError`` or ``ValueError`` if it does not read).\"\"\"").unwrap();
                    writeln!(out, "        typed = cls(str(error))").unwrap();
                    writeln!(out, "        _rt.copy(error, typed)").unwrap();
                    writeln!(out, "        typed.model = {}", self.read_as(t, Mode::Out, "_m.", "_rt.error_body(error)", "\"\"")).unwrap();
                    writeln!(out, "        return typed").unwrap();
                }
                other => {
                    let body = match other {
                        Content::Other(media) => format!(" (``body`` holds its {media} body)"),
                        _ => String::new(),
                    };
                    writeln!(out, "    \"\"\"{what}{body}.\"\"\"").unwrap();
                    writeln!(out).unwrap();
                    writeln!(out, "    @classmethod").unwrap();
                    writeln!(out, "    def from_error(cls, error: HarnessError) -> {}:", e.name).unwrap();
                    writeln!(out, "        \"\"\"The typed error for ``error``.\"\"\"").unwrap();
                    writeln!(out, "        typed = cls(str(error))").unwrap();
                    writeln!(out, "        _rt.copy(error, typed)").unwrap();
                    writeln!(out, "        return typed").unwrap();
                }
            }
        }
        writeln!(out, "\n\n__all__ = [").unwrap();
        for e in &self.errors {
            writeln!(out, "    {},", py_str(&e.name)).unwrap();
        }
        writeln!(out, "]").unwrap();
        format!("{head}\n{}{out}", imports(&out))
    }

    // ---- client.py ----

    fn client(&self) -> String {
        let mut out = String::new();
        let api = self.api;
        writeln!(out, "{}", self.header()).unwrap();
        writeln!(out, "\"\"\"The ``{}`` service's clients: ``{}`` (on ``harness.Client``) and ``Async{}`` (on", self.opts.service, self.client, self.client)
            .unwrap();
        writeln!(out, "``harness.AsyncClient``), one method per operation, each call labelled with its operationId.").unwrap();
        writeln!(out, "\"\"\"").unwrap();
        let head = out;
        let mut out = String::new();
        let sigs: Vec<Sig> = api.operations.iter().enumerate().map(|(k, op)| self.sig(k, op)).collect();
        for (cls, base, client, is_async) in
            [(self.client.clone(), "SyncService", "Client", false), (format!("Async{}", self.client), "AsyncService", "AsyncClient", true)]
        {
            writeln!(out, "\n").unwrap();
            writeln!(out, "class {cls}(_rt.{base}):").unwrap();
            let mut doc = format!("The ``{}`` service ({}", self.opts.service, one_line(&api.title));
            if !api.api_version.is_empty() {
                write!(doc, " {}", one_line(&api.api_version)).unwrap();
            }
            write!(doc, ") through a ``harness.{client}``: its retries, breakers, limits and metrics apply per operation.").unwrap();
            if let Some(d) = &api.doc {
                doc = format!("{doc}\n\n{d}");
            }
            docstring(&mut out, "    ", Some(&doc), &[]);
            writeln!(out).unwrap();
            writeln!(out, "    __slots__ = ()").unwrap();
            writeln!(out).unwrap();
            writeln!(out, "    def __init__(self, client: harness.{client}, service: str = {}) -> None:", py_str(&self.opts.service)).unwrap();
            writeln!(out, "        \"\"\"Calls go through ``client``, to the config's ``services.<service>``.\"\"\"").unwrap();
            writeln!(out, "        super().__init__(client, service)").unwrap();
            for (k, op) in api.operations.iter().enumerate() {
                self.method(&mut out, op, &sigs[k], &self.methods[k], is_async);
            }
        }
        for (k, op) in api.operations.iter().enumerate() {
            self.call_fn(&mut out, op, &sigs[k], &self.methods[k]);
        }
        writeln!(out, "\n\n__all__ = [{}, {}]", py_str(&self.client), py_str(&format!("Async{}", self.client))).unwrap();
        format!("{head}\n{}{out}", imports(&out))
    }

    fn sig(&self, _k: usize, op: &Operation) -> Sig {
        let mut taken: Vec<String> = vec!["timeout_ms".into()];
        let mut args = Vec::new();
        // Required first, then optional; path, body, query, header within each.
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
        if let Some(b) = &op.body {
            taken.push("body".into());
            let ty = self.ty(&b.ty, Mode::In, "_m.", &|_| false, true);
            args.push(Arg { name: "body".into(), ty, required: b.required, doc: b.doc.clone(), what: What::Body(b.ty.clone()) });
        }
        for p in params {
            let name = if p.idempotency_key { unique_ident("idempotency_key", &mut taken) } else { unique_ident(&snake(&p.name), &mut taken) };
            let ty = self.ty(&p.ty, Mode::In, "_m.", &|_| false, true);
            let mut doc = p.doc.clone();
            if p.deprecated {
                doc = Some(format!("Deprecated. {}", doc.unwrap_or_default()).trim().to_string());
            }
            args.push(Arg { name, ty, required: p.required, doc, what: What::Param(p.clone()) });
        }
        args.sort_by_key(|a| !a.required);
        // The answer: each success status's type.
        let mut successes: Vec<(Status, &Content)> = op.responses.iter().filter(|r| r.status.success()).map(|r| (r.status, &r.content)).collect();
        if successes.is_empty() {
            if let Some(d) = op.responses.iter().find(|r| r.status == Status::Default) {
                successes.push((Status::Default, &d.content));
            }
        }
        let mut returns: Vec<String> = Vec::new();
        let mut has_none = false;
        for (_, c) in &successes {
            match c {
                Content::None => has_none = true,
                Content::Json(t) => {
                    let s = self.plain(t, Mode::Out, "_m.");
                    if !returns.contains(&s) {
                        returns.push(s)
                    }
                }
                Content::Other(_) => {
                    if !returns.contains(&"bytes".to_string()) {
                        returns.push("bytes".into())
                    }
                }
            }
        }
        let ret = match (returns.len(), has_none) {
            (0, _) => "None".to_string(),
            (1, false) => returns[0].clone(),
            (1, true) if returns[0] == "Any" => "Any".into(),
            (1, true) => format!("Optional[{}]", returns[0]),
            (_, false) => format!("Union[{}]", returns.join(", ")),
            (_, true) => format!("Union[{}, None]", returns.join(", ")),
        };
        let default_is_success = successes.iter().any(|(s, _)| *s == Status::Default);
        let raises: Vec<(String, Status)> = error_responses(op)
            .filter(|r| !(default_is_success && r.status == Status::Default))
            .map(|r| (self.error_class(r.status, &r.content).name.clone(), r.status))
            .collect();
        Sig { args, ret, successes: successes.into_iter().map(|(s, c)| (s, c.clone())).collect(), raises }
    }

    fn method(&self, out: &mut String, op: &Operation, sig: &Sig, name: &str, is_async: bool) {
        let mut params: Vec<String> = vec!["self".into(), "*".into()];
        for a in &sig.args {
            let default = if a.required { "" } else { " = None" };
            params.push(format!("{}: {}{default}", a.name, a.declared()));
        }
        params.push("timeout_ms: Optional[float] = None".into());
        writeln!(out).unwrap();
        let def = if is_async { "async def" } else { "def" };
        writeln!(out, "    {def} {name}({}) -> {}:", params.join(", "), sig.ret).unwrap();
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
        write!(doc, "``{} {}`` (endpoint ``{}``).", op.method, op.path, op.id).unwrap();
        if op.deprecated {
            doc.push_str(" Deprecated.");
        }
        if !sig.raises.is_empty() {
            let list: Vec<String> = sig.raises.iter().map(|(n, s)| format!("``{n}`` ({})", s.key())).collect();
            write!(doc, " Raises {}.", list.join(", ")).unwrap();
        }
        let docs: Vec<(String, String)> = sig.args.iter().filter_map(|a| a.doc.as_ref().map(|d| (a.name.clone(), d.replace('\n', " ")))).collect();
        docstring(out, "        ", Some(&doc), &docs);
        let args: Vec<String> = sig.args.iter().map(|a| format!("{0}={0}", a.name)).collect();
        let call = format!("_call_{name}({})", args.join(", "));
        let wait = if is_async { "await " } else { "" };
        writeln!(out, "        return {wait}self._call({call}, timeout_ms)").unwrap();
    }

    /// The module-level builder of an operation's request, its reader and its error table.
    fn call_fn(&self, out: &mut String, op: &Operation, sig: &Sig, name: &str) {
        let params: Vec<String> = sig.args.iter().map(|a| format!("{}: {}", a.name, a.declared())).collect();
        let sig_params = if params.is_empty() { String::new() } else { format!("*, {}", params.join(", ")) };
        writeln!(out, "\n").unwrap();
        writeln!(out, "def _call_{name}({sig_params}) -> _rt.Call[{}]:", sig.ret).unwrap();
        let arg_of = |p: &Param| {
            sig.args
                .iter()
                .find(|a| matches!(&a.what, What::Param(q) if q.name == p.name && q.location == p.location))
                .map(|a| a.name.clone())
                .expect("every param has an argument")
        };
        // The path, its parameters percent-encoded.
        let mut path = String::new();
        let mut rest = op.path.as_str();
        let mut pieces: Vec<String> = Vec::new();
        while let Some(start) = rest.find('{') {
            let Some(end) = rest[start..].find('}') else { break };
            path.push_str(&rest[..start]);
            if !path.is_empty() {
                pieces.push(py_str(&path));
                path.clear();
            }
            let var = &rest[start + 1..start + end];
            let p = op.params.iter().find(|p| p.location == In::Path && p.name == var).expect("path parameters are checked");
            pieces.push(format!("_rt.path({})", arg_of(p)));
            rest = &rest[start + end + 1..];
        }
        path.push_str(rest);
        if !path.is_empty() || pieces.is_empty() {
            pieces.push(py_str(&path));
        }
        let mut kwargs: Vec<String> = Vec::new();
        let queries: Vec<&Param> = op.params.iter().filter(|p| p.location == In::Query).collect();
        if !queries.is_empty() {
            writeln!(out, "    params: List[Tuple[str, str]] = []").unwrap();
            for p in queries {
                let sep = match p.style {
                    Style::Repeat => "None",
                    Style::Comma => "\",\"",
                    Style::Space => "\" \"",
                    Style::Pipe => "\"|\"",
                };
                writeln!(out, "    _rt.query(params, {}, {}, {sep})", py_str(&p.name), arg_of(p)).unwrap();
            }
            kwargs.push("params=params".into());
        }
        let headers: Vec<&Param> = op.params.iter().filter(|p| p.location == In::Header && !p.idempotency_key).collect();
        if !headers.is_empty() {
            writeln!(out, "    headers: List[Tuple[str, str]] = []").unwrap();
            for p in headers {
                writeln!(out, "    _rt.header(headers, {}, {})", py_str(&p.name), arg_of(p)).unwrap();
            }
            kwargs.push("headers=headers".into());
        }
        if let Some(a) = sig.args.iter().find(|a| matches!(a.what, What::Body(_))) {
            kwargs.push(format!("json=_rt.dump({})", a.name));
        }
        if let Some(p) = op.params.iter().find(|p| p.idempotency_key) {
            let a = arg_of(p);
            let value = if matches!(p.ty, Ty::String) || matches!(&p.ty, Ty::Nullable(t) if **t == Ty::String) {
                a
            } else {
                format!("None if {a} is None else _rt.text({a})")
            };
            kwargs.push(format!("idempotency_key={value}"));
        }
        let errors = if sig.raises.is_empty() {
            "{}".to_string()
        } else {
            format!("{{{}}}", sig.raises.iter().map(|(n, s)| format!("{}: _e.{n}.from_error", py_str(&s.key()))).collect::<Vec<_>>().join(", "))
        };
        let mut args = vec![py_str(&op.method), pieces.join(" + "), py_str(&op.id), format!("_decode_{name}"), errors];
        args.extend(kwargs);
        writeln!(out, "    return _rt.Call({})", args.join(", ")).unwrap();
        // The answer's reader.
        writeln!(out, "\n").unwrap();
        writeln!(out, "def _decode_{name}(resp: Response) -> {}:", sig.ret).unwrap();
        let read = |c: &Content| match c {
            Content::None => "None".to_string(),
            Content::Other(_) => "resp.content".to_string(),
            Content::Json(t) => self.read_as(t, Mode::Out, "_m.", "_rt.json_body(resp)", "\"\""),
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
                    Status::Code(code) => writeln!(out, "    if resp.status == {code}:").unwrap(),
                    Status::Range(d) => writeln!(out, "    if resp.status // 100 == {d}:").unwrap(),
                    Status::Default => continue,
                }
                writeln!(out, "        return {}", read(c)).unwrap();
            }
        }
        match distinct.first() {
            Some(c) => writeln!(out, "    return {}", read(c)).unwrap(),
            None => writeln!(out, "    return None").unwrap(),
        }
    }

    // ---- __init__.py ----

    fn init(&self) -> String {
        let api = self.api;
        let mut out = String::new();
        writeln!(out, "{}", self.header()).unwrap();
        let mut doc = format!(
            "Typed clients of the ``{}`` service, generated from {} ({}{}, OpenAPI {}).\n\n``{}(harness_client)`` and ``Async{}(harness_async_client)``; models in ``.models``, typed errors in ``.errors``.",
            self.opts.service,
            self.opts.source,
            one_line(&api.title),
            if api.api_version.is_empty() { String::new() } else { format!(" {}", one_line(&api.api_version)) },
            api.version,
            self.client,
            self.client,
        );
        write!(doc, "\n\nOperations: {} generated, {} refused.", api.operations.len(), api.refused.len()).unwrap();
        if !api.refused.is_empty() {
            doc.push_str(" Refused (not generated):\n");
            for r in &api.refused {
                let id = r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
                write!(doc, "\n- {} {}{id}: {}", r.method, r.path, r.reason).unwrap();
            }
        }
        docstring(&mut out, "", Some(&doc), &[]);
        writeln!(out).unwrap();
        let package = &self.opts.package;
        writeln!(out, "try:").unwrap();
        writeln!(out, "    from harness import _openapi as _rt").unwrap();
        writeln!(out, "except ImportError:  # a harness-sdk from before the typed clients").unwrap();
        writeln!(
            out,
            "    raise ImportError({}) from None",
            py_str(&format!("{package} needs harness._openapi, the runtime of the clients `harness codegen` writes, and the installed harness-sdk has none: upgrade harness-sdk"))
        )
        .unwrap();
        writeln!(out).unwrap();
        writeln!(out, "_rt.require({CONTRACT}, {})", py_str(package)).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "from harness._openapi import UNSET as UNSET, Unset as Unset").unwrap();
        writeln!(out, "from .client import Async{0} as Async{0}, {0} as {0}", self.client).unwrap();
        let mut names: Vec<String> = vec![self.client.clone(), format!("Async{}", self.client), "UNSET".into(), "Unset".into()];
        if !self.errors.is_empty() {
            writeln!(out, "from .errors import (").unwrap();
            for e in &self.errors {
                writeln!(out, "    {0} as {0},", e.name).unwrap();
                names.push(e.name.clone());
            }
            writeln!(out, ")").unwrap();
        }
        if !self.written.is_empty() {
            writeln!(out, "from .models import (").unwrap();
            for &(i, m) in &self.written {
                writeln!(out, "    {0} as {0},", self.name(i, m)).unwrap();
                names.push(self.name(i, m).to_string());
            }
            writeln!(out, ")").unwrap();
        }
        writeln!(out, "\n__all__ = [").unwrap();
        for n in names {
            writeln!(out, "    {},", py_str(&n)).unwrap();
        }
        writeln!(out, "]").unwrap();
        out
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
    Body(#[allow(dead_code)] Ty),
}

struct Arg {
    name: String,
    ty: String,
    required: bool,
    doc: Option<String>,
    what: What,
}

impl Arg {
    /// The argument's declared type: `Optional[...]` unless it is required (or holds None).
    fn declared(&self) -> String {
        if self.required || self.ty.starts_with("Optional[") || self.ty == "Any" {
            self.ty.clone()
        } else {
            format!("Optional[{}]", self.ty)
        }
    }
}

/// The import lines a module's code needs: only the names it uses (pyright --strict rejects an
/// unused import), grouped as the standard library, harness, then the package's own modules.
fn imports(code: &str) -> String {
    let used = used_names(code);
    let has = |n: &&str| used.contains(*n);
    let mut groups: Vec<Vec<String>> = vec![vec!["from __future__ import annotations".into()]];
    let mut std: Vec<String> = Vec::new();
    if has(&"_dt") {
        std.push("import datetime as _dt".into());
    }
    if has(&"_uuid") {
        std.push("import uuid as _uuid".into());
    }
    let dataclasses: Vec<&str> = [("dataclass", "dataclass"), ("_field", "field as _field")].iter().filter(|(n, _)| has(n)).map(|(_, i)| *i).collect();
    if !dataclasses.is_empty() {
        std.push(format!("from dataclasses import {}", dataclasses.join(", ")));
    }
    let typing: Vec<&str> =
        ["Any", "ClassVar", "Dict", "FrozenSet", "List", "Literal", "Optional", "Sequence", "Tuple", "Union", "cast"].into_iter().filter(|n| has(n)).collect();
    if !typing.is_empty() {
        std.push(format!("from typing import {}", typing.join(", ")));
    }
    groups.push(std);
    let mut harness: Vec<String> = Vec::new();
    if has(&"harness") {
        harness.push("import harness".into());
    }
    let names: Vec<&str> = ["AuthError", "HarnessError", "HttpStatusError", "RateLimitedError", "Response"].into_iter().filter(|n| has(n)).collect();
    if !names.is_empty() {
        harness.push(format!("from harness import {}", names.join(", ")));
    }
    if has(&"_rt") {
        harness.push("from harness import _openapi as _rt".into());
    }
    groups.push(harness);
    groups.push([("_e", "from . import errors as _e"), ("_m", "from . import models as _m")].iter().filter(|(n, _)| has(n)).map(|(_, i)| i.to_string()).collect());
    let mut out = String::new();
    for g in groups.into_iter().filter(|g| !g.is_empty()) {
        for line in g {
            writeln!(out, "{line}").unwrap();
        }
        writeln!(out).unwrap();
    }
    out.pop();
    out
}

/// The names Python code refers to: identifiers outside strings and comments that are not an
/// attribute (`x.name`). The generated code's identifiers are ASCII.
fn used_names(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'"' || c == b'\'' {
            let triple = b[i..].starts_with(&[c, c, c]);
            i += if triple { 3 } else { 1 };
            while i < b.len() {
                if b[i] == b'\\' {
                    i += 2;
                } else if triple && b[i..].starts_with(&[c, c, c]) {
                    i += 3;
                    break;
                } else if !triple && b[i] == c {
                    i += 1;
                    break;
                } else {
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if start == 0 || b[start - 1] != b'.' {
                out.insert(code[start..i].to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}



/// Whether a named type is an alias of a nullable type (its reader returns `Optional`).
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


fn field_doc(p: &Prop, d: &str) -> String {
    let mut s = d.replace('\n', " ");
    if p.deprecated {
        s = format!("Deprecated. {s}");
    }
    if p.read_only {
        s.push_str(" (read-only)");
    }
    if p.write_only {
        s.push_str(" (write-only)");
    }
    s.trim().to_string()
}

/// How `to_json` writes a field: as is when it is JSON already.
fn dumped(t: &Ty, v: &str) -> String {
    match t {
        Ty::String | Ty::Int { .. } | Ty::Number | Ty::Bool | Ty::Literals(_) => v.to_string(),
        Ty::Nullable(inner) if matches!(**inner, Ty::String | Ty::Int { .. } | Ty::Number | Ty::Bool | Ty::Literals(_)) => v.to_string(),
        _ => format!("_rt.dump({v})"),
    }
}

/// `createOrder` -> `create_order`, `getHTTPStatus` -> `get_http_status`, `post-payments` ->
/// `post_payments`, `messaging.v1` -> `messaging_v1`.
pub fn snake(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            continue;
        }
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if (prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower)) && !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() {
        "field".into()
    } else if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("n_{out}")
    } else {
        out
    }
}

/// A Python identifier for a field, argument or method: not a keyword or a reserved name.
fn ident(s: &str, extra: &[&str]) -> String {
    if KEYWORDS.contains(&s) || FIELD_RESERVED.contains(&s) || extra.contains(&s) {
        format!("{s}_")
    } else {
        s.to_string()
    }
}

fn unique_ident(wanted: &str, taken: &mut Vec<String>) -> String {
    let base = ident(wanted, &[]);
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// A Python string literal (JSON's escapes are Python's).
pub fn py_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn py_value(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        other => py_str(&other.to_string()),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A docstring: the text, then a line per documented field (`name`: doc).
fn docstring(out: &mut String, indent: &str, doc: Option<&str>, fields: &[(String, String)]) {
    let mut lines: Vec<String> = doc.map(|d| d.lines().map(|l| l.trim_end().to_string()).collect()).unwrap_or_default();
    if !fields.is_empty() {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        for (n, d) in fields {
            lines.push(format!("``{n}``: {d}").trim_end().to_string());
        }
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    if lines.is_empty() {
        return;
    }
    let esc = |l: &str| {
        let l = l.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
        l.chars().map(|c| if c.is_control() && c != '\t' { ' ' } else { c }).collect::<String>()
    };
    let mut text = String::new();
    for (k, l) in lines.iter().enumerate() {
        if k > 0 {
            text.push('\n');
            if !l.is_empty() {
                text.push_str(indent);
            }
        }
        text.push_str(&esc(l));
    }
    if text.ends_with('"') {
        text.pop();
        text.push_str("\\\"");
    }
    if lines.len() == 1 {
        writeln!(out, "{indent}\"\"\"{text}\"\"\"").unwrap();
    } else {
        writeln!(out, "{indent}\"\"\"{text}\n{indent}\"\"\"").unwrap();
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

fn reason_text(code: u16) -> Option<String> {
    http_reason(code).map(str::to_string)
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_names() {
        assert_eq!(snake("createOrder"), "create_order");
        assert_eq!(snake("getHTTPStatus"), "get_http_status");
        assert_eq!(snake("post-payments"), "post_payments");
        assert_eq!(snake("ListService"), "list_service");
        assert_eq!(snake("airline.agency_invoice_number"), "airline_agency_invoice_number");
        assert_eq!(snake("base64Data"), "base64_data");
        assert_eq!(snake("3ds"), "n_3ds");
        assert_eq!(snake("_links"), "links");
        assert_eq!(snake("get order (by id)/v2"), "get_order_by_id_v2");
        assert_eq!(snake("créer commande"), "cr_er_commande");
        assert_eq!(snake("!!!"), "field");
    }

    #[test]
    fn a_module_imports_only_the_names_its_code_uses() {
        let code = "class A:\n    \"\"\"Any List of \\\"\"\" Dict\"\"\"\n    x: Optional[_dt.date] = None  # Union\n    y: str = 'cast(Tuple)'\n\n    def f(self) -> _m.List:\n        return _rt.Literal\n";
        let used = used_names(code);
        assert!(["Optional", "_dt", "_m", "_rt"].iter().all(|n| used.contains(*n)), "{used:?}");
        assert!(!["Any", "List", "Dict", "Union", "cast", "Tuple", "Literal", "date"].iter().any(|n| used.contains(*n)), "{used:?}");
        assert_eq!(
            imports(code),
            "from __future__ import annotations\n\nimport datetime as _dt\nfrom typing import Optional\n\nfrom harness import _openapi as _rt\n\nfrom . import models as _m\n"
        );
    }
}
