//! JSON bodies and configs as the host wrote them: key order kept, numbers exact,
//! NaN and infinities refused, and one nesting limit everywhere.
//!
//! Guarantees: nothing here recurses, so no input, however deep, can overflow a
//! stack; every value past `MAX_DEPTH` levels of nesting is a `ConfigError` naming
//! the field. Bindings walk host values into a `JsonWriter` (Python) or hand over
//! text their runtime produced (`check_text`, Node and the JVM).

use bytes::Bytes;

use crate::error::HarnessError;

/// The most levels of arrays and objects in a request body or a config, in every language.
pub const MAX_DEPTH: usize = 512;

/// The error for a value nested past `MAX_DEPTH`, naming `field`.
pub fn too_deep(field: &str) -> HarnessError {
    HarnessError::config(format!("{field}: nested deeper than {MAX_DEPTH} levels"))
}

/// The error for NaN or an infinity, which JSON cannot carry, naming `field`.
pub fn non_finite(field: &str) -> HarnessError {
    HarnessError::config(format!("{field}: NaN and Infinity are not JSON numbers"))
}

/// Parses JSON text already checked by `check_text`: the depth is bounded by
/// `MAX_DEPTH`, so serde_json's own (lower) recursion limit is lifted.
pub fn parse_checked(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = serde_json::Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Parses untrusted JSON (a downstream's body, a schema file): refused past `MAX_DEPTH`
/// levels by a linear scan first, so neither the parser nor a later walk of the value
/// (masking, validation) can run out of stack on a hostile document.
pub fn parse_bounded(text: &[u8]) -> Result<serde_json::Value, String> {
    check_text("body", text).map_err(|e| e.message)?;
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8: {e}"))?;
    parse_checked(text).map_err(|e| e.to_string())
}

/// Checks JSON text: at most `MAX_DEPTH` levels, no bare `NaN`/`Infinity` (which
/// some encoders emit) and no lone surrogate escape (`"\ud800"`, which some encoders
/// emit for a malformed host string). A linear scan; the downstream parses the rest.
pub fn check_text(field: &str, text: &[u8]) -> Result<(), HarnessError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if in_string {
            match b {
                b'\\' if text.get(i + 1) == Some(&b'u') => {
                    let unit = hex4(text, i + 2);
                    match unit {
                        Some(0xD800..=0xDBFF) => {
                            let low = (text.get(i + 6) == Some(&b'\\') && text.get(i + 7) == Some(&b'u'))
                                .then(|| hex4(text, i + 8))
                                .flatten();
                            if !matches!(low, Some(0xDC00..=0xDFFF)) {
                                return Err(lone_surrogate(field));
                            }
                            i += 12;
                        }
                        Some(0xDC00..=0xDFFF) => return Err(lone_surrogate(field)),
                        _ => i += 6,
                    }
                    continue;
                }
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(too_deep(field));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'N' | b'I' => return Err(non_finite(field)),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// The error for a string with an unpaired UTF-16 surrogate (not valid Unicode).
pub fn lone_surrogate(field: &str) -> HarnessError {
    HarnessError::config(format!("{field}: contains a lone surrogate (not valid Unicode)"))
}

/// Checks a `serde_json::Value` built in Rust: depth and nothing else (it cannot hold NaN).
pub fn check_value(field: &str, value: &serde_json::Value) -> Result<(), HarnessError> {
    let mut stack: Vec<(&serde_json::Value, usize)> = vec![(value, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            serde_json::Value::Array(a) => {
                if d + 1 > MAX_DEPTH {
                    return Err(too_deep(field));
                }
                stack.extend(a.iter().map(|x| (x, d + 1)));
            }
            serde_json::Value::Object(o) => {
                if d + 1 > MAX_DEPTH {
                    return Err(too_deep(field));
                }
                stack.extend(o.values().map(|x| (x, d + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Nesting of a YAML or TOML document, over-estimated cheaply without parsing:
/// flow brackets outside quotes and comments, plus block indentation levels and
/// `- ` sequence entries. Run before a parser that would be slow (or recurse) on
/// pathological input.
pub fn check_config_text(field: &str, text: &str) -> Result<(), HarnessError> {
    let mut flow = 0usize;
    let mut indents: Vec<usize> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut block = 0usize;
        if flow == 0 {
            let indent = line.len() - trimmed.len();
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
            let mut rest = trimmed;
            while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("-\t")) {
                block += 1;
                rest = r.trim_start_matches([' ', '\t']);
            }
        }
        let mut quote: Option<char> = None;
        let mut escaped = false;
        let mut prev_space = true;
        for c in trimmed.chars() {
            match quote {
                Some('"') if escaped => escaped = false,
                Some('"') if c == '\\' => escaped = true,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '#' if prev_space => break,
                    '[' | '{' => flow += 1,
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            if indents.len() + block + flow > MAX_DEPTH {
                return Err(too_deep(field));
            }
            prev_space = c == ' ' || c == '\t';
        }
        if indents.len() + block + flow > MAX_DEPTH {
            return Err(too_deep(field));
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Frame {
    Array { first: bool },
    Object { first: bool, after_key: bool },
}

/// Writes JSON text from a host value walk, enforcing `MAX_DEPTH`, finite numbers
/// and valid number syntax. Key order is the order of `key` calls.
pub struct JsonWriter {
    out: Vec<u8>,
    stack: Vec<Frame>,
    field: &'static str,
}

impl JsonWriter {
    /// `field` names the argument in errors (`json`).
    pub fn new(field: &'static str) -> Self {
        JsonWriter { out: Vec::with_capacity(128), stack: Vec::new(), field }
    }

    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    fn before_value(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Array { first }) => {
                if !*first {
                    self.out.push(b',');
                }
                *first = false;
            }
            Some(Frame::Object { after_key, .. }) => *after_key = false,
            None => {}
        }
    }

    fn open(&mut self, frame: Frame, byte: u8) -> Result<(), HarnessError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(self.field));
        }
        self.before_value();
        self.out.push(byte);
        self.stack.push(frame);
        Ok(())
    }

    pub fn begin_array(&mut self) -> Result<(), HarnessError> {
        self.open(Frame::Array { first: true }, b'[')
    }

    pub fn end_array(&mut self) {
        self.stack.pop();
        self.out.push(b']');
    }

    pub fn begin_object(&mut self) -> Result<(), HarnessError> {
        self.open(Frame::Object { first: true, after_key: false }, b'{')
    }

    pub fn end_object(&mut self) {
        self.stack.pop();
        self.out.push(b'}');
    }

    pub fn key(&mut self, k: &str) {
        if let Some(Frame::Object { first, after_key }) = self.stack.last_mut() {
            if !*first {
                self.out.push(b',');
            }
            *first = false;
            *after_key = true;
        }
        self.write_string(k);
        self.out.push(b':');
    }

    pub fn string(&mut self, s: &str) {
        self.before_value();
        self.write_string(s);
    }

    fn write_string(&mut self, s: &str) {
        self.out.push(b'"');
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let esc: Option<&[u8]> = match b {
                b'"' => Some(b"\\\""),
                b'\\' => Some(b"\\\\"),
                b'\n' => Some(b"\\n"),
                b'\r' => Some(b"\\r"),
                b'\t' => Some(b"\\t"),
                0x08 => Some(b"\\b"),
                0x0c => Some(b"\\f"),
                b if b < 0x20 => None,
                _ => continue,
            };
            self.out.extend_from_slice(&bytes[start..i]);
            match esc {
                Some(e) => self.out.extend_from_slice(e),
                None => self.out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            }
            start = i + 1;
        }
        self.out.extend_from_slice(&bytes[start..]);
        self.out.push(b'"');
    }

    pub fn null(&mut self) {
        self.before_value();
        self.out.extend_from_slice(b"null");
    }

    pub fn bool(&mut self, v: bool) {
        self.before_value();
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
    }

    pub fn i64(&mut self, v: i64) {
        self.before_value();
        self.out.extend_from_slice(v.to_string().as_bytes());
    }

    /// A finite float; NaN and infinities are a `ConfigError`.
    pub fn f64(&mut self, v: f64) -> Result<(), HarnessError> {
        if !v.is_finite() {
            return Err(HarnessError::config(format!("{}: {v} is not a JSON number (NaN and Infinity are refused)", self.field)));
        }
        self.before_value();
        let mut b = ryu_like(v);
        if !b.contains(['.', 'e', 'E']) {
            b.push_str(".0");
        }
        self.out.extend_from_slice(b.as_bytes());
        Ok(())
    }

    /// A number already spelled by the host (a big integer, a float's repr), checked against the JSON grammar.
    pub fn number_text(&mut self, text: &str) -> Result<(), HarnessError> {
        if !is_json_number(text) {
            return Err(HarnessError::config(format!("{}: {text:?} is not a JSON number", self.field)));
        }
        self.before_value();
        self.out.extend_from_slice(text.as_bytes());
        Ok(())
    }

    pub fn finish(self) -> Bytes {
        Bytes::from(self.out)
    }
}

fn ryu_like(v: f64) -> String {
    // serde_json's formatting of a finite f64 (shortest round-trip).
    serde_json::Number::from_f64(v).map(|n| n.to_string()).unwrap_or_else(|| "0".into())
}

/// The JSON number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
pub fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_keeps_key_order_and_exact_numbers() {
        let mut w = JsonWriter::new("json");
        w.begin_object().unwrap();
        w.key("z");
        w.i64(1);
        w.key("a");
        w.begin_array().unwrap();
        w.number_text("18446744073709551616").unwrap();
        w.number_text("1000000000000000000000000000000").unwrap();
        w.f64(1.5).unwrap();
        w.string("q\"\n\u{1}");
        w.null();
        w.bool(true);
        w.end_array();
        w.end_object();
        assert_eq!(
            &w.finish()[..],
            br#"{"z":1,"a":[18446744073709551616,1000000000000000000000000000000,1.5,"q\"\n\u0001",null,true]}"#
        );
    }

    #[test]
    fn writer_refuses_nan_depth_and_bad_numbers() {
        let mut w = JsonWriter::new("json");
        assert!(w.f64(f64::NAN).unwrap_err().message.starts_with("json:"));
        assert!(w.f64(f64::INFINITY).is_err());
        assert!(w.number_text("1e").is_err() && w.number_text("01").is_err() && w.number_text("NaN").is_err());
        let mut w = JsonWriter::new("json");
        for _ in 0..MAX_DEPTH {
            w.begin_array().unwrap();
        }
        assert_eq!(w.begin_array().unwrap_err().message, "json: nested deeper than 512 levels");
    }

    #[test]
    fn text_check_counts_depth_outside_strings() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        check_text("json", ok.as_bytes()).unwrap();
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(check_text("json", deep.as_bytes()).is_err());
        check_text("json", br#"{"a":"[[[[\"[[[["}"#).unwrap();
        assert!(check_text("json", b"[NaN]").is_err());
        assert!(check_text("json", b"[-Infinity]").is_err());
        check_text("json", br#"["\ud83d\ude00 ok \u00e9 \\ud800"]"#).unwrap();
        for bad in [&br#"["\ud800"]"#[..], br#"["\ud800x"]"#, br#"["\udc00"]"#, br#"["a\ud83d\u0041"]"#] {
            assert!(check_text("json", bad).unwrap_err().message.contains("lone surrogate"));
        }
    }

    #[test]
    fn config_text_check_is_fast_and_bounded() {
        let flow = format!("a: {}", "[".repeat(100_000));
        let t = std::time::Instant::now();
        assert!(check_config_text("config", &flow).is_err());
        let block: String = (0..600).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert!(check_config_text("config", &block).is_err());
        let seq = format!("a:\n  {}x\n", "- ".repeat(100_000));
        assert!(check_config_text("config", &seq).is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        check_config_text("config", "services:\n  a:\n    base_url: \"http://x/#[[[\"  # [[[\n    headers: {x: '[['}\n").unwrap();
    }

    #[test]
    fn checked_text_parses_to_the_limit() {
        let deep = format!("{}0{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        check_text("config", deep.as_bytes()).unwrap();
        let v = parse_checked(&deep).unwrap();
        check_value("config", &v).unwrap();
        assert!(parse_checked("[1] x").is_err());
    }

    #[test]
    fn value_check_is_iterative() {
        let mut v = serde_json::json!(1);
        for _ in 0..MAX_DEPTH {
            v = serde_json::json!([v]);
        }
        check_value("json", &v).unwrap();
        let v = serde_json::json!([v]);
        assert!(check_value("json", &v).is_err());
    }
}
