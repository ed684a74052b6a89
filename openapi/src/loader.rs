//! The documents of one spec: the root file and every file its `$ref`s name, read once (YAML
//! or JSON, keys in document order) before anything is converted, so the rest of the reader
//! borrows them. A place in them is a `Loc`: a file and a JSON pointer.
//!
//! Guarantees: every `$ref` is resolved relative to the file it is written in; a reference
//! that cannot be followed (another host, a missing file or pointer, a cycle of references)
//! is an error naming where it is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A place in the spec: the file (an index into `Docs::files`) and a JSON pointer in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub file: usize,
    pub pointer: String,
}

impl Loc {
    /// The place of a key below this one.
    pub fn key(&self, k: &str) -> Loc {
        Loc { file: self.file, pointer: format!("{}/{}", self.pointer, escape(k)) }
    }

    pub fn index(&self, i: usize) -> Loc {
        Loc { file: self.file, pointer: format!("{}/{i}", self.pointer) }
    }
}

/// One JSON pointer segment (`/` and `~` escaped).
pub fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

pub struct Docs {
    /// Each file's path (as found, relative to the root file's folder when under it) and value.
    pub files: Vec<(PathBuf, Value)>,
    /// The root's folder: other files are named relative to it in messages.
    base: PathBuf,
    /// Each file's index by its canonical path.
    by_path: BTreeMap<PathBuf, usize>,
}

impl Docs {
    /// Reads `root` and, transitively, every file a `$ref` names.
    pub fn load(root: &Path) -> Result<Docs, String> {
        let base = root.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut docs = Docs { files: Vec::new(), base, by_path: BTreeMap::new() };
        let mut todo = vec![root.to_path_buf()];
        while let Some(path) = todo.pop() {
            let key = std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if docs.by_path.contains_key(&key) {
                continue;
            }
            let value = read_file(&path)?;
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut refs = Vec::new();
            collect_refs(&value, &mut refs);
            docs.by_path.insert(key, docs.files.len());
            docs.files.push((path, value));
            for r in refs {
                let file = r.split('#').next().unwrap_or("");
                if !file.is_empty() && !is_remote(file) {
                    todo.push(dir.join(file));
                }
            }
        }
        Ok(docs)
    }

    pub fn root(&self) -> &Value {
        &self.files[0].1
    }

    /// `#/a/b` in the root, `common.yaml#/a/b` elsewhere: how messages name a place.
    pub fn show(&self, loc: &Loc) -> String {
        if loc.file == 0 {
            return format!("#{}", loc.pointer);
        }
        let path = &self.files[loc.file].0;
        let shown = path.strip_prefix(&self.base).unwrap_or(path);
        format!("{}#{}", shown.display(), loc.pointer)
    }

    pub fn get(&self, loc: &Loc) -> Option<&Value> {
        let doc = &self.files[loc.file].1;
        if loc.pointer.is_empty() {
            Some(doc)
        } else {
            doc.pointer(&loc.pointer)
        }
    }

    /// Where the `$ref` written at `at` points.
    pub fn target(&self, reference: &str, at: &Loc) -> Result<Loc, String> {
        let (file, fragment) = match reference.split_once('#') {
            Some((f, frag)) => (f, frag),
            None => (reference, ""),
        };
        if is_remote(file) {
            return Err(format!("{}: `$ref: {reference}`: only local and file-relative references are supported", self.show(at)));
        }
        let file = if file.is_empty() {
            at.file
        } else {
            let dir = self.files[at.file].0.parent().map(Path::to_path_buf).unwrap_or_default();
            let key = std::fs::canonicalize(dir.join(file)).map_err(|e| format!("{}: `$ref: {reference}`: {e}", self.show(at)))?;
            *self.by_path.get(&key).ok_or_else(|| format!("{}: `$ref: {reference}`: the file was not loaded", self.show(at)))?
        };
        let pointer = percent_decode(fragment);
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!("{}: `$ref: {reference}`: only JSON-pointer fragments are supported (no `$id` anchors)", self.show(at)));
        }
        let loc = Loc { file, pointer };
        if self.get(&loc).is_none() {
            return Err(format!("{}: `$ref: {reference}`: nothing is there", self.show(at)));
        }
        Ok(loc)
    }

    /// The value at `loc` with its `$ref`s followed (a reference to a reference too), and where
    /// it was found. Keys beside a `$ref` are not merged here: the schema reader handles them.
    pub fn follow<'a>(&'a self, value: &'a Value, loc: &Loc) -> Result<(&'a Value, Loc), String> {
        let (mut value, mut loc) = (value, loc.clone());
        for _ in 0..32 {
            match value.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let next = self.target(r, &loc.key("$ref"))?;
                    value = self.get(&next).expect("target checked");
                    loc = next;
                }
                None => return Ok((value, loc)),
            }
        }
        Err(format!("{}: a cycle of `$ref`s", self.show(&loc)))
    }
}

fn is_remote(file: &str) -> bool {
    file.contains("://") || file.starts_with("//")
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push(r.clone());
            }
            o.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// A file as JSON (`.json`) or YAML (anything else; JSON is YAML too). YAML keys that are not
/// strings (`200:` is an integer) become strings, and merge keys (`<<`) are applied.
/// The largest document file read (the largest public specs are a few MB).
pub const MAX_FILE_BYTES: u64 = 32 << 20;

fn read_file(path: &Path) -> Result<Value, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{}: larger than {} MiB", path.display(), MAX_FILE_BYTES >> 20));
    }
    if path.extension().is_some_and(|e| e == "json") {
        return serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()));
    }
    let mut y: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| format!("{}: not YAML: {e}", path.display()))?;
    y.apply_merge().map_err(|e| format!("{}: {e}", path.display()))?;
    from_yaml(y).map_err(|e| format!("{}: {e}", path.display()))
}

fn from_yaml(y: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                serde_json::Number::from_f64(n.as_f64().unwrap_or(f64::NAN)).map(Value::Number).ok_or_else(|| format!("{n} is not a JSON number"))?
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(from_yaml).collect::<Result<_, _>>()?),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => return Err(format!("a mapping key that is not a string: {other:?}")),
                };
                out.insert(key, from_yaml(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => from_yaml(t.value)?,
    })
}
