//! Files a config names: secrets (`file:`), response schemas, mock fixtures (`json_file`)
//! and the audit log, and the config file itself.
//!
//! Guarantees: a relative path in a config *file* resolves against that file's folder, as a
//! person reading the file expects; a config given as data (a dict, an object, a map, a
//! reload body) keeps the working directory. Every file read for a config must be a
//! regular file (not `/dev/zero`, a FIFO or a directory) of at most `MAX_FILE_BYTES`, else
//! a `ConfigError` naming the field; nothing is read past the cap.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::HarnessError;
use crate::redact::escape_control;

/// Largest file a config may name (and largest config file).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads a file a config names, as UTF-8 text; `field` names it in errors.
pub fn read_text(path: &Path, field: &str) -> Result<String, HarnessError> {
    let shown = escape_control(&path.display().to_string()).into_owned();
    let bad = |why: String| HarnessError::config(format!("{field}: {shown:?} {why}"));
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot be read: {}", e.kind())))?;
    if !meta.is_file() {
        return Err(bad("is not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(bad(format!("is {} bytes, over the {MAX_FILE_BYTES}-byte limit", meta.len())));
    }
    let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot be read: {}", e.kind())))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file that grows while read is still cut at the cap.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| bad(format!("cannot be read: {}", e.kind())))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(format!("is over the {MAX_FILE_BYTES}-byte limit")));
    }
    String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))
}

/// Makes the relative file references of a config document loaded from `dir` absolute.
pub fn resolve_relative(doc: &mut Value, dir: &Path) {
    for_each_file_ref(doc, &mut |v| {
        if let Value::String(s) = v {
            if !s.is_empty() && Path::new(s.as_str()).is_relative() {
                *s = dir.join(s.as_str()).display().to_string();
            }
        }
    });
}

/// Every file reference in a config document, with its field path (`services.a.auth.token.file`).
pub fn file_refs(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut doc = doc.clone();
    walk(&mut doc, &mut |path, v| {
        if let Value::String(s) = v {
            out.push((path.to_string(), s.clone()));
        }
    });
    out
}

fn for_each_file_ref(doc: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    walk(doc, &mut |_, v| f(v));
}

/// The places a config names a file (kept in one list so that path resolution, the
/// gateway's reload rule and the docs agree).
fn walk(doc: &mut Value, f: &mut dyn FnMut(&str, &mut Value)) {
    const SECRET_FIELDS: [&str; 3] = ["token", "client_id", "client_secret"];
    if let Some(services) = doc.get_mut("services").and_then(Value::as_object_mut) {
        for (name, svc) in services.iter_mut() {
            if let Some(auth) = svc.get_mut("auth").and_then(Value::as_object_mut) {
                for field in SECRET_FIELDS {
                    if let Some(file) = auth.get_mut(field).and_then(|s| s.get_mut("file")) {
                        f(&format!("services.{name}.auth.{field}.file"), file);
                    }
                }
                if let Some(keys) = auth.get_mut("keys").and_then(Value::as_array_mut) {
                    for (i, k) in keys.iter_mut().enumerate() {
                        if let Some(file) = k.get_mut("file") {
                            f(&format!("services.{name}.auth.keys[{i}].file"), file);
                        }
                    }
                }
            }
            match svc.get_mut("openapi") {
                Some(spec @ Value::String(_)) => f(&format!("services.{name}.openapi"), spec),
                Some(Value::Object(o)) => {
                    if let Some(spec) = o.get_mut("spec").filter(|s| s.is_string()) {
                        f(&format!("services.{name}.openapi.spec"), spec);
                    }
                }
                _ => {}
            }
            if let Some(endpoints) = svc.get_mut("endpoints").and_then(Value::as_object_mut) {
                for (key, ep) in endpoints.iter_mut() {
                    if let Some(schema) = ep.get_mut("response_schema").filter(|s| s.is_string()) {
                        f(&format!("services.{name}.endpoints.{key}.response_schema"), schema);
                    }
                }
            }
        }
    }
    if let Some(mocked) = doc.pointer_mut("/mock/services").and_then(Value::as_object_mut) {
        for (name, rules) in mocked.iter_mut() {
            for (i, rule) in rules.as_array_mut().into_iter().flatten().enumerate() {
                if let Some(file) = rule.get_mut("json_file") {
                    f(&format!("mock.services.{name}[{i}].json_file"), file);
                }
            }
        }
    }
    if let Some(file) = doc.pointer_mut("/audit/sink/file") {
        f("audit.sink.file", file);
    }
}

/// The folder relative references of a config file resolve against.
pub fn folder_of(path: &Path) -> PathBuf {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    absolute.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn relative_references_resolve_against_the_folder_and_absolute_ones_stay() {
        let mut doc = json!({
            "services": {"a": {
                "auth": {"type": "bearer", "token": {"file": "secrets/token"}, "keys": []},
                "endpoints": {"GET /x": {"response_schema": "schemas/x.json"}, "GET /y": {"response_schema": {"type": "object"}}}
            }, "b": {"auth": {"type": "header", "header": "x-k", "keys": [{"file": "/abs/k1"}, {"value": "v"}, {"file": "k3"}]}}},
            "mock": {"services": {"a": [{"path": "/x", "json_file": "fixtures/x.json"}]}},
            "audit": {"sink": {"file": "audit.log"}}
        });
        resolve_relative(&mut doc, Path::new("/etc/harness"));
        assert_eq!(doc["services"]["a"]["auth"]["token"]["file"], "/etc/harness/secrets/token");
        assert_eq!(doc["services"]["a"]["endpoints"]["GET /x"]["response_schema"], "/etc/harness/schemas/x.json");
        assert_eq!(doc["services"]["a"]["endpoints"]["GET /y"]["response_schema"], json!({"type": "object"}));
        assert_eq!(doc["services"]["b"]["auth"]["keys"][0]["file"], "/abs/k1");
        assert_eq!(doc["services"]["b"]["auth"]["keys"][2]["file"], "/etc/harness/k3");
        assert_eq!(doc["mock"]["services"]["a"][0]["json_file"], "/etc/harness/fixtures/x.json");
        assert_eq!(doc["audit"]["sink"]["file"], "/etc/harness/audit.log");
        let refs = file_refs(&doc);
        assert_eq!(refs.len(), 6, "{refs:?}");
        assert!(refs.contains(&("services.b.auth.keys[2].file".into(), "/etc/harness/k3".into())));
    }

    #[test]
    fn only_regular_files_under_the_cap_are_read() {
        let e = read_text(Path::new("/dev/zero"), "mock.services.a[0].json_file").unwrap_err();
        assert!(e.message.starts_with("mock.services.a[0].json_file: \"/dev/zero\" is not a regular file"), "{}", e.message);
        let e = read_text(Path::new("/"), "f").unwrap_err();
        assert!(e.message.contains("not a regular file"), "{}", e.message);
        let dir = std::env::temp_dir().join(format!("harness-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json");
        std::fs::File::create(&big).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_text(&big, "f").unwrap_err();
        assert!(e.message.contains("over the"), "{}", e.message);
        let ok = dir.join("ok.json");
        std::fs::write(&ok, "{}").unwrap();
        assert_eq!(read_text(&ok, "f").unwrap(), "{}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
