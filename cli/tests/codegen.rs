//! `harness codegen`: the checked-in clients of examples/openapi are what the generator writes
//! today (the golden files), and `--check` fails on a changed, missing or stray file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness")).args(args).output().expect("the harness binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/openapi")
}

#[test]
fn the_examples_clients_are_what_the_generator_writes() {
    for service in ["orders", "users", "payments"] {
        let spec = examples().join(format!("{service}.yaml"));
        let out = examples().join("python");
        let o = harness(&["codegen", "--spec", spec.to_str().unwrap(), "--lang", "python", "--out", out.to_str().unwrap(), "--check"]);
        assert!(
            o.status.success(),
            "examples/openapi/python/{service} is stale: run `cargo run -p harness-cli -- codegen --spec examples/openapi/{service}.yaml --lang python --out examples/openapi/python`\n{}",
            text(&o)
        );
    }
}

#[test]
fn check_fails_on_a_changed_missing_or_stray_file() {
    let dir = std::env::temp_dir().join(format!("harness-codegen-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = examples().join("users.yaml");
    let (spec, out) = (spec.to_str().unwrap(), dir.to_str().unwrap());
    let gen = |extra: &[&str]| harness(&[&["codegen", "--spec", spec, "--lang", "python", "--out", out, "--package", "accounts"], extra].concat());

    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("accounts/models.py is missing"), "{}", text(&o));

    let o = gen(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("generated 5 operations, refused 0"), "{}", text(&o));
    assert!(gen(&["--check"]).status.success());

    let models = dir.join("accounts/models.py");
    let original = std::fs::read_to_string(&models).unwrap();
    std::fs::write(&models, original.replace("class User:", "class Usr:")).unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("accounts/models.py differs from what the spec generates"), "{}", text(&o));
    std::fs::write(&models, &original).unwrap();

    std::fs::write(dir.join("accounts/old.py"), "").unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("accounts/old.py is not generated from the spec"), "{}", text(&o));
    std::fs::remove_file(dir.join("accounts/old.py")).unwrap();
    // Caches beside the files are not the generator's business.
    std::fs::create_dir_all(dir.join("accounts/__pycache__")).unwrap();
    assert!(gen(&["--check"]).status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_and_specs_are_errors() {
    let spec = examples().join("orders.yaml");
    let spec = spec.to_str().unwrap();
    let o = harness(&["codegen", "--spec", spec, "--lang", "python"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--out is required"), "{}", text(&o));
    let o = harness(&["codegen", "--spec", spec, "--lang", "cobol", "--out", "/nonexistent"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--lang cobol: expected python"), "{}", text(&o));
    let o = harness(&["codegen", "--spec", spec, "--lang", "python", "--out", "/nonexistent", "--package", "my-orders"]);
    assert!(text(&o).contains("--package `my-orders`: not a Python identifier"), "{}", text(&o));
    let o = harness(&["codegen", "--spec", "/nonexistent/api.yaml", "--lang", "python", "--out", "/nonexistent"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("/nonexistent/api.yaml: No such file"), "{}", text(&o));
}

#[test]
fn the_examples_typescript_clients_are_what_the_generator_writes() {
    for service in ["orders", "users", "payments"] {
        let spec = examples().join(format!("{service}.yaml"));
        let out = examples().join("typescript");
        let o = harness(&["codegen", "--spec", spec.to_str().unwrap(), "--lang", "typescript", "--out", out.to_str().unwrap(), "--check"]);
        assert!(
            o.status.success(),
            "examples/openapi/typescript/{service} is stale: run `cargo run -p harness-cli -- codegen --spec examples/openapi/{service}.yaml --lang typescript --out examples/openapi/typescript`\n{}",
            text(&o)
        );
    }
}

#[test]
fn typescript_check_fails_on_a_changed_missing_or_stray_file_and_names_are_npm_names() {
    let dir = std::env::temp_dir().join(format!("harness-codegen-ts-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = examples().join("payments.yaml");
    let (spec, out) = (spec.to_str().unwrap(), dir.to_str().unwrap());
    let gen = |extra: &[&str]| harness(&[&["codegen", "--spec", spec, "--lang", "typescript", "--out", out, "--package", "pay-client"], extra].concat());

    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("pay-client/index.d.ts is missing"), "{}", text(&o));

    let o = gen(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("generated 3 operations, refused 0"), "{}", text(&o));
    for f in ["index.js", "index.mjs", "index.d.ts", "index.d.mts", "package.json"] {
        assert!(dir.join("pay-client").join(f).is_file(), "{f} was not written");
    }
    let package: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("pay-client/package.json")).unwrap()).unwrap();
    assert_eq!(package["name"], "pay-client");
    assert_eq!(package["type"], "commonjs");
    assert!(gen(&["--check"]).status.success());

    let decls = dir.join("pay-client/index.d.ts");
    let original = std::fs::read_to_string(&decls).unwrap();
    std::fs::write(&decls, original.replace("amount_minor: bigint", "amount_minor: number")).unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("pay-client/index.d.ts differs from what the spec generates"), "{}", text(&o));
    std::fs::write(&decls, &original).unwrap();

    std::fs::write(dir.join("pay-client/old.js"), "").unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("pay-client/old.js is not generated from the spec"), "{}", text(&o));
    std::fs::remove_file(dir.join("pay-client/old.js")).unwrap();
    // What `npm install` adds inside the package is not the generator's business.
    std::fs::create_dir_all(dir.join("pay-client/node_modules/harness-sdk")).unwrap();
    assert!(gen(&["--check"]).status.success());
    let _ = std::fs::remove_dir_all(&dir);

    let o = harness(&["codegen", "--spec", spec, "--lang", "typescript", "--out", "/nonexistent", "--package", "Pay Client"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--package `Pay Client`: not an npm package name"), "{}", text(&o));
}

#[test]
fn the_examples_kotlin_clients_are_what_the_generator_writes() {
    for service in ["orders", "users", "payments"] {
        let spec = examples().join(format!("{service}.yaml"));
        let out = examples().join("kotlin");
        let o = harness(&["codegen", "--spec", spec.to_str().unwrap(), "--lang", "kotlin", "--out", out.to_str().unwrap(), "--check"]);
        assert!(
            o.status.success(),
            "examples/openapi/kotlin/{service} is stale: run `cargo run -p harness-cli -- codegen --spec examples/openapi/{service}.yaml --lang kotlin --out examples/openapi/kotlin`\n{}",
            text(&o)
        );
    }
}

#[test]
fn kotlin_check_fails_on_a_changed_missing_or_stray_file_and_the_package_is_a_directory_path() {
    let dir = std::env::temp_dir().join(format!("harness-codegen-kotlin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = examples().join("orders.yaml");
    let (spec, out) = (spec.to_str().unwrap(), dir.to_str().unwrap());
    let gen = |extra: &[&str]| harness(&[&["codegen", "--spec", spec, "--lang", "kotlin", "--out", out, "--package", "com.example.orders"], extra].concat());

    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("com/example/orders/Models.kt is missing"), "{}", text(&o));

    let o = gen(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("generated 4 operations, refused 0"), "{}", text(&o));
    for f in ["OrdersClient.kt", "Errors.kt", "Models.kt"] {
        let written = std::fs::read_to_string(dir.join("com/example/orders").join(f)).unwrap();
        assert!(written.contains("\npackage com.example.orders\n"), "{f} is not in the package");
    }
    assert!(gen(&["--check"]).status.success());

    let models = dir.join("com/example/orders/Models.kt");
    let original = std::fs::read_to_string(&models).unwrap();
    std::fs::write(&models, original.replace("public val amountMinor: Long", "public val amountMinor: Int")).unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("com/example/orders/Models.kt differs from what the spec generates"), "{}", text(&o));
    std::fs::write(&models, &original).unwrap();

    std::fs::write(dir.join("com/example/orders/Old.kt"), "").unwrap();
    let o = gen(&["--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("com/example/orders/Old.kt is not generated from the spec"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);

    // The default package is the service's name; a package Kotlin cannot declare is refused.
    let o = harness(&["codegen", "--spec", spec, "--lang", "kotlin", "--out", out, "--service", "order-book"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(dir.join("orderbook/OrderBookClient.kt").is_file(), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
    for bad in ["com.example.object", "com..orders", "1orders", "com.example.class"] {
        let o = harness(&["codegen", "--spec", spec, "--lang", "kotlin", "--out", out, "--package", bad]);
        assert_eq!(o.status.code(), Some(1), "{bad}: {}", text(&o));
        assert!(text(&o).contains(&format!("--package `{bad}`: not a Kotlin package name")), "{}", text(&o));
    }
}

#[test]
fn the_hostile_kotlin_client_the_binding_tests_compile_is_what_the_generator_writes() {
    let kotlin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings-kotlin/src/test");
    let spec = kotlin.join("openapi/hostile.yaml");
    let out = kotlin.join("generated");
    let o = harness(&["codegen", "--spec", spec.to_str().unwrap(), "--lang", "kotlin", "--out", out.to_str().unwrap(), "--check"]);
    assert!(
        o.status.success(),
        "bindings-kotlin/src/test/generated/hostile is stale: run `cargo run -p harness-cli -- codegen --spec bindings-kotlin/src/test/openapi/hostile.yaml --lang kotlin --out bindings-kotlin/src/test/generated`\n{}",
        text(&o)
    );
}
