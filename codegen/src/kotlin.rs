//! Kotlin: `@Serializable` data classes (kotlinx.serialization: a compiler plugin, no
//! reflection at run time, and the same library for every generated type), camelCase
//! properties with their wire names in `@SerialName`, enum classes, and sealed interfaces
//! for tagged unions (kotlinx's default class discriminator is `type`, as on the wire).
//! Inputs (a config) have every key optional (`null`: absent); views have every key.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::model::{Def, Field, Model, Ty, TypeDef, Variant};
use crate::names::{camel, constant, doc_lines, pascal};
use crate::Options;

const KEYWORDS: [&str; 12] = ["as", "class", "fun", "in", "is", "object", "package", "return", "typealias", "val", "var", "when"];

pub fn emit(model: &Model, opts: &Options) -> String {
    let mut out = String::new();
    writeln!(out, "// {}", opts.header).unwrap();
    writeln!(out, "@file:Suppress(\"unused\")").unwrap();
    writeln!(out, "@file:OptIn(kotlinx.serialization.ExperimentalSerializationApi::class)").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "package {}", opts.kotlin_package).unwrap();
    writeln!(out).unwrap();
    writeln!(out, "import kotlinx.serialization.KSerializer").unwrap();
    writeln!(out, "import kotlinx.serialization.SerialName").unwrap();
    writeln!(out, "import kotlinx.serialization.Serializable").unwrap();
    writeln!(out, "import kotlinx.serialization.Transient").unwrap();
    writeln!(out, "import kotlinx.serialization.descriptors.SerialDescriptor").unwrap();
    writeln!(out, "import kotlinx.serialization.descriptors.listSerialDescriptor").unwrap();
    writeln!(out, "import kotlinx.serialization.encoding.Decoder").unwrap();
    writeln!(out, "import kotlinx.serialization.encoding.Encoder").unwrap();
    writeln!(out, "import kotlinx.serialization.json.JsonArray").unwrap();
    writeln!(out, "import kotlinx.serialization.json.JsonDecoder").unwrap();
    writeln!(out, "import kotlinx.serialization.json.JsonElement").unwrap();
    writeln!(out, "import kotlinx.serialization.json.JsonEncoder").unwrap();
    writeln!(out, "import kotlinx.serialization.json.JsonPrimitive").unwrap();
    writeln!(out, "import kotlinx.serialization.json.jsonArray").unwrap();
    writeln!(out, "import kotlinx.serialization.json.int").unwrap();
    writeln!(out, "import kotlinx.serialization.json.jsonPrimitive").unwrap();
    writeln!(out, "import kotlinx.serialization.json.long").unwrap();
    writeln!(out).unwrap();
    let mut tuples: BTreeSet<Vec<String>> = BTreeSet::new();
    for t in &model.types {
        if opts.skip.contains(&t.name) {
            continue;
        }
        emit_type(&mut out, t, model, opts, &mut tuples);
        writeln!(out).unwrap();
    }
    for shape in tuples {
        emit_tuple_serializer(&mut out, &shape);
    }
    if !model.views.is_empty() {
        emit_views(&mut out, model);
    }
    out
}

/// `ClientViews`: one method per view of the core (Java sees them as default methods; an
/// optional argument gets an overload without it), and the decoder of the core's JSON.
fn emit_views(out: &mut String, model: &Model) {
    writeln!(out, "/** Decodes what the core hands back as JSON; keys added later are ignored until regenerated. */").unwrap();
    writeln!(out, "internal object ViewJson {{").unwrap();
    writeln!(out, "    val json: kotlinx.serialization.json.Json = kotlinx.serialization.json.Json {{ ignoreUnknownKeys = true }}").unwrap();
    writeln!(out, "    inline fun <reified T> decode(text: String): T = json.decodeFromString<T>(text)").unwrap();
    writeln!(out, "}}\n").unwrap();
    writeln!(out, "/** The client's read-only views, each asked of the core by name (generated from its VIEWS). */").unwrap();
    writeln!(out, "interface ClientViews {{").unwrap();
    writeln!(out, "    /** A view as the core's JSON text: its name and its (argument name, value) pairs. */").unwrap();
    writeln!(out, "    fun viewJson(name: String, args: List<Pair<String, String?>>): String").unwrap();
    for v in &model.views {
        let ret = if v.list { format!("List<{}>", v.returns) } else { v.returns.clone() };
        let params: Vec<String> = v.args.iter().map(|(a, opt)| format!("{}: String{}", prop(a), if *opt { "?" } else { "" })).collect();
        let pairs: Vec<String> = v.args.iter().map(|(a, _)| format!("\"{a}\" to {}", prop(a))).collect();
        writeln!(out).unwrap();
        kdoc(out, "    ", Some(&v.doc));
        writeln!(out, "    fun {}({}): {ret} = ViewJson.decode<{ret}>(viewJson(\"{}\", listOf({})))", camel(&v.name), params.join(", "), v.name, pairs.join(", ")).unwrap();
        let required: Vec<&(String, bool)> = v.args.iter().filter(|(_, opt)| !opt).collect();
        if required.len() < v.args.len() {
            let short: Vec<String> = required.iter().map(|(a, _)| format!("{}: String", prop(a))).collect();
            let call: Vec<String> = v.args.iter().map(|(a, opt)| if *opt { "null".to_string() } else { prop(a) }).collect();
            kdoc(out, "    ", Some(&v.doc));
            writeln!(out, "    fun {}({}): {ret} = {}({})", camel(&v.name), short.join(", "), camel(&v.name), call.join(", ")).unwrap();
        }
    }
    writeln!(out, "}}").unwrap();
}

pub(crate) fn kdoc(out: &mut String, indent: &str, doc: Option<&str>) {
    let Some(doc) = doc else { return };
    let lines = doc_lines(doc);
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

pub(crate) fn prop(name: &str) -> String {
    let c = camel(name);
    if KEYWORDS.contains(&c.as_str()) {
        format!("`{c}`")
    } else {
        c
    }
}

/// The Kotlin type, and the tuple shapes it needs serializers for.
pub(crate) fn kt(ty: &Ty, tuples: &mut BTreeSet<Vec<String>>) -> String {
    match ty {
        Ty::String => "String".into(),
        // 32 bits and less (`uint32`, `int32`, `uint`: counts, weights, indexes) are Int as
        // Kotlin users expect; 64-bit ones (milliseconds, bytes) are Long.
        Ty::Int { wide: false } => "Int".into(),
        Ty::Int { wide: true } => "Long".into(),
        Ty::Number => "Double".into(),
        Ty::Bool => "Boolean".into(),
        Ty::Any => "JsonElement".into(),
        Ty::Array(t) => format!("List<{}>", kt(t, tuples)),
        Ty::Tuple(ts) => {
            let shape: Vec<String> = ts.iter().map(|t| kt(t, tuples)).collect();
            let name = tuple_serializer(&shape);
            tuples.insert(shape.clone());
            format!("@Serializable(with = {name}::class) Pair<{}>", shape.join(", "))
        }
        Ty::Map(t) => format!("Map<String, {}>", kt(t, tuples)),
        Ty::Ref(n) => n.clone(),
        Ty::Nullable(t) => format!("{}?", kt(t, tuples)),
        // An untyped string stays a String: a one-off set of literals has no name to give it.
        Ty::Literals(_) => "String".into(),
    }
}

fn tuple_serializer(shape: &[String]) -> String {
    format!("{}Serializer", shape.iter().map(|s| s.replace(['<', '>', ',', ' ', '?'], "")).collect::<String>())
}

fn emit_tuple_serializer(out: &mut String, shape: &[String]) {
    if shape.len() != 2 || !shape.iter().all(|s| s == "String" || s == "Long" || s == "Int") {
        // Only the shapes the schema has are written; a new one fails the build here, loudly.
        writeln!(out, "// unsupported tuple shape {shape:?}").unwrap();
        return;
    }
    let name = tuple_serializer(shape);
    let read = |i: usize, t: &str| match t {
        "Long" => format!("a[{i}].jsonPrimitive.long"),
        "Int" => format!("a[{i}].jsonPrimitive.int"),
        _ => format!("a[{i}].jsonPrimitive.content"),
    };
    writeln!(out, "/** A `[{}]` array on the wire, a `Pair` here. */", shape.join(", ")).unwrap();
    writeln!(out, "object {name} : KSerializer<Pair<{}>> {{", shape.join(", ")).unwrap();
    writeln!(out, "    override val descriptor: SerialDescriptor = listSerialDescriptor<JsonElement>()").unwrap();
    writeln!(out, "    override fun deserialize(decoder: Decoder): Pair<{}> {{", shape.join(", ")).unwrap();
    writeln!(out, "        val a = (decoder as JsonDecoder).decodeJsonElement().jsonArray").unwrap();
    writeln!(out, "        return Pair({}, {})", read(0, &shape[0]), read(1, &shape[1])).unwrap();
    writeln!(out, "    }}").unwrap();
    writeln!(out, "    override fun serialize(encoder: Encoder, value: Pair<{}>) {{", shape.join(", ")).unwrap();
    writeln!(out, "        (encoder as JsonEncoder).encodeJsonElement(JsonArray(listOf(JsonPrimitive(value.first), JsonPrimitive(value.second))))").unwrap();
    writeln!(out, "    }}").unwrap();
    writeln!(out, "}}\n").unwrap();
}

fn params(out: &mut String, indent: &str, fields: &[Field], tuples: &mut BTreeSet<Vec<String>>) {
    for f in fields {
        kdoc(out, indent, f.doc.as_deref());
        let mut ty = kt(&f.ty, tuples);
        // A key the schema does not require may be absent (an input's, or an output's the core
        // skips when empty): nullable, null by default.
        let optional = !f.required;
        if optional && !ty.ends_with('?') {
            ty.push('?');
        }
        let default = if optional || ty.ends_with('?') { " = null" } else { "" };
        writeln!(out, "{indent}@SerialName(\"{}\") val {}: {ty}{default},", f.name, prop(&f.name)).unwrap();
    }
}

fn variant_name(union: &str, v: &Variant, opts: &Options) -> String {
    if opts.kotlin_nested.contains(union) {
        return pascal(&v.tag);
    }
    let base = opts.variant_names.get(union).map(String::as_str).unwrap_or(union);
    format!("{}{}", pascal(&v.tag), base)
}

/// A type's name in Kotlin (`Options::kotlin_names` renames one, e.g. `Event` -> `HarnessEvent`).
fn kotlin_name<'a>(name: &'a str, opts: &'a Options) -> &'a str {
    opts.kotlin_names.get(name).map(String::as_str).unwrap_or(name)
}

/// How a sensitive field prints: a string by its size, anything else not at all.
fn shown(f: &Field) -> String {
    let p = prop(&f.name);
    match (&f.ty, f.sensitive) {
        (_, false) => format!("{p}=${p}"),
        (Ty::String, true) => format!("{p}=${{{p}.length}} chars"),
        (Ty::Nullable(t), true) if **t == Ty::String => format!("{p}=${{{p}?.length}} chars"),
        (_, true) => format!("{p}=${{if ({p} == null) \"null\" else \"(not shown)\"}}"),
    }
}

/// One data class: `name` and its fields, the extras and members `opts` give `key`; for a
/// variant of a union its supertype, and for a nested one its tag (what `type` returns).
struct Class<'a> {
    indent: &'a str,
    name: String,
    key: &'a str,
    fields: &'a [Field],
    supertype: Option<&'a str>,
    tag: Option<&'a str>,
}

fn emit_class(out: &mut String, c: Class<'_>, opts: &Options, tuples: &mut BTreeSet<Vec<String>>) {
    let ind = c.indent;
    let inner = format!("{ind}    ");
    let supertype = c.supertype.map(|s| format!(" : {s}")).unwrap_or_default();
    let members: &[String] = opts.kotlin_members.get(c.key).map(Vec::as_slice).unwrap_or(&[]);
    let sensitive = c.fields.iter().any(|f| f.sensitive);
    let body = !members.is_empty() || sensitive || c.tag.is_some();
    if c.fields.is_empty() && !body {
        writeln!(out, "{ind}class {}{supertype}", c.name).unwrap();
        return;
    }
    if c.fields.is_empty() {
        writeln!(out, "{ind}class {}{supertype} {{", c.name).unwrap();
    } else {
        writeln!(out, "{ind}data class {}(", c.name).unwrap();
        params(out, &inner, c.fields, tuples);
        for (name, ty, default, doc) in opts.kotlin_extra.get(c.key).map(Vec::as_slice).unwrap_or(&[]) {
            kdoc(out, &inner, Some(doc));
            writeln!(out, "{inner}@Transient val {name}: {ty} = {default},").unwrap();
        }
        if !body {
            writeln!(out, "{ind}){supertype}").unwrap();
            return;
        }
        writeln!(out, "{ind}){supertype} {{").unwrap();
    }
    if let Some(tag) = c.tag {
        writeln!(out, "{inner}override val type: String get() = \"{tag}\"").unwrap();
    }
    for m in members {
        writeln!(out, "{inner}{m}").unwrap();
    }
    if sensitive {
        // What a user said or a provider answered is not printed: a string's size only.
        let shown: Vec<String> = c.fields.iter().map(shown).collect();
        writeln!(out, "{inner}override fun toString(): String = \"{}({})\"", c.name, shown.join(", ")).unwrap();
    }
    writeln!(out, "{ind}}}").unwrap();
}

fn emit_type(out: &mut String, t: &TypeDef, model: &Model, opts: &Options, tuples: &mut BTreeSet<Vec<String>>) {
    let name = kotlin_name(&t.name, opts);
    match &t.def {
        Def::Object { fields, .. } => {
            kdoc(out, "", t.doc.as_deref());
            writeln!(out, "@Serializable").unwrap();
            emit_class(out, Class { indent: "", name: name.to_string(), key: &t.name, fields, supertype: None, tag: None }, opts, tuples);
        }
        Def::Enum { values } => {
            kdoc(out, "", t.doc.as_deref());
            writeln!(out, "@Serializable").unwrap();
            // `value` is the cross-language name, and what `toString` prints.
            writeln!(out, "enum class {name}(val value: String) {{").unwrap();
            for (v, d) in values {
                kdoc(out, "    ", d.as_deref());
                writeln!(out, "    @SerialName(\"{v}\") {}(\"{v}\"),", constant(v)).unwrap();
            }
            writeln!(out, "    ;\n\n    override fun toString(): String = value").unwrap();
            writeln!(out, "}}").unwrap();
        }
        Def::Alias(ty) => {
            kdoc(out, "", t.doc.as_deref());
            writeln!(out, "typealias {name} = {}", kt(ty, tuples)).unwrap();
        }
        Def::Tagged { variants, .. } => {
            // Nested (`HarnessEvent.RequestFinished`, each with its `type`), or top level
            // (`BearerAuth`, ...).
            let nested = opts.kotlin_nested.contains(&t.name);
            kdoc(out, "", t.doc.as_deref());
            writeln!(out, "@Serializable").unwrap();
            if nested {
                writeln!(out, "sealed interface {name} {{").unwrap();
                writeln!(out, "    /** The name on the wire (`{}`, ...). */", variants.first().map(|v| v.tag.as_str()).unwrap_or("")).unwrap();
                writeln!(out, "    val type: String").unwrap();
                for m in opts.kotlin_members.get(&t.name).map(Vec::as_slice).unwrap_or(&[]) {
                    writeln!(out, "    {m}").unwrap();
                }
            } else {
                writeln!(out, "sealed interface {name}").unwrap();
            }
            let indent = if nested { "    " } else { "" };
            for v in variants {
                writeln!(out).unwrap();
                let vname = variant_name(&t.name, v, opts);
                kdoc(out, indent, v.doc.as_deref());
                writeln!(out, "{indent}@Serializable").unwrap();
                writeln!(out, "{indent}@SerialName(\"{}\")", v.tag).unwrap();
                let mut fields = v.fields.clone();
                if let Some(base) = &v.base {
                    // A variant that is a named type plus its tag: that type's fields, here.
                    if let Some(TypeDef { def: Def::Object { fields: bf, .. }, .. }) = model.get(base) {
                        let mut all = bf.clone();
                        all.extend(fields);
                        fields = all;
                    }
                }
                let key = format!("{}.{}", t.name, v.tag);
                let tag = nested.then_some(v.tag.as_str());
                emit_class(out, Class { indent, name: vname, key: &key, fields: &fields, supertype: Some(name), tag }, opts, tuples);
            }
            if nested {
                writeln!(out, "}}").unwrap();
            }
        }
    }
}
