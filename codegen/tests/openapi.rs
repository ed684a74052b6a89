//! The OpenAPI reader and the Python emitter on small documents written here: what is read,
//! what is refused (naming the pointer), and what the Python looks like.

use std::path::{Path, PathBuf};

use harness_codegen::openapi::model::{Def, Ty};
use harness_codegen::openapi::{self, python, Api};

/// A fresh folder with these files; the first is the spec.
fn spec(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harness-openapi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (f, text) in files {
        let path = dir.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir.join(files[0].0)
}

fn load(name: &str, files: &[(&str, &str)]) -> Api {
    openapi::load(&spec(name, files)).unwrap()
}

fn type_named<'a>(api: &'a Api, name: &str) -> &'a Def {
    &api.types.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no type {name}")).def
}

fn python_of(api: &Api) -> String {
    let files = python::emit(api, &python::Options { service: "svc".into(), package: "svc".into(), source: "svc.yaml".into() });
    files.iter().map(|(p, t)| format!("=== {}\n{t}", p.display())).collect()
}

fn file<'a>(files: &'a [(PathBuf, String)], name: &str) -> &'a str {
    &files.iter().find(|(p, _)| p.ends_with(name)).unwrap().1
}

const UNSUPPORTED: &str = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /ok:
    get:
      operationId: fine
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: string}}}}
  /not:
    post:
      operationId: usesNot
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Bad"}
      responses:
        "204": {description: ok}
  /cookie:
    get:
      operationId: usesCookie
      parameters:
        - {name: session, in: cookie, schema: {type: string}}
      responses:
        "204": {description: ok}
  /form:
    post:
      operationId: postsForm
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {a: {type: string}}}
      responses:
        "204": {description: ok}
  /deep:
    get:
      operationId: deepObject
      parameters:
        - {name: filter, in: query, style: deepObject, schema: {type: object, properties: {a: {type: string}}}}
      responses:
        "204": {description: ok}
  /missing:
    get:
      operationId: missingRef
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Nope"}}}}
  /tuple:
    get:
      operationId: tuple
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: array, prefixItems: [{type: string}]}}}}
  /unknown:
    get:
      operationId: unknownKeyword
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: string, nullabel: true}}}}
  /loop:
    get:
      operationId: aliasLoop
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/A"}}}}
  /remote:
    get:
      operationId: remoteRef
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "https://example.com/s.json#/X"}}}}
components:
  schemas:
    Bad:
      type: object
      properties:
        x: {not: {type: string}}
    A: {$ref: "#/components/schemas/B"}
    B: {oneOf: [{$ref: "#/components/schemas/A"}, {type: string}]}
"##;

#[test]
fn unsupported_constructs_refuse_their_operation_naming_the_pointer() {
    let api = load("unsupported", &[("api.yaml", UNSUPPORTED)]);
    let generated: Vec<&str> = api.operations.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(generated, ["fine"]);
    let refused: Vec<(String, String)> = api.refused.iter().map(|r| (r.id.clone().unwrap(), r.reason.clone())).collect();
    let expect = [
        ("usesNot", "#/components/schemas/Bad/properties/x/not: `not` is not supported"),
        ("usesCookie", "#/paths/~1cookie/get/parameters/0/in: cookie parameters are not supported"),
        ("postsForm", "#/paths/~1form/post/requestBody/content: a request body of application/x-www-form-urlencoded is not supported (only JSON bodies are)"),
        ("deepObject", "#/paths/~1deep/get/parameters/0/schema: a parameter of object type is not supported (only scalars and arrays of scalars)"),
        ("missingRef", "#/paths/~1missing/get/responses/200/content/application~1json/schema/$ref: `$ref: #/components/schemas/Nope`: nothing is there"),
        ("tuple", "#/paths/~1tuple/get/responses/200/content/application~1json/schema/prefixItems: `prefixItems` (tuples) is not supported"),
        ("unknownKeyword", "#/paths/~1unknown/get/responses/200/content/application~1json/schema/nullabel: `nullabel` is not a schema keyword this generator knows"),
        ("aliasLoop", "#/components/schemas/A: `A` refers to itself with no type between"),
        (
            "remoteRef",
            "#/paths/~1remote/get/responses/200/content/application~1json/schema/$ref: `$ref: https://example.com/s.json#/X`: only local and file-relative references are supported",
        ),
    ];
    assert_eq!(refused, expect.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>());
    // The refused operations are listed in the package, and none of their types is written.
    let py = python_of(&api);
    assert!(py.contains("Operations: 1 generated, 9 refused."), "{py}");
    assert!(py.contains("- POST /not (usesNot): #/components/schemas/Bad/properties/x/not: `not` is not supported"), "{py}");
    assert!(!py.contains("class Bad"), "{py}");
}

#[test]
fn a_document_that_is_not_openapi_3_is_an_error() {
    let swagger = spec("swagger", &[("s.yaml", "swagger: '2.0'\ninfo: {title: T, version: '1'}\npaths: {}\n")]);
    assert_eq!(openapi::load(&swagger).unwrap_err(), "#/swagger: OpenAPI 2.0 (Swagger) is not supported; convert the document to 3.0 or 3.1");
    let four = spec("four", &[("s.json", r#"{"openapi": "4.0.0", "info": {"title": "T", "version": "1"}, "paths": {}}"#)]);
    assert_eq!(openapi::load(&four).unwrap_err(), "#/openapi: version 4.0.0 is not supported (3.0 and 3.1 are)");
    let broken = spec("broken", &[("s.yaml", "openapi: 3.1.0\npaths: [\n")]);
    assert!(openapi::load(&broken).unwrap_err().contains("s.yaml: not YAML"));
}

#[test]
fn nullable_in_3_0_and_type_arrays_in_3_1_read_alike() {
    let v30 = "openapi: 3.0.3\ninfo: {title: T, version: '1'}\npaths: {}\ncomponents:\n  schemas:\n    S: {type: string, nullable: true}\n";
    let v31 = "openapi: 3.1.0\ninfo: {title: T, version: '1'}\npaths: {}\ncomponents:\n  schemas:\n    S: {type: [string, 'null']}\n    U: {oneOf: [{type: string}, {type: 'null'}]}\n";
    for (name, doc, schemas) in [("v30", v30, &["S"][..]), ("v31", v31, &["S", "U"][..])] {
        let docs = openapi::loader::Docs::load(&spec(name, &[("s.yaml", doc)])).unwrap();
        let mut reader = openapi::schema::Reader::new(&docs);
        for s in schemas {
            let at = openapi::loader::Loc { file: 0, pointer: format!("/components/schemas/{s}") };
            let value = docs.get(&at).unwrap().clone();
            // Read as an inline schema, so the nullability shows on the type itself.
            assert_eq!(reader.ty(&value, &at.key("x"), "X").unwrap(), Ty::Nullable(Box::new(Ty::String)), "{name} {s}");
        }
    }
}

const UNIONS: &str = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /pay:
    post:
      operationId: pay
      requestBody:
        required: true
        content: {application/json: {schema: {$ref: "#/components/schemas/Method"}}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Action"}}}}
  /pets:
    get:
      operationId: pets
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: array, items: {$ref: "#/components/schemas/Pet"}}}}}
components:
  schemas:
    Method:
      oneOf: [{$ref: "#/components/schemas/Card"}, {$ref: "#/components/schemas/Bank"}]
      discriminator: {propertyName: kind, mapping: {card: "#/components/schemas/Card"}}
    Card: {type: object, required: [kind, token], properties: {kind: {type: string}, token: {type: string}}}
    Bank: {type: object, required: [kind, iban], properties: {kind: {type: string}, iban: {type: string}}}
    Action:
      anyOf: [{$ref: "#/components/schemas/Redirect"}, {$ref: "#/components/schemas/Await"}]
    Redirect: {type: object, properties: {type: {type: string, enum: [redirect]}, url: {type: string}}}
    Await: {type: object, properties: {type: {type: string, enum: [await, wait]}}}
    Pet:
      type: object
      required: [petType]
      properties: {petType: {type: string}, name: {type: string}}
      discriminator: {propertyName: petType}
    Cat:
      allOf: [{$ref: "#/components/schemas/Pet"}, {type: object, properties: {lives: {type: integer}}}]
    Dog:
      allOf: [{$ref: "#/components/schemas/Pet"}, {type: object, required: [bark], properties: {bark: {type: boolean}}}]
"##;

#[test]
fn unions_are_told_apart_by_a_declared_or_inferred_tag() {
    let api = load("unions", &[("api.yaml", UNIONS)]);
    let Def::Union { tag: Some(tag), .. } = type_named(&api, "Method") else { panic!("Method is a tagged union") };
    // The mapping names Card; Bank is tagged by its schema's name.
    assert_eq!((tag.property.as_str(), tag.declared), ("kind", true));
    assert_eq!(tag.values, [("card".to_string(), 0), ("Bank".to_string(), 1)]);
    let Def::Union { tag: Some(tag), .. } = type_named(&api, "Action") else { panic!("Action is tagged by its enum property") };
    assert_eq!((tag.property.as_str(), tag.declared), ("type", false));
    assert_eq!(tag.values, [("redirect".to_string(), 0), ("await".to_string(), 1), ("wait".to_string(), 1)]);
    // A base with a discriminator and no oneOf: the schemas that extend it.
    let Def::Union { members, tag: Some(tag) } = type_named(&api, "Pet") else { panic!("Pet is the union of its children") };
    assert_eq!(members.len(), 2);
    assert_eq!(tag.values.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(), ["Cat", "Dog"]);
    let Def::Object { props, .. } = type_named(&api, "Dog") else { panic!("Dog is an object") };
    assert_eq!(props.iter().map(|p| (p.name.as_str(), p.required)).collect::<Vec<_>>(), [("petType", true), ("name", false), ("bark", true)]);

    let py = python_of(&api);
    assert!(py.contains("Method = Union[Card, Bank]"), "{py}");
    assert!(py.contains("    tag = _rt.tag(data, \"kind\")\n    if tag == \"card\":\n        return Card.from_json(data, at)"), "{py}");
    assert!(py.contains("raise _rt.drift("), "{py}");
    // An inferred tag falls back to the member that reads the value best.
    assert!(py.contains("    if tag in (\"await\", \"wait\"):\n        return Await.from_json(data, at)\n    return cast(Action, _rt.best_of("), "{py}");
    // A member one tag value selects has that value as its default.
    assert!(py.contains("    bark: bool\n    pet_type: str = \"Dog\"\n    name: Optional[str] = None\n"), "{py}");
}

const FORMS: &str = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /orders/{id}:
    put:
      operationId: putOrder
      parameters:
        - {name: id, in: path, required: true, schema: {type: string, format: uuid}}
        - {name: Idempotency-Key, in: header, schema: {type: string}}
        - {name: X-Trace, in: header, schema: {type: array, items: {type: integer}}}
        - {name: ids, in: query, schema: {type: array, items: {type: integer}}}
        - {name: csv, in: query, explode: false, schema: {type: array, items: {type: string}}}
        - {name: pipes, in: query, style: pipeDelimited, explode: false, schema: {type: array, items: {type: string}}}
        - {name: from, in: query, schema: {type: string, format: date}}
        - {name: Accept, in: header, schema: {type: string}}
      requestBody:
        required: true
        content: {application/json: {schema: {$ref: "#/components/schemas/Order"}}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Order"}}}}
        "204": {description: nothing}
        "401": {description: no, content: {application/json: {schema: {$ref: "#/components/schemas/Problem"}}}}
        "404": {description: no}
        5XX: {description: no, content: {application/json: {schema: {$ref: "#/components/schemas/Problem"}}}}
components:
  schemas:
    Order:
      type: object
      required: [id, secret, total]
      properties:
        id: {type: string, readOnly: true}
        secret: {type: string, writeOnly: true}
        total: {type: integer, format: int64}
        placed: {type: string, format: date-time}
        class: {type: string, default: standard}
        extra: {type: object, additionalProperties: {type: number}}
    Problem: {type: object, properties: {code: {type: string}}}
"##;

#[test]
fn python_splits_read_only_forms_and_writes_each_parameter_style() {
    let api = load("forms", &[("api.yaml", FORMS)]);
    let files = python::emit(&api, &python::Options { service: "shop".into(), package: "shop".into(), source: "api.yaml".into() });
    let names: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
    // The runtime is harness._openapi, never a copy in the package.
    assert_eq!(names, ["shop/__init__.py", "shop/client.py", "shop/errors.py", "shop/models.py", "shop/py.typed"]);
    let init = file(&files, "__init__.py");
    assert!(init.contains("try:\n    from harness import _openapi as _rt\nexcept ImportError:"), "{init}");
    assert!(init.contains("\n\n_rt.require(1, \"shop\")\n"), "{init}");
    let models = file(&files, "models.py");
    assert!(models.contains("class Order:\n"), "{models}");
    assert!(models.contains("    id: str\n    total: int\n    placed: Optional[_dt.datetime] = None\n    class_: str = \"standard\"\n"), "{models}");
    assert!(models.contains("class OrderInput:\n"), "{models}");
    assert!(models.contains("    secret: str\n    total: int\n"), "{models}");
    assert!(models.contains("            class_=_rt.defaulted(d, \"class\", at, _rt.string, \"standard\"),"), "{models}");
    let client = file(&files, "client.py");
    assert!(
        client.contains("    def put_order(self, *, body: _m.OrderInput, id: _uuid.UUID, ids: Optional[Sequence[int]] = None, csv: Optional[Sequence[str]] = None, pipes: Optional[Sequence[str]] = None, from_: Optional[_dt.date] = None, idempotency_key: Optional[str] = None, x_trace: Optional[Sequence[int]] = None, timeout_ms: Optional[float] = None) -> Optional[_m.Order]:"),
        "{client}"
    );
    assert!(client.contains("    _rt.query(params, \"ids\", ids, None)\n    _rt.query(params, \"csv\", csv, \",\")\n    _rt.query(params, \"pipes\", pipes, \"|\")\n    _rt.query(params, \"from\", from_, None)\n"), "{client}");
    assert!(client.contains("    _rt.header(headers, \"X-Trace\", x_trace)\n"), "{client}");
    assert!(!client.contains("\"Accept\""), "{client}");
    assert!(client.contains("return _rt.Call(\"PUT\", \"/orders/\" + _rt.path(id), \"putOrder\", _decode_put_order, {\"401\": _e.UnauthorizedError.from_error, \"404\": _e.NotFoundError.from_error, \"5XX\": _e.Status5XXError.from_error}, params=params, headers=headers, json=_rt.dump(body), idempotency_key=idempotency_key)"), "{client}");
    assert!(client.contains("    if resp.status == 200:\n        return _m.Order.from_json(_rt.json_body(resp), \"\")\n    if resp.status == 204:\n        return None\n"), "{client}");
    let errors = file(&files, "errors.py");
    assert!(errors.contains("class UnauthorizedError(AuthError, HttpStatusError):\n    \"\"\"The service answered 401 Unauthorized; ``model`` is its body.\"\"\"\n\n    model: _m.Problem\n"), "{errors}");
    assert!(errors.contains("class NotFoundError(HttpStatusError):\n    \"\"\"The service answered 404 Not Found.\"\"\""), "{errors}");
}

#[test]
fn file_relative_references_are_read_and_named_in_errors() {
    let root = r##"
openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /a:
    get:
      operationId: getA
      parameters: [{$ref: "parts/common.yaml#/components/parameters/Limit"}]
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "parts/common.yaml#/components/schemas/A"}}}}
        "404": {$ref: "parts/common.yaml#/components/responses/NotFound"}
  /b:
    get:
      operationId: getB
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "parts/common.yaml#/components/schemas/B"}}}}
"##;
    let common = r##"
components:
  parameters:
    Limit: {name: limit, in: query, schema: {type: integer}}
  responses:
    NotFound: {description: no, content: {application/json: {schema: {$ref: "#/components/schemas/A"}}}}
  schemas:
    A: {type: object, properties: {b: {$ref: "more.yaml#/B2"}}}
    B: {if: {type: string}}
"##;
    let more = "B2: {type: string, format: uuid}\n";
    let dir = spec("relative", &[("api.yaml", root), ("parts/x", "")]);
    std::fs::write(dir.parent().unwrap().join("parts/common.yaml"), common).unwrap();
    std::fs::write(dir.parent().unwrap().join("parts/more.yaml"), more).unwrap();
    let api = openapi::load(&dir).unwrap();
    assert_eq!(api.operations.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["getA"]);
    assert_eq!(api.refused[0].reason, "parts/common.yaml#/components/schemas/B/if: `if`/`then`/`else` is not supported");
    let Def::Object { props, .. } = type_named(&api, "A") else { panic!("A is an object") };
    assert_eq!(props[0].ty, Ty::Uuid);
    assert_eq!(api.operations[0].params[0].name, "limit");
}

#[test]
fn output_is_the_same_every_time() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/openapi/payments.yaml");
    let opts = python::Options { service: "payments".into(), package: "payments".into(), source: "payments.yaml".into() };
    let first = python::emit(&openapi::load(&path).unwrap(), &opts);
    for _ in 0..3 {
        assert_eq!(python::emit(&openapi::load(&path).unwrap(), &opts), first);
    }
}

#[test]
fn python_names_never_shadow_keywords_imports_or_modules() {
    let doc = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /a:
    get:
      operationId: rt
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/List"}}}}
  /b:
    get:
      operationId: class
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/None"}}}}
components:
  schemas:
    List: {type: object, properties: {from: {type: string}, self: {type: integer}, str: {type: string}, to_json: {type: string}}}
    None: {type: string, enum: [a]}
"##;
    let api = load("names", &[("api.yaml", doc)]);
    let files = python::emit(&api, &python::Options { service: "svc".into(), package: "svc".into(), source: "api.yaml".into() });
    let client = file(&files, "client.py");
    assert!(client.contains("    def rt(self, *, timeout_ms: Optional[float] = None) -> _m.List_:"), "{client}");
    assert!(client.contains("        return self._call(_call_rt(), timeout_ms)"), "{client}");
    assert!(client.contains("    def class_(self, *, timeout_ms: Optional[float] = None) -> _m.None_:"), "{client}");
    let models = file(&files, "models.py");
    assert!(models.contains("class List_:\n"), "{models}");
    assert!(models.contains("    from_: Optional[str] = None\n    self_: Optional[int] = None\n    str_: Optional[str] = None\n    to_json_: Optional[str] = None\n"), "{models}");
    assert!(models.contains("None_ = Literal[\"a\"]"), "{models}");
}

#[test]
fn an_odd_operation_id_is_a_valid_method_name_and_the_endpoint_label_as_written() {
    let doc = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /a:
    get:
      operationId: "get order (by id)/v2"
      responses: {"204": {description: ok}}
    put:
      operationId: "créer \"commande\""
      responses: {"204": {description: ok}}
    post:
      operationId: "2fa verify"
      responses: {"204": {description: ok}}
    delete:
      operationId: "import"
      responses: {"204": {description: ok}}
  /b:
    get:
      operationId: "get-a"
      responses: {"204": {description: ok}}
    put:
      operationId: "get a"
      responses: {"204": {description: ok}}
    post:
      operationId: "!!!"
      responses: {"204": {description: ok}}
"##;
    let api = load("odd-ids", &[("api.yaml", doc)]);
    let files = python::emit(&api, &python::Options { service: "svc".into(), package: "svc".into(), source: "api.yaml".into() });
    let client = file(&files, "client.py");
    for (method, endpoint) in [
        ("get_order_by_id_v2", r#""get order (by id)/v2""#),
        ("cr_er_commande", r#""créer \"commande\"""#),
        ("n_2fa_verify", r#""2fa verify""#),
        ("import_", r#""import""#),
        ("get_a", r#""get-a""#),
        ("get_a_2", r#""get a""#),
        ("field", r#""!!!""#),
    ] {
        assert!(client.contains(&format!("    def {method}(self, *, timeout_ms: Optional[float] = None) -> None:")), "{method}\n{client}");
        assert!(client.contains(&format!("def _call_{method}() -> _rt.Call[None]:")), "{method}\n{client}");
        assert!(client.contains(&format!(", {endpoint}, _decode_{method}, {{}})")), "{endpoint}\n{client}");
    }
}

#[test]
fn an_optional_nullable_property_is_unset_when_absent_and_none_is_null() {
    let doc = r##"
openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /u:
    patch:
      operationId: patch
      requestBody:
        content: {application/json: {schema: {$ref: "#/components/schemas/Patch"}}}
      responses: {"204": {description: ok}}
components:
  schemas:
    Patch:
      type: object
      properties:
        name: {type: string, nullable: true}
        nick: {$ref: "#/components/schemas/Nick"}
        role: {type: string}
    Nick: {type: string, nullable: true}
"##;
    let api = load("unset", &[("api.yaml", doc)]);
    let files = python::emit(&api, &python::Options { service: "svc".into(), package: "svc".into(), source: "api.yaml".into() });
    let models = file(&files, "models.py");
    assert!(models.contains("    name: Union[str, None, _rt.Unset] = _rt.UNSET\n    nick: Union[Nick, _rt.Unset] = _rt.UNSET\n    role: Optional[str] = None\n"), "{models}");
    assert!(models.contains("            name=_rt.optional_or_unset(d, \"name\", at, _rt.string),\n            nick=_rt.optional_nullable_or_unset(d, \"nick\", at, parse_Nick),\n"), "{models}");
    assert!(models.contains("        if not isinstance(self.name, _rt.Unset):\n            out[\"name\"] = self.name\n"), "{models}");
    assert!(models.contains("        if self.role is not None:\n            out[\"role\"] = self.role\n"), "{models}");
    let init = file(&files, "__init__.py");
    assert!(init.contains("from harness._openapi import UNSET as UNSET, Unset as Unset\n"), "{init}");
}
