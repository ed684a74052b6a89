//! `harness codegen --spec FILE --lang python|typescript|kotlin --out DIR [--service NAME] [--package NAME]
//! [--check]`: a typed client package for one service, generated from its OpenAPI document by
//! `harness-codegen` into `DIR/PACKAGE/`. Prints what it wrote, then how many operations it
//! generated and each one it refused (with the pointer and the reason). `--check` writes
//! nothing and fails when a file in `DIR/PACKAGE/` differs from what would be generated, is
//! missing, or is one the generator would not write. For `--lang kotlin`, `--package` is the
//! Kotlin package (`com.example.orders`, default: the service's name in lower case) and the
//! files go to its directory path (`DIR/com/example/orders/`). For `--lang typescript`, it is the
//! npm package's name (lower case; `DIR/NAME/` holds index.js, index.mjs, their declarations and
//! package.json).

use std::path::{Path, PathBuf};
use std::time::Instant;

use harness_codegen::openapi;

pub const USAGE: &str = "harness codegen --spec FILE --lang python|typescript|kotlin --out DIR [--service NAME] [--package NAME] [--check]";

struct Args {
    spec: PathBuf,
    lang: String,
    out: PathBuf,
    service: Option<String>,
    package: Option<String>,
    check: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let (mut spec, mut lang, mut out, mut service, mut package, mut check) = (None, None, None, None, None, false);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--spec" => spec = Some(PathBuf::from(value("--spec")?)),
            "--lang" => lang = Some(value("--lang")?),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--service" => service = Some(value("--service")?),
            "--package" => package = Some(value("--package")?),
            "--check" => check = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args { spec: spec.ok_or("--spec is required")?, lang: lang.ok_or("--lang is required")?, out: out.ok_or("--out is required")?, service, package, check })
}

/// The service's name when `--service` is not given: the spec's file name without its
/// extension, in snake_case (`orders.yaml` -> `orders`).
fn default_service(spec: &Path) -> String {
    let stem = spec.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    openapi::python::snake(&stem)
}

/// A package name is a Python identifier (a service name, such as `user-accounts`, may not be).
fn check_package(p: &str) -> Result<(), String> {
    let ok = p.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("--package `{p}`: not a Python identifier"))
    }
}

/// What one run generates.
struct Generated {
    /// Each file, relative to `--out`.
    files: Vec<(PathBuf, String)>,
    /// How many operations were generated, and each refusal.
    summary: Vec<String>,
}

fn generate(args: &Args) -> Result<Generated, String> {
    let service = args.service.clone().unwrap_or_else(|| default_service(&args.spec));
    let package = match (&args.package, args.lang.as_str()) {
        (Some(p), _) => p.clone(),
        (None, "kotlin") => openapi::kotlin::default_package(&service),
        (None, _) => openapi::python::snake(&service),
    };
    match args.lang.as_str() {
        "typescript" => openapi::typescript::check_package(&package)?,
        "kotlin" if !openapi::kotlin::valid_package(&package) => return Err(format!("--package `{package}`: not a Kotlin package name")),
        "kotlin" => {}
        _ => check_package(&package)?,
    }
    let api = openapi::load(&args.spec)?;
    let source = args.spec.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let files = match args.lang.as_str() {
        "python" => openapi::python::emit(&api, &openapi::python::Options { service, package, source }),
        "typescript" => openapi::typescript::emit(&api, &openapi::typescript::Options { service, package, source }),
        "kotlin" => openapi::kotlin::emit(&api, &openapi::kotlin::Options { service, package, source }),
        other => return Err(format!("--lang {other}: expected python, typescript or kotlin")),
    };
    let mut summary = vec![format!("generated {} operations, refused {}", api.operations.len(), api.refused.len())];
    for r in &api.refused {
        let id = r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
        summary.push(format!("refused {} {}{id}: {}", r.method, r.path, r.reason));
    }
    Ok(Generated { files, summary })
}

pub fn run(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("harness codegen: {e}\nusage: {USAGE}");
            return 2;
        }
    };
    let started = Instant::now();
    let Generated { files, summary } = match generate(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness codegen: {e}");
            return 1;
        }
    };
    let elapsed = started.elapsed();
    if args.check {
        let stale = differences(&args.out, &files);
        if !stale.is_empty() {
            for s in &stale {
                eprintln!("harness codegen --check: {s}");
            }
            eprintln!("run `harness codegen` without --check (same arguments) and commit the result");
            return 1;
        }
        println!("{} files match {}", files.len(), args.spec.display());
        return 0;
    }
    for (path, text) in &files {
        let full = args.out.join(path);
        if std::fs::read_to_string(&full).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        if let Err(e) = write(&full, text) {
            eprintln!("harness codegen: {}: {e}", full.display());
            return 1;
        }
        println!("wrote {}", full.display());
    }
    for stray in strays(&args.out, &files) {
        eprintln!("harness codegen: {} is not generated any more; delete it", stray.display());
    }
    for line in &summary {
        println!("{line}");
    }
    println!("read and generated in {} ms", elapsed.as_millis());
    0
}

/// Why the files on disk are not what would be generated (empty when they are).
fn differences(out: &Path, files: &[(PathBuf, String)]) -> Vec<String> {
    let mut why = Vec::new();
    for (path, text) in files {
        let full = out.join(path);
        match std::fs::read_to_string(&full) {
            Ok(current) if current == *text => {}
            Ok(_) => why.push(format!("{} differs from what the spec generates", full.display())),
            Err(_) => why.push(format!("{} is missing", full.display())),
        }
    }
    for stray in strays(out, files) {
        why.push(format!("{} is not generated from the spec", stray.display()));
    }
    why
}

/// Files in the package's directory the generator does not write (caches aside).
fn strays(out: &Path, files: &[(PathBuf, String)]) -> Vec<PathBuf> {
    let Some(dir) = files.first().and_then(|(p, _)| p.parent()) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(out.join(dir)) else { return Vec::new() };
    let mut out_paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Caches, and what `npm install` in a TypeScript package adds.
        .filter(|p| p.file_name().is_some_and(|n| n != "__pycache__" && n != ".mypy_cache" && n != "node_modules"))
        .filter(|p| !files.iter().any(|(f, _)| out.join(f) == *p))
        .collect();
    out_paths.sort();
    out_paths
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}
