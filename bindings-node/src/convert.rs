//! The one conversion module: JS values to core requests (positional fields, cheaper across
//! napi than an object), and core values to JS values. Views (chat answers and chunks, routing
//! records, the route, credential and breaker state, errors) cross as the core's own serde JSON
//! with camelCased keys, exactly as `types.d.ts` (generated from the core's schema) declares
//! them; `index.js` parses a batch's views with one `JSON.parse`. No core type is restated here.

use bytes::Bytes;
use harness_core::{Body, ChatRequest, ErrorKind, ErrorView, HarnessError, Request};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde::Serialize;

// ---------------------------------------------------------------- JS to core

pub(crate) fn pairs(flat: Option<Vec<String>>, field: &str) -> std::result::Result<Vec<(String, String)>, HarnessError> {
    let Some(flat) = flat else { return Ok(Vec::new()) };
    if flat.len() % 2 != 0 {
        return Err(HarnessError::config(format!("request.{field}: expected name/value pairs")));
    }
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(it.len() / 2);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

/// The JS-side fields of a request.
#[allow(clippy::too_many_arguments)]
pub(crate) fn request(
    service: String,
    method: String,
    path: String,
    endpoint: Option<String>,
    query: Option<Vec<String>>,
    headers: Option<Vec<String>>,
    json: Option<String>,
    body: Option<&[u8]>,
    idempotency_key: Option<String>,
    timeout_ms: Option<f64>,
    traceparent: Option<String>,
    principal: Option<String>,
) -> std::result::Result<Request, HarnessError> {
    let body = match (json, body) {
        (Some(_), Some(_)) => return Err(HarnessError::config("request.json: give either json or body, not both")),
        // JSON.stringify's text, sent byte for byte; the core checks nesting, NaN and lone surrogates.
        (Some(text), None) => Body::JsonText(Bytes::from(text.into_bytes())),
        (None, Some(buf)) => Body::Bytes(Bytes::copy_from_slice(buf)),
        (None, None) => Body::Empty,
    };
    Ok(Request {
        service,
        method,
        path,
        endpoint,
        query: pairs(query, "query")?,
        headers: pairs(headers, "headers")?,
        body,
        idempotency_key,
        timeout_ms: timeout_ms_of(timeout_ms)?,
        traceparent,
        principal,
    })
}

/// The core's chat request from JS: `messages` and `params` as JSON.stringify wrote them
/// (JS checked NaN, BigInt and cycles; the core checks nesting and lone surrogates here,
/// and the messages' shape when the call starts).
pub(crate) fn chat_request(
    messages: String,
    params: Option<String>,
    headers: Option<Vec<String>>,
    timeout_ms: Option<f64>,
    traceparent: Option<String>,
    principal: Option<String>,
) -> std::result::Result<ChatRequest, HarnessError> {
    let messages = json_value("messages", &messages)?;
    let params = match params {
        None => serde_json::Map::new(),
        Some(text) => match json_value("params", &text)? {
            serde_json::Value::Object(map) => map,
            _ => return Err(HarnessError::config("params: expected an object of chat parameters")),
        },
    };
    Ok(ChatRequest { messages, params, headers: pairs(headers, "headers")?, timeout_ms: timeout_ms_of(timeout_ms)?, traceparent, principal })
}

/// A JS timeout in milliseconds, held to the rule the core applies to every `*_ms` it reads
/// (the config's are whole milliseconds: a fraction is refused, naming the field).
pub(crate) fn timeout_ms_of(timeout_ms: Option<f64>) -> std::result::Result<Option<u64>, HarnessError> {
    timeout_ms.map(|t| millis_of("request.timeout_ms", t)).transpose()
}

/// A JS duration in milliseconds: the core's rule (`harness_core::request::millis`).
pub(crate) fn millis_of(field: &str, ms: f64) -> std::result::Result<u64, HarnessError> {
    harness_core::request::millis(field, ms)
}

/// JSON text from `JSON.stringify` as a value: checked (depth, lone surrogates) before parsing.
pub(crate) fn json_value(field: &str, text: &str) -> std::result::Result<serde_json::Value, HarnessError> {
    harness_core::json::check_text(field, text.as_bytes())?;
    harness_core::json::parse_checked(text).map_err(|e| HarnessError::config(format!("{field}: not valid JSON: {e}")))
}

// ---------------------------------------------------------------- core to JS

/// The length of `s` in UTF-16 code units (JS string indices).
pub(crate) fn utf16_len(s: &str) -> usize {
    if s.is_ascii() { s.len() } else { s.encode_utf16().count() }
}

/// Appends `v` as JSON with camelCased keys (`finish_reason` -> `finishReason`), the names
/// `types.d.ts` gives the views. Values (`half_open`, a user's text) are never touched.
pub(crate) fn write_view<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let start = out.len();
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, CamelKeys::default());
    if v.serialize(&mut ser).is_err() {
        // The views always serialise; should one not, JS gets `null` rather than half a value.
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
}

/// `v` as camelCased JSON text (a view a synchronous call returns).
pub(crate) fn view_text<T: Serialize + ?Sized>(v: &T) -> String {
    let mut out = Vec::with_capacity(256);
    write_view(&mut out, v);
    text_of(out)
}

/// serde_json writes UTF-8 and `CamelKeys` only drops ASCII underscores, so this never loses text.
pub(crate) fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// serde_json's compact output, with `_x` in object keys written as `X`.
#[derive(Default)]
struct CamelKeys {
    in_key: bool,
    upper_next: bool,
}

impl serde_json::ser::Formatter for CamelKeys {
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        self.in_key = true;
        self.upper_next = false;
        if first { Ok(()) } else { writer.write_all(b",") }
    }

    fn end_object_key<W: ?Sized + std::io::Write>(&mut self, _writer: &mut W) -> std::io::Result<()> {
        self.in_key = false;
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, fragment: &str) -> std::io::Result<()> {
        if !self.in_key || !fragment.contains('_') && !self.upper_next {
            return writer.write_all(fragment.as_bytes());
        }
        for part in fragment.split_inclusive('_') {
            let (word, underscore) = match part.strip_suffix('_') {
                Some(w) => (w, true),
                None => (part, false),
            };
            let mut chars = word.chars();
            if self.upper_next {
                if let Some(c) = chars.next() {
                    let mut buf = [0u8; 4];
                    writer.write_all(c.to_ascii_uppercase().encode_utf8(&mut buf).as_bytes())?;
                    self.upper_next = false;
                }
            }
            writer.write_all(chars.as_str().as_bytes())?;
            if underscore {
                self.upper_next = true;
            }
        }
        Ok(())
    }
}

/// An error as data: the core's `ErrorView` (camelCased JSON: kind, text, context, provider
/// errors) and the downstream body, which the view leaves out. `index.js` builds its class.
#[napi(object, object_from_js = false)]
pub struct NativeError {
    pub view: String,
    pub body: Option<Buffer>,
}

pub(crate) fn error(e: HarnessError) -> NativeError {
    let view = view_text(&ErrorView::of(&e));
    NativeError { view, body: e.body.map(|b| Buffer::from(Vec::from(b))) }
}

/// A synchronous call's result: the value, or the error as data.
pub type Fallible<T> = Either<T, NativeError>;

pub(crate) fn fallible<T>(r: std::result::Result<T, HarnessError>) -> Fallible<T> {
    match r {
        Ok(v) => Either::A(v),
        Err(e) => Either::B(error(e)),
    }
}

/// Every error class name, base first (the JS class tree is built from this).
#[napi]
pub fn error_names() -> Vec<String> {
    ErrorKind::NAMES.iter().map(|s| s.to_string()).collect()
}

/// The core's error for a host value that JS could not encode faithfully, naming `field`:
/// `lone_surrogate` (a string that is not valid Unicode), `too_deep` (nested past the limit,
/// where JSON.stringify overflowed its stack) or `non_finite` (NaN or an infinity, which
/// JSON.stringify writes as `null`).
#[napi]
pub fn host_input_error(kind: String, field: String) -> NativeError {
    let e = match kind.as_str() {
        "lone_surrogate" => harness_core::json::lone_surrogate(&field),
        "too_deep" => harness_core::json::too_deep(&field),
        "non_finite" => harness_core::json::non_finite(&field),
        other => HarnessError::config(format!("{field}: {other}")),
    };
    error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct View {
        finish_reason: Option<&'static str>,
        attempts_by_provider: Vec<(&'static str, u32)>,
        usage: Usage,
        state: &'static str,
    }

    #[derive(Serialize)]
    struct Usage {
        prompt_tokens: u32,
    }

    #[test]
    fn views_have_camel_keys_and_untouched_values() {
        let v = View { finish_reason: None, attempts_by_provider: vec![("a_b", 2)], usage: Usage { prompt_tokens: 3 }, state: "half_open" };
        assert_eq!(view_text(&v), r#"{"finishReason":null,"attemptsByProvider":[["a_b",2]],"usage":{"promptTokens":3},"state":"half_open"}"#);
    }

    #[test]
    fn the_error_text_is_the_cores() {
        let e = HarnessError::config("request.path: expected a string");
        let v: serde_json::Value = serde_json::from_str(&view_text(&ErrorView::of(&e))).unwrap();
        assert_eq!(v["kind"], "ConfigError");
        assert_eq!(v["text"], ErrorView::of(&e).text);
        assert!(v.get("providerErrors").is_some() && v.get("retryAfterMs").is_some());
    }

    #[test]
    fn fractional_and_negative_milliseconds_are_refused_naming_the_field() {
        assert_eq!(timeout_ms_of(Some(250.0)).unwrap(), Some(250));
        for bad in [1.5, -1.0, f64::NAN, f64::INFINITY] {
            assert!(timeout_ms_of(Some(bad)).unwrap_err().message.starts_with("request.timeout_ms"), "{bad}");
        }
    }
}
