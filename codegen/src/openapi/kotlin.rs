//! A Kotlin package per service, on the JVM binding (`dev.harness.HarnessClient`):
//! `Models.kt` (a data class per object schema, an enum class per named string enum, a
//! sealed interface per `oneOf`/`anyOf`, each with `fromJson`/`toJson` and a
//! kotlinx.serialization serializer), `Errors.kt` (a sealed error class per service, a class
//! per declared error response with its body as `model`, and a sealed interface per operation
//! listing the errors it declares), `<Service>Client.kt` (a `suspend` method per operation and
//! a `CompletableFuture` twin for Java, `<name>Async`). What they share (the readers, the
//! writers, the call path) is the binding's `dev.harness.openapi`, not copied into each
//! package; a client checks at construction that the binding provides the contract it was
//! written for. Depends on the binding alone (it brings kotlinx.serialization and coroutines).
//!
//! Choices: kotlinx.serialization because the binding already depends on it and its compiler
//! plugin writes serializers at compile time (no reflection); each model's serializer is the
//! generated reader over the JSON tree, so drift names its JSON pointer (the plugin's own
//! serializers cannot, nor flatten `additionalProperties`, nor read a tagged union whose
//! members carry the tag); enums are the plugin's, with `@SerialName` per wire value.
//! `date-time` is `OffsetDateTime`, `date` `LocalDate`, `uuid` `UUID`, `byte` `ByteArray`,
//! int64 (and integers without a format) `Long`, int32 `Int`, a value of any type
//! `JsonElement`; an inline enum is its base type, checked on read. Naming, the request and
//! response forms of `readOnly`/`writeOnly` schemas (`Order`, `OrderInput`), defaults and
//! tags, typed errors and the endpoint label (the operationId) are the Python emitter's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::path::PathBuf;

use serde_json::Value;

use super::python::snake;
use harness_openapi::model::{Api, Content, Def, In, Operation, Param, Prop, Status, Style, Ty};
use super::common::{self, error_responses, http_reason, keeps, Mode};
use harness_openapi::names::{camel, pascal};

/// How a package is written.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Harness service the clients call (the config's `services.NAME`).
    pub service: String,
    /// The Kotlin package (`com.example.orders`); its directory is the package's path.
    pub package: String,
    /// The spec's file name, for the header.
    pub source: String,
}

/// The runtime contract the clients are written for (`dev.harness.openapi.CONTRACT` in the binding).
const CONTRACT: u32 = 1;

/// Kotlin's hard keywords (and soft ones that break a declaration): a name is backticked.
const KEYWORDS: [&str; 28] = [
    "as", "break", "class", "continue", "do", "else", "false", "for", "fun", "if", "in", "interface", "is", "null", "object", "package", "return", "super", "this",
    "throw", "true", "try", "typealias", "typeof", "val", "var", "when", "while",
];

/// Java's keywords: a method Java calls may not be one.
const JAVA_KEYWORDS: [&str; 53] = [
    "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const", "continue", "default", "do", "double", "else", "enum", "extends",
    "final", "finally", "float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface", "long", "native", "new", "package", "private",
    "protected", "public", "return", "short", "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws", "transient", "try", "void",
    "volatile", "while", "true", "false", "null",
];

/// Members every model has, or `Any` has: a property may not take them.
const MEMBER_RESERVED: [&str; 6] = ["copy", "toJson", "equals", "hashCode", "toString", "serializer"];

/// Names the generated files use from Kotlin, the JDK, kotlinx and the binding: a type may not take them.
const TYPE_RESERVED: [&str; 52] = [
    "Any", "Array", "ArrayList", "Base64", "BigDecimal", "BigInteger", "Boolean", "ByteArray", "Char", "Charsets", "Comparable", "CompletableFuture",
    "CoroutineScope", "Deprecated", "Dispatchers", "Double", "Enum", "Exception", "Float", "HarnessClient", "HarnessErrorInfo", "HarnessException",
    "HarnessRequest", "HarnessResponse", "Int", "Json", "JsonArray", "JsonElement", "JsonNull", "JsonObject", "JsonPrimitive", "JsonRead", "JvmOverloads",
    "JvmStatic", "KSerializer", "LinkedHashMap", "List", "LocalDate", "Long", "Map", "ModelSerializer", "Nothing", "Number", "OffsetDateTime", "Operation", "Pair",
    "Regex", "SerialName", "Serializable", "Set", "String", "UUID",
];

/// More names a type may not take: Kotlin's own that the files use implicitly.
const TYPE_RESERVED_MORE: [&str; 6] = ["Unit", "Throwable", "StringBuilder", "Suppress", "Result", "Companion"];

/// The package's files, relative to the output directory (`com/example/orders/...`).
pub fn emit(api: &Api, opts: &Options) -> Vec<(PathBuf, String)> {
    let kt = Kt::new(api, opts);
    let dir: PathBuf = opts.package.split('.').collect();
    vec![
        (dir.join(format!("{}.kt", kt.client)), kt.client_file()),
        (dir.join("Errors.kt"), kt.errors_file()),
        (dir.join("Models.kt"), kt.models_file()),
    ]
}

/// Whether `p` is a package name Kotlin and Java accept: dot-separated identifiers, no keyword.
pub fn valid_package(p: &str) -> bool {
    !p.is_empty()
        && p.split('.').all(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !KEYWORDS.contains(&s)
                && !JAVA_KEYWORDS.contains(&s)
        })
}

/// The package for a service when `--package` is not given: its name in lower case, letters
/// and digits (`user-accounts` -> `useraccounts`).
pub fn default_package(service: &str) -> String {
    let p: String = service.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    if p.is_empty() || p.starts_with(|c: char| c.is_ascii_digit()) || !valid_package(&p) {
        format!("api{p}")
    } else {
        p
    }
}

/// One typed error class: a status key and the body's type.
struct ErrorClass {
    name: String,
    status: Status,
    content: Content,
    /// The operations' sealed interfaces it implements.
    ops: Vec<String>,
}

/// What a named union's member is in Kotlin: a class that implements the interface, or a wrapper.
enum Member {
    Class(usize),
    Wrapper(String),
}

struct Kt<'a> {
    api: &'a Api,
    opts: &'a Options,
    split: Vec<bool>,
    names: HashMap<(usize, Mode), String>,
    written: Vec<(usize, Mode)>,
    tag_defaults: HashMap<usize, (String, String)>,
    /// A named union's members, by (type, form).
    members: HashMap<(usize, Mode), Vec<Member>>,
    /// The sealed interfaces each (object type, form) implements.
    implements: HashMap<(usize, Mode), Vec<String>>,
    /// Each enum's entry names, by wire value.
    entries: HashMap<usize, Vec<(String, String)>>,
    errors: Vec<ErrorClass>,
    /// Each operation's sealed error interface, when it declares errors.
    op_errors: Vec<Option<String>>,
    methods: Vec<String>,
    client: String,
    /// The service's base error class.
    base_error: String,
    /// Serializer object names, by (type, form).
    serializers: HashMap<(usize, Mode), String>,
    /// Aliases that are themselves through other aliases only (`Tree: array of Tree`): Kotlin's
    /// typealias cannot recurse, so each is a `JsonElement`, checked as its type when read.
    cyclic: BTreeSet<usize>,
}

fn is_enum(api: &Api, i: usize) -> bool {
    matches!(&api.types[i].def, Def::Alias(Ty::Literals(vs)) if !vs.is_empty() && vs.iter().all(Value::is_string))
}

impl<'a> Kt<'a> {
    fn new(api: &'a Api, opts: &'a Options) -> Kt<'a> {
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
        let client = format!("{}Client", pascal(&harness_openapi::schema::ident_chars(&opts.service)));
        let base_error = format!("{}Error", pascal(&harness_openapi::schema::ident_chars(&opts.service)));
        let mut kt = Kt {
            api,
            opts,
            split,
            names: HashMap::new(),
            written: Vec::new(),
            tag_defaults: HashMap::new(),
            members: HashMap::new(),
            implements: HashMap::new(),
            entries: HashMap::new(),
            errors: Vec::new(),
            op_errors: Vec::new(),
            methods: Vec::new(),
            client,
            base_error,
            serializers: HashMap::new(),
            cyclic: BTreeSet::new(),
        };
        kt.cyclic = (0..n).filter(|i| alias_cycle(api, *i)).collect();
        kt.reach();
        kt.name_types();
        kt.tags();
        kt.name_errors();
        kt.name_methods();
        kt
    }

    fn mode(&self, i: usize, m: Mode) -> Mode {
        if self.split[i] {
            m
        } else {
            Mode::Out
        }
    }

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
        let mut taken: BTreeSet<String> = TYPE_RESERVED.iter().chain(TYPE_RESERVED_MORE.iter()).map(|s| s.to_string()).collect();
        taken.insert(self.client.clone());
        taken.insert(self.base_error.clone());
        // The JVM classes that hold each file's top-level functions.
        for facade in ["ModelsKt".to_string(), "ErrorsKt".to_string(), format!("{}Kt", self.client)] {
            taken.insert(facade);
        }
        let reserved = taken.clone();
        let mut unique = |wanted: String| {
            let base = if reserved.contains(&wanted) || KEYWORDS.contains(&wanted.as_str()) { format!("{wanted}_") } else { wanted };
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
        // Serializer objects and union wrappers take names of their own.
        for (i, m) in self.written.clone() {
            let name = self.names[&(i, m)].clone();
            match &self.api.types[i].def {
                Def::Object { .. } => {
                    let s = unique(format!("{name}Serializer"));
                    self.serializers.insert((i, m), s);
                }
                Def::Union { members, .. } => {
                    let s = unique(format!("{name}Serializer"));
                    self.serializers.insert((i, m), s);
                    let mut list = Vec::new();
                    let mut classes = BTreeSet::new();
                    for t in members {
                        match t {
                            Ty::Named(j) if matches!(self.api.types[*j].def, Def::Object { .. }) => {
                                if classes.insert(*j) {
                                    list.push(Member::Class(*j));
                                }
                            }
                            t => {
                                let what = match t {
                                    Ty::Named(j) => self.names[&(*j, self.mode(*j, m))].clone(),
                                    t => describe(t),
                                };
                                list.push(Member::Wrapper(unique(format!("{name}{what}"))));
                            }
                        }
                    }
                    self.members.insert((i, m), list);
                }
                Def::Alias(_) => {}
            }
        }
        for (&(i, m), list) in &self.members {
            for mem in list {
                if let Member::Class(j) = mem {
                    self.implements.entry((*j, self.mode(*j, m))).or_default().push(self.names[&(i, m)].clone());
                }
            }
        }
        for v in self.implements.values_mut() {
            v.sort();
            v.dedup();
        }
        for &(i, _) in &self.written {
            if is_enum(self.api, i) {
                let Def::Alias(Ty::Literals(vs)) = &self.api.types[i].def else { continue };
                let mut used = BTreeSet::new();
                let mut list = Vec::new();
                for v in vs {
                    let s = v.as_str().unwrap_or_default().to_string();
                    let c: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
                    let c = c.trim_matches('_').to_string();
                    let base = if c.is_empty() {
                        "EMPTY".to_string()
                    } else if c.starts_with(|ch: char| ch.is_ascii_digit()) {
                        format!("V{c}")
                    } else {
                        c
                    };
                    let mut e = base.clone();
                    let mut n = 2;
                    while !used.insert(e.clone()) {
                        e = format!("{base}_{n}");
                        n += 1;
                    }
                    list.push((s, e));
                }
                self.entries.insert(i, list);
            }
        }
    }


    fn taken_types(&self) -> BTreeSet<String> {
        let mut taken: BTreeSet<String> = self.names.values().cloned().collect();
        taken.extend(self.serializers.values().cloned());
        for list in self.members.values() {
            for m in list {
                if let Member::Wrapper(w) = m {
                    taken.insert(w.clone());
                }
            }
        }
        taken.extend(TYPE_RESERVED.iter().chain(TYPE_RESERVED_MORE.iter()).map(|s| s.to_string()));
        taken.insert(self.client.clone());
        taken.insert(self.base_error.clone());
        taken.extend(["ModelsKt".to_string(), "ErrorsKt".to_string(), format!("{}Kt", self.client)]);
        taken
    }

    /// A union's member selected by exactly one tag value gets that value.
    fn tags(&mut self) {
        self.tag_defaults = common::tag_defaults(self.api, holds);
    }

    fn name_errors(&mut self) {
        let mut taken = self.taken_types();
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
                self.errors.push(ErrorClass { name, status, content, ops: Vec::new() });
            }
        }
        for op in &self.api.operations {
            let raises = self.raises(op);
            if raises.is_empty() {
                self.op_errors.push(None);
                continue;
            }
            let wanted = format!("{}Error", pascal(&camel(&snake(&op.id))));
            let mut name = wanted.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{wanted}{n}");
                n += 1;
            }
            for r in raises {
                let k = self.errors.iter().position(|e| e.status == r.status && e.content == r.content).expect("every error response has a class");
                self.errors[k].ops.push(name.clone());
            }
            self.op_errors.push(Some(name));
        }
    }

    /// An operation's declared error responses that are raised as typed errors.
    fn raises(&self, op: &'a Operation) -> Vec<&'a harness_openapi::model::Response> {
        let default_is_success = !op.responses.iter().any(|r| r.status.success()) && op.responses.iter().any(|r| r.status == Status::Default);
        error_responses(op).filter(|r| !(default_is_success && r.status == Status::Default)).collect()
    }

    fn error_class(&self, status: Status, content: &Content) -> &ErrorClass {
        self.errors.iter().find(|e| e.status == status && e.content == *content).expect("every error response has a class")
    }

    fn name_methods(&mut self) {
        let mut taken: BTreeSet<String> = ["equals", "hashCode", "toString", "getClass", "wait", "notify", "notifyAll", "clone", "finalize"].iter().map(|s| s.to_string()).collect();
        for op in &self.api.operations {
            let mut wanted = camel(&snake(&op.id));
            if KEYWORDS.contains(&wanted.as_str()) || JAVA_KEYWORDS.contains(&wanted.as_str()) || taken.contains(&wanted) && !self.methods.contains(&wanted) {
                wanted.push('_');
            }
            let mut name = wanted.clone();
            let mut n = 2;
            while taken.contains(&name) || taken.contains(&twin(&name)) {
                name = format!("{wanted}{n}");
                n += 1;
            }
            taken.insert(name.clone());
            taken.insert(twin(&name));
            self.methods.push(name);
        }
    }

    fn header(&self) -> String {
        let api = self.api;
        format!(
            "// Generated by `harness codegen` from {} ({} {}, OpenAPI {}); do not edit. To regenerate: harness codegen --spec {} --lang kotlin --service {} --package {}",
            one_line(&self.opts.source),
            one_line(&api.title),
            one_line(&api.api_version),
            api.version,
            one_line(&self.opts.source),
            one_line(&self.opts.service),
            self.opts.package
        )
    }

    fn preamble(&self, out: &mut String, imports: &[&str]) {
        writeln!(out, "{}", self.header()).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "@file:Suppress(\"RedundantVisibilityModifier\", \"unused\", \"FunctionName\", \"ObjectPropertyName\", \"ClassName\", \"PropertyName\", \"EnumEntryName\", \"LocalVariableName\", \"RemoveRedundantBackticks\")").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "package {}", self.opts.package).unwrap();
        writeln!(out).unwrap();
        for i in imports {
            writeln!(out, "import {i}").unwrap();
        }
        writeln!(out, "import dev.harness.openapi.*").unwrap();
    }

    fn name(&self, i: usize, m: Mode) -> &str {
        &self.names[&(i, self.mode(i, m))]
    }

    /// A type as Kotlin writes it.
    fn ty(&self, t: &Ty, m: Mode) -> String {
        match t {
            Ty::String => "String".into(),
            Ty::Int { wide: true } => "Long".into(),
            Ty::Int { wide: false } => "Int".into(),
            Ty::Number => "Double".into(),
            Ty::Bool => "Boolean".into(),
            Ty::DateTime => "OffsetDateTime".into(),
            Ty::Date => "LocalDate".into(),
            Ty::Uuid => "UUID".into(),
            Ty::Bytes => "ByteArray".into(),
            Ty::Any => "JsonElement".into(),
            Ty::Array(t) => format!("List<{}>", self.ty(t, m)),
            Ty::Map(t) => format!("Map<String, {}>", self.ty(t, m)),
            Ty::Named(i) if self.cyclic.contains(i) => "JsonElement".into(),
            Ty::Named(i) => self.name(*i, m).to_string(),
            Ty::Nullable(t) => {
                let inner = self.ty(t, m);
                if inner.ends_with('?') {
                    inner
                } else {
                    format!("{inner}?")
                }
            }
            Ty::Literals(vs) => literal_base(vs).into(),
            Ty::Union(_) => "JsonElement".into(),
        }
    }

    /// Whether a type's Kotlin form already holds null.
    fn nullable(&self, t: &Ty) -> bool {
        match t {
            Ty::Nullable(_) => true,
            Ty::Named(i) => match &self.api.types[*i].def {
                Def::Alias(t) => self.nullable(t),
                _ => false,
            },
            _ => false,
        }
    }

    /// An expression reading `v` (a JsonElement) at pointer `at` as `t`; `d` numbers nested lambdas.
    fn read(&self, t: &Ty, m: Mode, v: &str, at: &str, d: usize) -> String {
        let (v2, a2) = (format!("v{d}"), format!("a{d}"));
        match t {
            Ty::String => format!("jsonString({v}, {at})"),
            Ty::Int { wide: true } => format!("jsonLong({v}, {at})"),
            Ty::Int { wide: false } => format!("jsonInt({v}, {at})"),
            Ty::Number => format!("jsonDouble({v}, {at})"),
            Ty::Bool => format!("jsonBoolean({v}, {at})"),
            Ty::DateTime => format!("jsonDateTime({v}, {at})"),
            Ty::Date => format!("jsonDate({v}, {at})"),
            Ty::Uuid => format!("jsonUuid({v}, {at})"),
            Ty::Bytes => format!("jsonBytes({v}, {at})"),
            Ty::Any => format!("jsonAny({v}, {at})"),
            Ty::Array(t) => format!("jsonList({v}, {at}) {{ {v2}, {a2} -> {} }}", self.read(t, m, &v2, &a2, d + 1)),
            Ty::Map(t) => format!("jsonMap({v}, {at}) {{ {v2}, {a2} -> {} }}", self.read(t, m, &v2, &a2, d + 1)),
            Ty::Nullable(t) => format!("jsonNullable({v}, {at}) {{ {v2}, {a2} -> {} }}", self.read(t, m, &v2, &a2, d + 1)),
            Ty::Named(i) => match &self.api.types[*i].def {
                Def::Alias(_) if !is_enum(self.api, *i) => format!("read{}({v}, {at})", self.name(*i, m)),
                _ => format!("{}.fromJson({v}, {at})", self.name(*i, m)),
            },
            Ty::Literals(vs) => {
                let list = format!("listOf({})", vs.iter().map(json_primitive).collect::<Vec<_>>().join(", "));
                let base = literal_base(vs);
                match base {
                    "String" => format!("jsonLiteral({v}, {at}, {list}).content"),
                    "Long" => format!("jsonLiteral({v}, {at}, {list}).content.toLong()"),
                    "Boolean" => format!("(jsonLiteral({v}, {at}, {list}).content == \"true\")"),
                    _ => format!("jsonLiteral({v}, {at}, {list})"),
                }
            }
            Ty::Union(ts) => {
                let shown: Vec<String> = ts.iter().map(|t| self.ty(t, m)).collect();
                let members: Vec<String> = ts.iter().map(|t| format!("Pair({{ {v2}, {a2} -> {}; {v2} }}, null)", self.read(t, m, &v2, &a2, d + 1))).collect();
                format!("jsonBestOf({v}, {at}, listOf<Pair<JsonRead<JsonElement>, Set<String>?>>({}), {})", members.join(", "), kt_str(&shown.join(" or ")))
            }
        }
    }

    /// An expression writing `x` (of type `t`) as a JsonElement.
    fn write(&self, t: &Ty, m: Mode, x: &str, d: usize) -> String {
        let e = format!("e{d}");
        match t {
            Ty::String | Ty::Int { .. } | Ty::Number | Ty::Bool => format!("JsonPrimitive({x})"),
            Ty::DateTime => format!("JsonPrimitive(dateTimeText({x}))"),
            Ty::Date | Ty::Uuid => format!("JsonPrimitive({x}.toString())"),
            Ty::Bytes => format!("JsonPrimitive(bytesText({x}))"),
            Ty::Any | Ty::Union(_) => x.to_string(),
            Ty::Array(t) => format!("JsonArray({x}.map {{ {e} -> {} }})", self.write(t, m, &e, d + 1)),
            Ty::Map(t) => format!("JsonObject({x}.mapValues {{ {e} -> {} }})", self.write(t, m, &format!("{e}.value"), d + 1)),
            Ty::Nullable(t) => format!("({x}?.let {{ {e} -> {} }} ?: JsonNull)", self.write(t, m, &e, d + 1)),
            Ty::Named(i) => match &self.api.types[*i].def {
                Def::Alias(_) if !is_enum(self.api, *i) => format!("write{}({x})", self.name(*i, m)),
                _ => format!("{x}.toJson()"),
            },
            Ty::Literals(vs) => match literal_base(vs) {
                "JsonElement" => x.to_string(),
                _ => format!("JsonPrimitive({x})"),
            },
        }
    }

    /// An expression writing `x` (of type `t`, not null) as parameter text.
    fn text(&self, t: &Ty, x: &str, d: usize) -> String {
        let m = Mode::In;
        let e = format!("e{d}");
        match t {
            Ty::String => x.to_string(),
            Ty::Int { .. } | Ty::Number | Ty::Bool | Ty::Date | Ty::Uuid => format!("{x}.toString()"),
            Ty::DateTime => format!("dateTimeText({x})"),
            Ty::Bytes => format!("bytesText({x})"),
            Ty::Any | Ty::Union(_) => format!("paramText({x})"),
            Ty::Literals(vs) => match literal_base(vs) {
                "String" => x.to_string(),
                "JsonElement" => format!("paramText({x})"),
                _ => format!("{x}.toString()"),
            },
            Ty::Array(t) => format!("{x}.joinToString(\",\") {{ {e} -> {} }}", self.text(t, &e, d + 1)),
            Ty::Map(_) => format!("paramText({})", self.write(t, m, x, d)),
            Ty::Nullable(t) => format!("({x}?.let {{ {e} -> {} }} ?: \"\")", self.text(t, &e, d + 1)),
            Ty::Named(i) => match &self.api.types[*i].def {
                _ if is_enum(self.api, *i) => format!("{x}.wire"),
                _ if self.cyclic.contains(i) => format!("paramText({x})"),
                Def::Alias(inner) => self.text(inner, x, d),
                _ => format!("paramText({x}.toJson())"),
            },
        }
    }

    // ---- Models.kt ----

    fn models_file(&self) -> String {
        let mut out = String::new();
        self.preamble(
            &mut out,
            &[
                "kotlinx.serialization.KSerializer",
                "kotlinx.serialization.SerialName",
                "kotlinx.serialization.Serializable",
                "kotlinx.serialization.json.JsonArray",
                "kotlinx.serialization.json.JsonElement",
                "kotlinx.serialization.json.JsonNull",
                "kotlinx.serialization.json.JsonObject",
                "kotlinx.serialization.json.JsonPrimitive",
                "java.time.LocalDate",
                "java.time.OffsetDateTime",
                "java.util.UUID",
            ],
        );
        writeln!(out).unwrap();
        writeln!(out, "// The types of the `{}` service's operations, as its document declares them. Each has", one_line(&self.opts.service)).unwrap();
        writeln!(out, "// `fromJson` (HarnessException.Schema names the JSON pointer of the first value that does not").unwrap();
        writeln!(out, "// match), `toJson`, and a kotlinx.serialization serializer that is those two (compile-time, no").unwrap();
        writeln!(out, "// reflection: `Json.decodeFromString(Order.serializer(), text)`).").unwrap();
        for &(i, m) in &self.written {
            match &self.api.types[i].def {
                Def::Object { props, additional } => self.class(&mut out, i, m, props, additional.as_ref()),
                Def::Union { members, tag } => self.union(&mut out, i, m, members, tag.as_ref()),
                Def::Alias(_) if is_enum(self.api, i) => self.enum_class(&mut out, i),
                Def::Alias(ty) => self.alias(&mut out, i, m, ty),
            }
        }
        out
    }

    fn enum_class(&self, out: &mut String, i: usize) {
        let t = &self.api.types[i];
        let name = self.name(i, Mode::Out);
        let entries = &self.entries[&i];
        writeln!(out).unwrap();
        kdoc(out, "", Some(t.doc.as_deref().unwrap_or(&format!("`{}` (at `{}`).", t.name, t.pointer))));
        writeln!(out, "@Serializable").unwrap();
        writeln!(out, "public enum class {name}(public val wire: String) {{").unwrap();
        for (wire, e) in entries {
            writeln!(out, "    @SerialName({0}) {e}({0}),", kt_str(wire)).unwrap();
        }
        writeln!(out, "    ;").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "    /** Its JSON value: the wire string. */").unwrap();
        writeln!(out, "    public fun toJson(): JsonElement = JsonPrimitive(wire)").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "    public companion object {{").unwrap();
        writeln!(out, "        /** Reads one from its JSON value; HarnessException.Schema names the value when it is none of them. */").unwrap();
        writeln!(out, "        @JvmStatic").unwrap();
        writeln!(out, "        @JvmOverloads").unwrap();
        writeln!(out, "        public fun fromJson(data: JsonElement, at: String = \"\"): {name} {{").unwrap();
        let list = entries.iter().map(|(w, _)| format!("JsonPrimitive({})", kt_str(w))).collect::<Vec<_>>().join(", ");
        writeln!(out, "            val wire = jsonLiteral(data, at, listOf({list})).content").unwrap();
        writeln!(out, "            return entries.first {{ it.wire == wire }}").unwrap();
        writeln!(out, "        }}").unwrap();
        writeln!(out, "    }}").unwrap();
        writeln!(out, "}}").unwrap();
    }

    fn alias(&self, out: &mut String, i: usize, m: Mode, ty: &Ty) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        writeln!(out).unwrap();
        kdoc(out, "", Some(t.doc.as_deref().unwrap_or(&format!("`{}` (at `{}`).", t.name, t.pointer))));
        if self.cyclic.contains(&i) {
            writeln!(out, "public typealias {name} = JsonElement").unwrap();
            writeln!(out).unwrap();
            writeln!(out, "/** Checks [data] is a `{}` (a type that contains itself: Kotlin cannot name it) and returns it. */", kdoc_text(&self.ty(ty, m))).unwrap();
            writeln!(out, "internal fun read{name}(data: JsonElement, at: String): {name} {{").unwrap();
            writeln!(out, "    {}", self.read(ty, m, "data", "at", 1)).unwrap();
            writeln!(out, "    return data").unwrap();
            writeln!(out, "}}").unwrap();
            writeln!(out).unwrap();
            writeln!(out, "internal fun write{name}(x: {name}): JsonElement = x").unwrap();
            return;
        }
        writeln!(out, "public typealias {name} = {}", self.ty(ty, m)).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "internal fun read{name}(data: JsonElement, at: String): {name} = {}", self.read(ty, m, "data", "at", 1)).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "internal fun write{name}(x: {name}): JsonElement = {}", self.write(ty, m, "x", 1)).unwrap();
    }

    fn union(&self, out: &mut String, i: usize, m: Mode, members: &[Ty], tag: Option<&harness_openapi::model::Tag>) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        let list = &self.members[&(i, m)];
        // Each distinct member: how it reads `data` at `at`, its reader as a lambda, the keys it declares.
        let mut readers: Vec<(String, String, Option<String>)> = Vec::new();
        let mut shown: Vec<String> = Vec::new();
        let mut wrappers: Vec<(String, &Ty)> = Vec::new();
        // Each member of the document's list: its index in `readers`.
        let mut member_of: Vec<usize> = Vec::new();
        for ty in members {
            match ty {
                Ty::Named(j) if matches!(self.api.types[*j].def, Def::Object { .. }) => {
                    let idx = list.iter().position(|mm| matches!(mm, Member::Class(c) if c == j)).expect("each class member is listed");
                    if idx == readers.len() {
                        let cls = self.name(*j, m).to_string();
                        readers.push((format!("{cls}.fromJson(data, at)"), format!("{{ v, a -> {cls}.fromJson(v, a) }}"), Some(format!("{cls}.KEYS"))));
                        shown.push(cls);
                    }
                    member_of.push(idx);
                }
                ty => {
                    let idx = readers.len();
                    let Member::Wrapper(w) = &list[idx] else { unreachable!("members are named in order") };
                    readers.push((format!("{w}({})", self.read(ty, m, "data", "at", 1)), format!("{{ v, a -> {w}({}) }}", self.read(ty, m, "v", "a", 1)), None));
                    shown.push(self.ty(ty, m));
                    wrappers.push((w.clone(), ty));
                    member_of.push(idx);
                }
            }
        }
        let ser = &self.serializers[&(i, m)];
        writeln!(out).unwrap();
        let mut doc = t.doc.clone().unwrap_or_else(|| format!("`{}` (at `{}`).", t.name, t.pointer));
        write!(doc, "\n\nOne of: {}.", shown.iter().map(|s| format!("[{}]", s.trim_end_matches('?'))).collect::<Vec<_>>().join(", ")).unwrap();
        if let Some(tag) = tag {
            write!(doc, " Told apart by `{}`.", tag.property).unwrap();
        }
        kdoc(out, "", Some(&doc));
        writeln!(out, "@Serializable(with = {ser}::class)").unwrap();
        writeln!(out, "public sealed interface {name} {{").unwrap();
        writeln!(out, "    /** Its JSON value. */").unwrap();
        writeln!(out, "    public fun toJson(): JsonElement").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "    public companion object {{").unwrap();
        writeln!(out, "        /** Reads one from its JSON value; HarnessException.Schema names the first value that does not match. */").unwrap();
        writeln!(out, "        @JvmStatic").unwrap();
        writeln!(out, "        @JvmOverloads").unwrap();
        writeln!(out, "        public fun fromJson(data: JsonElement, at: String = \"\"): {name} {{").unwrap();
        let mut done = false;
        if let Some(tag) = tag {
            writeln!(out, "            when (jsonTag(data, {})) {{", kt_str(&tag.property)).unwrap();
            for (mi, idx) in member_of.iter().enumerate() {
                let values: Vec<String> = tag.values.iter().filter(|(_, x)| *x == mi).map(|(v, _)| kt_str(v)).collect();
                if values.is_empty() {
                    continue;
                }
                writeln!(out, "                {} -> return {}", values.join(", "), readers[*idx].0).unwrap();
            }
            writeln!(out, "            }}").unwrap();
            if tag.declared {
                let all: Vec<String> = tag.values.iter().map(|(v, _)| json_text(v)).collect();
                let expected = kt_str(&format!("one of {}", all.join(", ")));
                let key = kt_str(&tag.property);
                writeln!(out, "            if (data is JsonObject) throw jsonDrift(jsonChild(at, {key}), {expected}, data[{key}])").unwrap();
                writeln!(out, "            throw jsonDrift(at, {expected}, data)").unwrap();
                done = true;
            }
        }
        if !done {
            let pairs: Vec<String> = readers.iter().map(|(_, r, keys)| format!("Pair({r}, {})", keys.as_deref().unwrap_or("null"))).collect();
            writeln!(
                out,
                "            return jsonBestOf(data, at, listOf<Pair<JsonRead<{name}>, Set<String>?>>({}), {})",
                pairs.join(", "),
                kt_str(&shown.join(" or "))
            )
            .unwrap();
        }
        writeln!(out, "        }}").unwrap();
        writeln!(out, "    }}").unwrap();
        writeln!(out, "}}").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "/** [{name}]'s kotlinx.serialization serializer: [{name}.fromJson] and `toJson`. */").unwrap();
        writeln!(out, "public object {ser} : KSerializer<{name}> by ModelSerializer({}, {{ v, a -> {name}.fromJson(v, a) }}, {{ it.toJson() }})", kt_str(&format!("{}.{name}", self.opts.package))).unwrap();
        for (w, ty) in wrappers {
            writeln!(out).unwrap();
            writeln!(out, "/** A [{name}] that is a `{}`. */", self.ty(ty, m)).unwrap();
            writeln!(out, "public data class {w}(public val value: {}) : {name} {{", self.ty(ty, m)).unwrap();
            writeln!(out, "    override fun toJson(): JsonElement = {}", self.write(ty, m, "this.value", 1)).unwrap();
            writeln!(out, "}}").unwrap();
        }
    }

    /// The fields of an object type in one form: (Kotlin name, prop), declared order.
    fn fields(&self, i: usize, m: Mode, props: &[Prop]) -> Vec<(String, Prop)> {
        let mut out: Vec<(String, Prop)> = Vec::new();
        let mut taken: Vec<String> = Vec::new();
        for p in props.iter().filter(|p| keeps(p, m)) {
            let mut p = p.clone();
            if let Some((prop, value)) = self.tag_defaults.get(&i) {
                if *prop == p.name {
                    p.default = Some(Value::String(value.clone()));
                }
            }
            let name = unique_member(&camel(&snake(&p.name)), &mut taken);
            out.push((name, p));
        }
        if let Some((prop, value)) = self.tag_defaults.get(&i) {
            if !out.iter().any(|(_, p)| p.name == *prop) {
                let name = unique_member(&camel(&snake(prop)), &mut taken);
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

    /// A field's Kotlin default, if it has one: the schema's default when the type holds it.
    fn default(&self, t: &Ty, d: &Value) -> Option<String> {
        if d.is_null() || !holds(self.api, t, d) {
            return None;
        }
        match (t, d) {
            (Ty::Nullable(t), d) => self.default(t, d),
            (Ty::Named(i), Value::String(s)) if is_enum(self.api, *i) => {
                let e = self.entries[i].iter().find(|(w, _)| w == s)?;
                Some(format!("{}.{}", self.name(*i, Mode::Out), e.1))
            }
            (Ty::Named(i), d) => match &self.api.types[*i].def {
                Def::Alias(t) => self.default(t, d),
                _ => None,
            },
            (Ty::Int { wide: true }, Value::Number(n)) => Some(format!("{n}L")),
            (Ty::Int { wide: false }, Value::Number(n)) => n.as_i64().filter(|v| i32::try_from(*v).is_ok()).map(|v| v.to_string()),
            (Ty::Number, Value::Number(n)) => {
                let s = n.to_string();
                Some(if s.contains(['.', 'e', 'E']) { s } else { format!("{s}.0") })
            }
            (Ty::Literals(vs), d) => match (literal_base(vs), d) {
                ("String", Value::String(s)) => Some(kt_str(s)),
                ("Long", Value::Number(n)) => Some(format!("{n}L")),
                ("Boolean", Value::Bool(b)) => Some(b.to_string()),
                _ => None,
            },
            (_, Value::String(s)) => Some(kt_str(s)),
            (_, Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        }
    }

    fn class(&self, out: &mut String, i: usize, m: Mode, props: &[Prop], additional: Option<&Ty>) {
        let t = &self.api.types[i];
        let name = self.name(i, m);
        let fields = self.fields(i, m, props);
        let mut taken: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let extra = additional.map(|a| (unique_member("additionalProperties", &mut taken), a));
        let mut docs: Vec<(String, String)> = Vec::new();
        for (n, p) in &fields {
            let mut d = field_doc(p, p.doc.as_deref().unwrap_or_default());
            if camel(&snake(&p.name)) != p.name {
                d = format!("{d} (`{}` in JSON)", p.name).trim().to_string();
            }
            if !d.is_empty() {
                docs.push((n.clone(), d));
            }
        }
        if let Some((n, _)) = &extra {
            docs.push((n.clone(), "The keys beside the declared ones.".into()));
        }
        let mut doc = t.doc.clone().unwrap_or_else(|| format!("`{}` (at `{}`).", t.name, t.pointer));
        if self.split[i] {
            let form = match m {
                Mode::Out => "As a response carries it (without write-only properties); requests send ",
                Mode::In => "As a request sends it (without read-only properties); responses carry ",
            };
            match self.names.get(&(i, if m == Mode::Out { Mode::In } else { Mode::Out })) {
                Some(other) => doc = format!("{doc}\n\n{form}[{other}]."),
                None => doc = format!("{doc}\n\n{form}{name} in another form."),
            }
        }
        for (n, d) in &docs {
            write!(doc, "\n@property {} {d}", n.trim_matches('`')).unwrap();
        }
        // Fields without a default first (as Python does; Java's positional constructor reads the same).
        let mut ordered: Vec<(&String, &Prop, Option<String>)> = Vec::new();
        for (n, p) in &fields {
            let d = p.default.as_ref().and_then(|d| self.default(&p.ty, d));
            if p.required && d.is_none() {
                ordered.push((n, p, None));
            }
        }
        for (n, p) in &fields {
            let d = p.default.as_ref().and_then(|d| self.default(&p.ty, d));
            if !(p.required && d.is_none()) {
                ordered.push((n, p, Some(d.unwrap_or_else(|| "null".into()))));
            }
        }
        let ser = &self.serializers[&(i, m)];
        writeln!(out).unwrap();
        kdoc(out, "", Some(&doc));
        writeln!(out, "@Serializable(with = {ser}::class)").unwrap();
        let supers = self.implements.get(&(i, m)).map(|v| format!(" : {}", v.join(", "))).unwrap_or_default();
        if ordered.is_empty() && extra.is_none() {
            writeln!(out, "public class {name}{supers} {{").unwrap();
        } else {
            let overloads = if ordered.iter().any(|(_, _, d)| d.is_some()) || extra.is_some() { " @JvmOverloads constructor" } else { "" };
            writeln!(out, "public data class {name}{overloads}(").unwrap();
            for (n, p, d) in &ordered {
                let ty = self.ty(&p.ty, m);
                if p.deprecated {
                    writeln!(out, "    @Deprecated(\"deprecated in the document\")").unwrap();
                }
                match d {
                    None => writeln!(out, "    public val {n}: {ty},").unwrap(),
                    Some(d) if d == "null" && !ty.ends_with('?') => writeln!(out, "    public val {n}: {ty}? = null,").unwrap(),
                    Some(d) => writeln!(out, "    public val {n}: {ty} = {d},").unwrap(),
                }
            }
            if let Some((n, a)) = &extra {
                writeln!(out, "    public val {n}: Map<String, {}> = emptyMap(),", self.ty(a, m)).unwrap();
            }
            writeln!(out, "){supers} {{").unwrap();
        }
        let over = if supers.is_empty() { "public" } else { "override" };
        writeln!(out, "    /** Its JSON value (a null optional property is left out). */").unwrap();
        writeln!(out, "    {over} fun toJson(): JsonObject {{").unwrap();
        writeln!(out, "        val out = LinkedHashMap<String, JsonElement>()").unwrap();
        for (n, p, d) in &ordered {
            let key = kt_str(&p.name);
            let this = format!("this.{n}");
            if let (Some("null"), Ty::Nullable(inner)) = (d.as_deref(), &p.ty) {
                // A nullable optional property: null is left out too (a PATCH cannot send null yet).
                writeln!(out, "        {this}?.let {{ x -> out[{key}] = {} }}", self.write(inner, m, "x", 1)).unwrap();
            } else if d.as_deref() == Some("null") && !self.nullable(&p.ty) {
                writeln!(out, "        {this}?.let {{ x -> out[{key}] = {} }}", self.write(&p.ty, m, "x", 1)).unwrap();
            } else if d.as_deref() == Some("null") {
                // A nullable optional property: null is left out too (PATCH cannot send null yet).
                writeln!(out, "        if ({this} != null) out[{key}] = {}", self.write(&p.ty, m, &this, 1)).unwrap();
            } else {
                writeln!(out, "        out[{key}] = {}", self.write(&p.ty, m, &this, 1)).unwrap();
            }
        }
        if let Some((n, a)) = &extra {
            writeln!(out, "        for ((k, x) in this.{n}) if (k !in out) out[k] = {}", self.write(a, m, "x", 1)).unwrap();
        }
        writeln!(out, "        return JsonObject(out)").unwrap();
        writeln!(out, "    }}").unwrap();
        if ordered.is_empty() && extra.is_none() {
            writeln!(out).unwrap();
            writeln!(out, "    override fun equals(other: Any?): Boolean = other is {name}").unwrap();
            writeln!(out).unwrap();
            writeln!(out, "    override fun hashCode(): Int = 0").unwrap();
            writeln!(out).unwrap();
            writeln!(out, "    override fun toString(): String = {}", kt_str(&format!("{name}()"))).unwrap();
        }
        writeln!(out).unwrap();
        writeln!(out, "    public companion object {{").unwrap();
        let keys: Vec<String> = fields.iter().map(|(_, p)| kt_str(&p.name)).collect();
        writeln!(out, "        /** The keys the document declares. */").unwrap();
        writeln!(out, "        @JvmField").unwrap();
        writeln!(out, "        public val KEYS: Set<String> = setOf({})", keys.join(", ")).unwrap();
        writeln!(out).unwrap();
        writeln!(out, "        /** Reads one from its JSON value; HarnessException.Schema names the first value that does not match. */").unwrap();
        writeln!(out, "        @JvmStatic").unwrap();
        writeln!(out, "        @JvmOverloads").unwrap();
        writeln!(out, "        public fun fromJson(data: JsonElement, at: String = \"\"): {name} {{").unwrap();
        writeln!(out, "            val d = jsonObject(data, at)").unwrap();
        if ordered.is_empty() && extra.is_none() {
            writeln!(out, "            return {name}()").unwrap();
        } else {
            writeln!(out, "            return {name}(").unwrap();
            for (n, p, d) in &ordered {
                let key = kt_str(&p.name);
                let read = |t: &Ty| format!("{{ v, a -> {} }}", self.read(t, m, "v", "a", 1));
                let value = match d {
                    None => format!("jsonRequired(d, {key}, at, {})", read(&p.ty)),
                    Some(d) if d == "null" => match &p.ty {
                        Ty::Nullable(inner) => format!("jsonOptional(d, {key}, at, {})", read(inner)),
                        t => format!("jsonOptional(d, {key}, at, {})", read(t)),
                    },
                    Some(d) => format!("jsonDefaulted(d, {key}, at, {}, {d})", read(&p.ty)),
                };
                writeln!(out, "                {n} = {value},").unwrap();
            }
            if let Some((n, a)) = &extra {
                writeln!(out, "                {n} = jsonRest(d, KEYS, at, {{ v, a -> {} }}),", self.read(a, m, "v", "a", 1)).unwrap();
            }
            writeln!(out, "            )").unwrap();
        }
        writeln!(out, "        }}").unwrap();
        writeln!(out, "    }}").unwrap();
        writeln!(out, "}}").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "/** [{name}]'s kotlinx.serialization serializer: [{name}.fromJson] and [{name}.toJson]. */").unwrap();
        writeln!(out, "public object {ser} : KSerializer<{name}> by ModelSerializer({}, {{ v, a -> {name}.fromJson(v, a) }}, {{ it.toJson() }})", kt_str(&format!("{}.{name}", self.opts.package))).unwrap();
    }

    // ---- Errors.kt ----

    fn errors_file(&self) -> String {
        let mut out = String::new();
        self.preamble(
            &mut out,
            &["dev.harness.HarnessException", "kotlinx.serialization.json.JsonElement", "java.time.LocalDate", "java.time.OffsetDateTime", "java.util.UUID"],
        );
        let base = &self.base_error;
        writeln!(out).unwrap();
        kdoc(
            &mut out,
            "",
            Some(&format!(
                "A declared error response of the `{}` service: the error Harness raised ([error], a\n\
                 [HarnessException.HttpStatus], or [HarnessException.Auth] for 401/403 and\n\
                 [HarnessException.RateLimited] for 429, which are final classes of the binding) with\n\
                 its context, and the body read as the declared model. A body that does not read as\n\
                 that model leaves Harness's own error as it was. Each operation's errors are also a\n\
                 sealed interface (`GetOrderError`), so `when` over them is exhaustive.",
                one_line(&self.opts.service)
            )),
        );
        writeln!(out, "public sealed class {base}(").unwrap();
        writeln!(out, "    /** The error Harness raised, with every field of the call's context. */").unwrap();
        writeln!(out, "    public val error: HarnessException,").unwrap();
        writeln!(out, ") : Exception(error.message, error) {{").unwrap();
        writeln!(out, "    /** `HttpStatusError`, `AuthError` or `RateLimitedError`: the kind Harness gave it. */").unwrap();
        writeln!(out, "    public val kind: String get() = error.kind").unwrap();
        writeln!(out, "    /** The HTTP status the service answered. */").unwrap();
        writeln!(out, "    public val status: Int get() = error.status ?: 0").unwrap();
        writeln!(out, "    public val service: String? get() = error.service").unwrap();
        writeln!(out, "    /** The endpoint label: the operation's operationId. */").unwrap();
        writeln!(out, "    public val endpoint: String? get() = error.endpoint").unwrap();
        writeln!(out, "    public val method: String? get() = error.method").unwrap();
        writeln!(out, "    public val attempts: Int get() = error.attempts").unwrap();
        writeln!(out, "    /** The body's normalised error code, when it has one. */").unwrap();
        writeln!(out, "    public val code: String? get() = error.code").unwrap();
        writeln!(out, "    public val traceId: String? get() = error.traceId").unwrap();
        writeln!(out, "    /** The raw body, when there was one. */").unwrap();
        writeln!(out, "    public val body: ByteArray? get() = error.body").unwrap();
        writeln!(out, "}}").unwrap();
        for (k, op) in self.api.operations.iter().enumerate() {
            let Some(iface) = &self.op_errors[k] else { continue };
            let names: Vec<String> = self.errors.iter().filter(|e| e.ops.contains(iface)).map(|e| format!("[{}]", e.name)).collect();
            writeln!(out).unwrap();
            writeln!(out, "/** What `{}` ({} {}) raises for its declared error responses: {}. */", kdoc_text(&op.id), kdoc_text(&op.method), kdoc_text(&op.path), names.join(", ")).unwrap();
            writeln!(out, "public sealed interface {iface}").unwrap();
        }
        for e in &self.errors {
            let what = match e.status {
                Status::Code(c) => format!("The service answered {c}{}", http_reason(c).map(|r| format!(" {r}")).unwrap_or_default()),
                Status::Range(d) => format!("The service answered {d}XX"),
                Status::Default => "The service answered an error status its operation does not list (its `default` response)".into(),
            };
            let supers: Vec<String> = std::iter::once(format!("{base}(error)")).chain(e.ops.iter().cloned()).collect();
            writeln!(out).unwrap();
            match &e.content {
                Content::Json(t) => {
                    kdoc(&mut out, "", Some(&format!("{what}; [model] is its body.")));
                    writeln!(out, "public class {}(error: HarnessException, public val model: {}) : {}", e.name, self.ty(t, Mode::Out), supers.join(", ")).unwrap();
                }
                Content::Other(media) => {
                    kdoc(&mut out, "", Some(&format!("{what} ([body] holds its {media} body).")));
                    writeln!(out, "public class {}(error: HarnessException) : {}", e.name, supers.join(", ")).unwrap();
                }
                Content::None => {
                    kdoc(&mut out, "", Some(&format!("{what}.")));
                    writeln!(out, "public class {}(error: HarnessException) : {}", e.name, supers.join(", ")).unwrap();
                }
            }
        }
        out
    }

    // ---- the client ----

    fn client_file(&self) -> String {
        let api = self.api;
        let mut out = String::new();
        self.preamble(
            &mut out,
            &[
                "dev.harness.HarnessClient",
                "dev.harness.HarnessException",
                "kotlinx.serialization.json.JsonArray",
                "kotlinx.serialization.json.JsonElement",
                "kotlinx.serialization.json.JsonNull",
                "kotlinx.serialization.json.JsonObject",
                "kotlinx.serialization.json.JsonPrimitive",
                "java.time.LocalDate",
                "java.time.OffsetDateTime",
                "java.util.UUID",
                "java.util.concurrent.CompletableFuture",
            ],
        );
        let mut doc = format!("The `{}` service ({}", one_line(&self.opts.service), one_line(&api.title));
        if !api.api_version.is_empty() {
            write!(doc, " {}", one_line(&api.api_version)).unwrap();
        }
        write!(
            doc,
            ", OpenAPI {}) through a [HarnessClient]: its retries, breakers, limits and metrics apply per operation, each call labelled with its operationId.\n\n\
             Kotlin calls the `suspend` methods; Java calls their `CompletableFuture` twins ({}), which complete exceptionally with the typed error (a [{}]) or the [HarnessException].",
            api.version,
            self.methods.first().map(|m| format!("`{}` for `{m}`", twin(m))).unwrap_or_else(|| "`<method>Async`".into()),
            self.base_error
        )
        .unwrap();
        if let Some(d) = &api.doc {
            doc = format!("{doc}\n\n{d}");
        }
        write!(doc, "\n\nOperations: {} generated, {} refused.", api.operations.len(), api.refused.len()).unwrap();
        for r in &api.refused {
            let id = r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
            write!(doc, "\n- refused {} {}{id}: {}", r.method, r.path, r.reason).unwrap();
        }
        writeln!(out).unwrap();
        kdoc(&mut out, "", Some(&doc));
        writeln!(out, "public class {} @JvmOverloads constructor(", self.client).unwrap();
        writeln!(out, "    private val client: HarnessClient,").unwrap();
        writeln!(out, "    /** The config's `services.<service>` the calls go to. */").unwrap();
        writeln!(out, "    private val service: String = {},", kt_str(&self.opts.service)).unwrap();
        writeln!(out, ") {{").unwrap();
        writeln!(out, "    init {{").unwrap();
        writeln!(out, "        requireContract({CONTRACT}, {})", kt_str(&self.opts.package)).unwrap();
        writeln!(out, "    }}").unwrap();
        let sigs: Vec<Sig> = api.operations.iter().enumerate().map(|(k, op)| self.sig(k, op)).collect();
        for (k, op) in api.operations.iter().enumerate() {
            self.method(&mut out, op, &sigs[k], &self.methods[k]);
        }
        writeln!(out, "}}").unwrap();
        for (k, op) in api.operations.iter().enumerate() {
            self.builder(&mut out, op, &sigs[k], &self.methods[k]);
        }
        out
    }

    fn sig(&self, k: usize, op: &Operation) -> Sig {
        let mut taken: Vec<String> = vec!["timeoutMs".into()];
        let mut args = Vec::new();
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
        let body = op.body.as_ref().map(|b| {
            taken.push("body".into());
            Arg { name: "body".into(), ty: self.ty(&b.ty, Mode::In), required: b.required, doc: b.doc.clone(), param: None }
        });
        for p in params {
            let name = if p.idempotency_key { unique_member("idempotencyKey", &mut taken) } else { unique_member(&camel(&snake(&p.name)), &mut taken) };
            let mut doc = p.doc.clone();
            if p.deprecated {
                doc = Some(format!("Deprecated. {}", doc.unwrap_or_default()).trim().to_string());
            }
            args.push(Arg { name, ty: self.ty(&p.ty, Mode::In), required: p.required, doc, param: Some(p.clone()) });
        }
        // The body after the path's parameters (`updateUser(userId, body)`), before the rest.
        if let Some(b) = body {
            let at = args.iter().position(|a| !matches!(&a.param, Some(p) if p.location == In::Path && p.required)).unwrap_or(args.len());
            args.insert(at, b);
        }
        args.sort_by_key(|a| !a.required);
        let mut successes: Vec<(Status, &Content)> = op.responses.iter().filter(|r| r.status.success()).map(|r| (r.status, &r.content)).collect();
        if successes.is_empty() {
            if let Some(d) = op.responses.iter().find(|r| r.status == Status::Default) {
                successes.push((Status::Default, &d.content));
            }
        }
        let mut distinct: Vec<&Content> = Vec::new();
        for (_, c) in &successes {
            if !distinct.contains(c) {
                distinct.push(c);
            }
        }
        let jsons: Vec<&Content> = distinct.iter().copied().filter(|c| !matches!(c, Content::None)).collect();
        let has_none = distinct.iter().any(|c| matches!(c, Content::None));
        let ret = match jsons.as_slice() {
            [] => "Unit".to_string(),
            [Content::Json(t)] => {
                let s = self.ty(t, Mode::Out);
                if has_none && !s.ends_with('?') {
                    format!("{s}?")
                } else {
                    s
                }
            }
            [Content::Other(_)] if has_none => "ByteArray?".into(),
            [Content::Other(_)] => "ByteArray".into(),
            _ if has_none => "JsonElement?".into(),
            _ => "JsonElement".into(),
        };
        let raises: Vec<(String, Status, Content)> =
            self.raises(op).into_iter().map(|r| (self.error_class(r.status, &r.content).name.clone(), r.status, r.content.clone())).collect();
        let _ = k;
        Sig { args, ret, successes: successes.into_iter().map(|(s, c)| (s, c.clone())).collect(), raises }
    }

    fn method(&self, out: &mut String, op: &Operation, sig: &Sig, name: &str) {
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
        if op.deprecated {
            doc.push_str(" Deprecated.");
        }
        for a in &sig.args {
            if let Some(d) = &a.doc {
                write!(doc, "\n@param {} {}", a.name.trim_matches('`'), d.replace('\n', " ")).unwrap();
            }
        }
        for (n, s, _) in &sig.raises {
            write!(doc, "\n@throws {n} when the service answers {}", s.key()).unwrap();
        }
        let params: Vec<String> = sig.args.iter().map(|a| format!("{}: {}{}", a.name, a.declared(), if a.required { "" } else { " = null" })).collect();
        let mut all = params.clone();
        all.push("timeoutMs: Long? = null".into());
        let call_args: Vec<String> = sig.args.iter().map(|a| a.name.clone()).collect();
        let build = format!("_{name}({})", call_args.join(", "));
        writeln!(out).unwrap();
        kdoc(out, "    ", Some(&doc));
        writeln!(out, "    public suspend fun {name}({}): {} =", all.join(", "), sig.ret).unwrap();
        writeln!(out, "        send(this.client, this.service, {build}, timeoutMs)").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "    /** For Java: [{name}] as a [CompletableFuture]; cancelling it cancels the call. */").unwrap();
        writeln!(out, "    @JvmOverloads").unwrap();
        writeln!(out, "    public fun {}({}): CompletableFuture<{}> =", twin(name), all.join(", "), sig.ret).unwrap();
        writeln!(out, "        sendAsync(this.client, this.service, {build}, timeoutMs)").unwrap();
    }

    /// The top-level builder of an operation's request, its reader and its error table.
    fn builder(&self, out: &mut String, op: &Operation, sig: &Sig, name: &str) {
        let params: Vec<String> = sig.args.iter().map(|a| format!("{}: {}", a.name, a.declared())).collect();
        writeln!(out).unwrap();
        writeln!(out, "private fun _{name}({}): Operation<{}> {{", params.join(", "), sig.ret).unwrap();
        let arg_of = |p: &Param| -> &Arg {
            sig.args
                .iter()
                .find(|a| matches!(&a.param, Some(q) if q.name == p.name && q.location == p.location))
                .expect("every param has an argument")
        };
        // The path, its parameters percent-encoded.
        let mut pieces: Vec<String> = Vec::new();
        let mut lit = String::new();
        let mut rest = op.path.as_str();
        while let Some(start) = rest.find('{') {
            let Some(end) = rest[start..].find('}') else { break };
            lit.push_str(&rest[..start]);
            if !lit.is_empty() {
                pieces.push(kt_str(&lit));
                lit.clear();
            }
            let var = &rest[start + 1..start + end];
            let p = op.params.iter().find(|p| p.location == In::Path && p.name == var).expect("path parameters are checked");
            let a = arg_of(p);
            let seg = match &p.ty {
                Ty::Array(t) => format!("{}.joinToString(\",\") {{ e -> pathSegment({}) }}", a.name, self.text(t, "e", 1)),
                t => format!("pathSegment({})", self.text(t, &a.name, 1)),
            };
            pieces.push(seg);
            rest = &rest[start + end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() || pieces.is_empty() {
            pieces.push(kt_str(&lit));
        }
        writeln!(out, "    val _path = {}", pieces.join(" + ")).unwrap();
        let queries: Vec<&Param> = op.params.iter().filter(|p| p.location == In::Query).collect();
        writeln!(out, "    val _query = ArrayList<Pair<String, String>>()").unwrap();
        for p in queries {
            let a = arg_of(p);
            let key = kt_str(&p.name);
            let (x, open, close) = if a.required && !a.ty.ends_with('?') { (a.name.clone(), String::new(), String::new()) } else { (a.name.clone(), format!("if ({} != null) ", a.name), String::new()) };
            let inner = match &p.ty {
                Ty::Nullable(t) => t.as_ref(),
                t => t,
            };
            match (inner, p.style) {
                (Ty::Array(t), Style::Repeat) => writeln!(out, "    {open}for (e in {x}) _query.add(Pair({key}, {})){close}", self.text(t, "e", 1)).unwrap(),
                (Ty::Array(t), style) => {
                    let sep = match style {
                        Style::Comma | Style::Repeat => ",",
                        Style::Space => " ",
                        Style::Pipe => "|",
                    };
                    writeln!(out, "    {open}_query.add(Pair({key}, {x}.joinToString({}) {{ e -> {} }})){close}", kt_str(sep), self.text(t, "e", 1)).unwrap()
                }
                (t, _) => writeln!(out, "    {open}_query.add(Pair({key}, {})){close}", self.text(t, &x, 1)).unwrap(),
            }
        }
        writeln!(out, "    val _headers = LinkedHashMap<String, String>()").unwrap();
        for p in op.params.iter().filter(|p| p.location == In::Header && !p.idempotency_key) {
            let a = arg_of(p);
            let key = kt_str(&p.name);
            let inner = match &p.ty {
                Ty::Nullable(t) => t.as_ref(),
                t => t,
            };
            let open = if a.required && !a.ty.ends_with('?') { String::new() } else { format!("if ({} != null) ", a.name) };
            writeln!(out, "    {open}_headers[{key}] = {}", self.text(inner, &a.name, 1)).unwrap();
        }
        let json = match sig.args.iter().find(|a| a.param.is_none()) {
            Some(a) => {
                let b = op.body.as_ref().expect("a body argument has a body");
                if a.required && !a.ty.ends_with('?') {
                    self.write(&b.ty, Mode::In, &a.name, 1)
                } else {
                    format!("{}?.let {{ b -> {} }}", a.name, self.write(&b.ty, Mode::In, "b", 1))
                }
            }
            None => "null".into(),
        };
        let key = match op.params.iter().find(|p| p.idempotency_key) {
            Some(p) => {
                let a = arg_of(p);
                let inner = match &p.ty {
                    Ty::Nullable(t) => t.as_ref(),
                    t => t,
                };
                let text = self.text(inner, "k", 1);
                if a.required && !a.ty.ends_with('?') || text == "k" {
                    self.text(inner, &a.name, 1)
                } else {
                    format!("{}?.let {{ k -> {text} }}", a.name)
                }
            }
            None => "null".into(),
        };
        // The answer's reader.
        let read = |c: &Content| match c {
            Content::None if sig.ret == "Unit" => "Unit".to_string(),
            Content::None => "null".to_string(),
            Content::Other(_) => "r.body".to_string(),
            Content::Json(t) => self.read(t, Mode::Out, "responseJson(r)", "\"\"", 1),
        };
        let mut distinct: Vec<&Content> = Vec::new();
        for (_, c) in &sig.successes {
            if !distinct.contains(&c) {
                distinct.push(c);
            }
        }
        let as_element = sig.ret.starts_with("JsonElement") && distinct.iter().filter(|c| !matches!(c, Content::None)).count() > 1;
        let read_as = |c: &Content| -> String {
            match c {
                Content::Json(t) if as_element => format!("responseJson(r).also {{ j -> {} }}", self.read(t, Mode::Out, "j", "\"\"", 1)),
                Content::None if as_element => "null".into(),
                c => read(c),
            }
        };
        let decode = if distinct.len() > 1 {
            let mut arms: Vec<String> = Vec::new();
            for (s, c) in &sig.successes {
                match s {
                    Status::Code(code) => arms.push(format!("{code} -> {}", read_as(c))),
                    Status::Range(d) => arms.push(format!("in {}..{} -> {}", d * 100, d * 100 + 99, read_as(c))),
                    Status::Default => continue,
                }
            }
            arms.push(format!("else -> {}", read_as(distinct[0])));
            format!("{{ r -> when (r.status) {{ {} }} }}", arms.join("; "))
        } else {
            match distinct.first() {
                Some(Content::None) if sig.ret == "Unit" => "{ _ -> Unit }".into(),
                Some(c) => format!("{{ r -> {} }}", read_as(c)),
                None => "{ _ -> Unit }".into(),
            }
        };
        let errors = if sig.raises.is_empty() {
            "{ _ -> null }".to_string()
        } else {
            let keys: Vec<String> = sig.raises.iter().map(|(_, s, _)| kt_str(&s.key())).collect();
            let mut arms: Vec<String> = Vec::new();
            for (n, s, c) in &sig.raises {
                let make = match c {
                    Content::Json(t) => format!("errorModel(e) {{ v, a -> {} }}?.let {{ m -> {n}(e, m) }}", self.read(t, Mode::Out, "v", "a", 1)),
                    _ => format!("{n}(e)"),
                };
                arms.push(format!("{} -> {make}", kt_str(&s.key())));
            }
            arms.push("else -> null".into());
            format!("{{ e -> when (statusKey(e, setOf({}))) {{ {} }} }}", keys.join(", "), arms.join("; "))
        };
        writeln!(
            out,
            "    return Operation({}, _path, {}, {decode}, {errors}, _query, _headers, {json}, {key})",
            kt_str(&op.method),
            kt_str(&op.id)
        )
        .unwrap();
        writeln!(out, "}}").unwrap();
    }
}

struct Sig {
    args: Vec<Arg>,
    ret: String,
    successes: Vec<(Status, Content)>,
    raises: Vec<(String, Status, Content)>,
}

struct Arg {
    name: String,
    ty: String,
    required: bool,
    doc: Option<String>,
    /// The parameter, or None for the body.
    param: Option<Param>,
}

impl Arg {
    fn declared(&self) -> String {
        if self.required || self.ty.ends_with('?') {
            self.ty.clone()
        } else {
            format!("{}?", self.ty)
        }
    }
}

/// Whether alias `i` reaches itself through aliases alone (no class or union between).
fn alias_cycle(api: &Api, i: usize) -> bool {
    if !matches!(api.types[i].def, Def::Alias(_)) || is_enum(api, i) {
        return false;
    }
    let mut seen = BTreeSet::new();
    let mut todo = vec![i];
    while let Some(k) = todo.pop() {
        let Def::Alias(t) = &api.types[k].def else { continue };
        let mut refs = Vec::new();
        t.refs(&mut refs);
        for r in refs {
            if r == i {
                return true;
            }
            if matches!(api.types[r].def, Def::Alias(_)) && seen.insert(r) {
                todo.push(r);
            }
        }
    }
    false
}

/// The `CompletableFuture` twin of a method (`getOrder` -> `getOrderAsync`, `new_` -> `newAsync`).
fn twin(method: &str) -> String {
    format!("{}Async", method.trim_end_matches('_'))
}



fn holds(api: &Api, t: &Ty, v: &Value) -> bool {
    match (t, v) {
        (Ty::Nullable(_), Value::Null) => true,
        (Ty::Nullable(t), v) => holds(api, t, v),
        (Ty::String, Value::String(_)) => true,
        (Ty::Int { .. }, Value::Number(n)) => n.is_i64(),
        (Ty::Number, Value::Number(_)) => true,
        (Ty::Bool, Value::Bool(_)) => true,
        (Ty::Literals(vs), v) => vs.contains(v),
        (Ty::Named(i), v) => match &api.types[*i].def {
            Def::Alias(t) => holds(api, t, v),
            _ => false,
        },
        _ => false,
    }
}

/// The Kotlin type of a set of literals: their base type when they share one.
fn literal_base(vs: &[Value]) -> &'static str {
    if vs.iter().all(Value::is_string) {
        "String"
    } else if vs.iter().all(|v| v.as_i64().is_some()) {
        "Long"
    } else if vs.iter().all(Value::is_boolean) {
        "Boolean"
    } else {
        "JsonElement"
    }
}

/// A wrapper's name part for an unnamed union member.
fn describe(t: &Ty) -> String {
    match t {
        Ty::String => "String".into(),
        Ty::Int { wide: true } => "Long".into(),
        Ty::Int { wide: false } => "Int".into(),
        Ty::Number => "Double".into(),
        Ty::Bool => "Boolean".into(),
        Ty::DateTime => "DateTime".into(),
        Ty::Date => "Date".into(),
        Ty::Uuid => "Uuid".into(),
        Ty::Bytes => "Bytes".into(),
        Ty::Any => "Value".into(),
        Ty::Array(_) => "List".into(),
        Ty::Map(_) => "Map".into(),
        Ty::Named(_) => "Named".into(),
        Ty::Nullable(t) => format!("Nullable{}", describe(t)),
        Ty::Literals(_) => "Literal".into(),
        Ty::Union(_) => "Union".into(),
    }
}

fn json_primitive(v: &Value) -> String {
    match v {
        Value::String(s) => format!("JsonPrimitive({})", kt_str(s)),
        Value::Bool(b) => format!("JsonPrimitive({b})"),
        Value::Number(n) if n.is_i64() => format!("JsonPrimitive({n}L)"),
        Value::Number(n) => format!("JsonPrimitive({})", n.as_f64().unwrap_or_default()),
        _ => "JsonNull".into(),
    }
}

/// A JSON value as messages show it (`'card'`, `1`).
fn json_text(v: &str) -> String {
    format!("'{v}'")
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

/// A Kotlin identifier for a property or argument: backticked when a keyword, `_` after a
/// name every model has, numbered when taken.
fn unique_member(wanted: &str, taken: &mut Vec<String>) -> String {
    let reserved = MEMBER_RESERVED.contains(&wanted) || is_component(wanted);
    let base = if reserved { format!("{wanted}_") } else { wanted.to_string() };
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    taken.push(name.clone());
    if KEYWORDS.contains(&name.as_str()) {
        format!("`{name}`")
    } else {
        name
    }
}

fn is_component(s: &str) -> bool {
    s.strip_prefix("component").is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

/// A Kotlin string literal: `\`, `"` and `$` escaped, control characters as `\uXXXX`.
pub fn kt_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe inside a KDoc comment: no `*/` closes it, no `/*` opens a nested one.
fn kdoc_text(s: &str) -> String {
    let s: String = s.chars().map(|c| if c.is_control() && c != '\t' { ' ' } else { c }).collect();
    s.replace("*/", "*&#47;").replace("/*", "&#47;*")
}

fn kdoc(out: &mut String, indent: &str, doc: Option<&str>) {
    let Some(doc) = doc else { return };
    let mut lines: Vec<String> = doc.lines().map(|l| kdoc_text(l.trim_end())).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    while lines.first().is_some_and(|l| l.is_empty()) {
        lines.remove(0);
    }
    if lines.is_empty() {
        return;
    }
    if lines.len() == 1 {
        writeln!(out, "{indent}/** {} */", lines[0]).unwrap();
        return;
    }
    writeln!(out, "{indent}/**").unwrap();
    for l in lines {
        if l.is_empty() {
            writeln!(out, "{indent} *").unwrap();
        } else {
            writeln!(out, "{indent} * {l}").unwrap();
        }
    }
    writeln!(out, "{indent} */").unwrap();
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
    fn strings_and_docs_are_escaped() {
        assert_eq!(kt_str("a\"b$c\\d\n"), "\"a\\\"b\\$c\\\\d\\n\"");
        assert_eq!(kdoc_text("ends */ here /* nested"), "ends *&#47; here &#47;* nested");
    }

    #[test]
    fn keywords_are_backticked_and_model_members_renamed() {
        let mut taken = Vec::new();
        assert_eq!(unique_member("object", &mut taken), "`object`");
        assert_eq!(unique_member("copy", &mut taken), "copy_");
        assert_eq!(unique_member("component1", &mut taken), "component1_");
        assert_eq!(unique_member("object", &mut taken), "object2");
    }

    #[test]
    fn packages() {
        assert_eq!(default_package("orders"), "orders");
        assert_eq!(default_package("user-accounts"), "useraccounts");
        assert_eq!(default_package("3ds"), "api3ds");
        assert_eq!(default_package("package"), "apipackage");
        assert!(valid_package("com.example.orders"));
        assert!(!valid_package("com.example.object"));
        assert!(!valid_package("com..x"));
    }
}
