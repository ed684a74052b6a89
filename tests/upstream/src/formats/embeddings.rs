//! Embeddings: OpenAI's and Azure's (`/v1/embeddings`,
//! `/openai/deployments/{deployment}/embeddings`: `{"object": "list", "data", "model",
//! "usage"}`, base64 on request) and Gemini's (`:embedContent`, `:batchEmbedContents`:
//! bare `values`, no usage). The vectors are made in `provider.rs`.

use serde_json::{json, Value};

use super::{gemini, Call, Format, Op};
use crate::provider::{Embeddings, Reply};

/// An input's text: a string, or any other JSON as its text (token arrays).
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

pub(super) fn read_openai(format: Format, request: &Value) -> Call {
    let model = request.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let mut call = Call::new(format, Op::Embed, model);
    let dims = request.get("dimensions").and_then(Value::as_u64).map(|d| d as usize);
    let inputs = match request.get("input") {
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(v) => vec![text(v)],
        None => Vec::new(),
    };
    call.inputs = inputs.into_iter().map(|t| (t, dims)).collect();
    call.base64 = request.get("encoding_format").and_then(Value::as_str) == Some("base64");
    call
}

/// The text of a Gemini `content`'s parts.
fn parts_text(content: Option<&Value>) -> String {
    let parts = content.and_then(|c| c.get("parts")).and_then(Value::as_array);
    parts.into_iter().flatten().filter_map(|p| p.get("text").and_then(Value::as_str)).collect()
}

fn gemini_input(request: &Value) -> (String, Option<usize>) {
    let dims = request.get("outputDimensionality").and_then(Value::as_u64).map(|d| d as usize);
    (parts_text(request.get("content")), dims)
}

pub(super) fn read_gemini(model: &str, batch: bool, query: &str, headers: &[(String, String)], request: &Value) -> Call {
    let mut call = Call::new(Format::Gemini, Op::Embed, model.to_string());
    call.batch = batch;
    call.inputs = if batch {
        request.get("requests").and_then(Value::as_array).into_iter().flatten().map(gemini_input).collect()
    } else {
        vec![gemini_input(request)]
    };
    call.reject = gemini::auth_reject(query, headers);
    call
}

pub(super) fn openai(e: &Embeddings, base64: bool) -> Reply {
    let data: Vec<Value> = e
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 { json!(encode_base64(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())) } else { json!(v) };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let body = json!({"object": "list", "data": data, "model": e.model, "usage": {"prompt_tokens": e.tokens, "total_tokens": e.tokens}});
    Reply::json(200, &body)
}

pub(super) fn gemini(e: &Embeddings, batch: bool) -> Reply {
    let mut values = e.vectors.iter().map(|v| json!({"values": v}));
    let body = if batch {
        json!({"embeddings": values.collect::<Vec<Value>>()})
    } else {
        json!({"embedding": values.next().unwrap_or_else(|| json!({"values": []}))})
    };
    Reply::json(200, &body)
}

/// Standard base64 with padding.
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode_base64;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(encode_base64(b""), "");
        assert_eq!(encode_base64(b"f"), "Zg==");
        assert_eq!(encode_base64(b"fo"), "Zm8=");
        assert_eq!(encode_base64(b"foo"), "Zm9v");
        assert_eq!(encode_base64(b"foobar"), "Zm9vYmFy");
    }
}
