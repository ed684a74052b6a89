//! Embeddings: `client.embed(route, inputs, dimensions)` on a route of `kind: embeddings`.
//! Inputs are split into batches no larger than every provider of the route takes
//! (`providers[].max_batch`, else the format's limit), each batch is one routed call
//! (failover, breakers, cost), and the vectors are joined back in input order as one flat
//! float32 buffer (`EmbedResponse::vector(i)`), which bindings hand over without a copy
//! per element.
//!
//! Guarantees: every input gets exactly one vector, in order; all vectors have one length
//! (an answer with a missing, extra or differently sized vector is a broken answer, which
//! fails over); a batch that fails fails the call (no partial result). Vectors from
//! different models are not comparable: a route's embedding providers should serve the
//! same model (e.g. OpenAI and an Azure deployment of it).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::usage::Usage;
use crate::error::HarnessError;

/// An embeddings call a host sends (`EmbedRequest::from_host`: one JSON object).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    /// The texts to embed, one vector each.
    pub inputs: Vec<String>,
    /// Shorter vectors, for models that can give them (OpenAI's `dimensions`, Gemini's `outputDimensionality`).
    #[serde(default)]
    pub dimensions: Option<u32>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default, deserialize_with = "crate::request::host_millis")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub traceparent: Option<String>,
    /// Who the call is made for, kept in the audit record only.
    #[serde(default)]
    pub principal: Option<String>,
}

/// Most inputs in one call (a caller's list, before batching).
pub const MAX_INPUTS: usize = 100_000;

impl EmbedRequest {
    pub fn new(inputs: Vec<String>) -> Self {
        EmbedRequest { inputs, ..Default::default() }
    }

    pub fn from_host(text: &[u8]) -> Result<EmbedRequest, HarnessError> {
        crate::request::from_host_json("request", text)
    }

    /// Checks the inputs: at least one, none empty, at most `MAX_INPUTS`.
    pub(crate) fn check(&self) -> Result<(), HarnessError> {
        if self.inputs.is_empty() {
            return Err(HarnessError::config("inputs: expected at least one text to embed"));
        }
        if self.inputs.len() > MAX_INPUTS {
            return Err(HarnessError::config(format!("inputs: at most {MAX_INPUTS} texts in one call, got {}", self.inputs.len())));
        }
        if let Some(i) = self.inputs.iter().position(String::is_empty) {
            return Err(HarnessError::config(format!("inputs[{i}]: an empty text cannot be embedded")));
        }
        if self.dimensions == Some(0) {
            return Err(HarnessError::config("dimensions: expected an integer >= 1, got 0"));
        }
        Ok(())
    }

    /// One batch's body in OpenAI's shape (what every embeddings adapter reads).
    pub(crate) fn batch_body(&self, batch: &[String]) -> Value {
        let mut body = json!({"input": batch});
        if let Some(d) = self.dimensions {
            body["dimensions"] = json!(d);
        }
        body
    }
}

/// The vectors of an embeddings call, in input order, with what they cost.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct EmbedResponse {
    /// Every vector, one after another (`count` of `dimensions` floats); see `vector`.
    #[serde(skip)]
    pub data: Vec<f32>,
    /// How many vectors (one per input).
    pub count: u32,
    /// The length of every vector.
    pub dimensions: u32,
    pub usage: Option<Usage>,
    pub cost: Option<f64>,
    pub route: String,
    /// The provider that answered the first batch.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// How many calls the inputs were split into.
    pub batches: u32,
    /// Attempts across every batch.
    pub attempts: u32,
    /// The first batch's trace id.
    pub trace_id: String,
    pub elapsed_ms: f64,
}

impl EmbedResponse {
    /// Vector `i` (input `i`'s).
    pub fn vector(&self, i: usize) -> &[f32] {
        let d = self.dimensions as usize;
        &self.data[i * d..(i + 1) * d]
    }

    /// Every vector as little-endian bytes, one after another (what bindings copy once).
    pub fn le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() * 4);
        for f in &self.data {
            out.extend_from_slice(&f.to_le_bytes());
        }
        out
    }
}

/// One answer's vectors, read in any format.
#[derive(Debug, Default, Clone)]
pub struct Embedded {
    pub data: Vec<f32>,
    pub count: usize,
    pub dimensions: usize,
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

impl Embedded {
    /// Joins rows of one length; `Err` names what does not fit.
    pub(crate) fn from_rows(rows: Vec<Vec<f32>>, expected: Option<usize>) -> Result<Embedded, String> {
        if let Some(n) = expected {
            if rows.len() != n {
                return Err(format!("{} vectors for {n} inputs", rows.len()));
            }
        }
        let dimensions = rows.first().map_or(0, Vec::len);
        if dimensions == 0 {
            return Err("an empty vector".into());
        }
        if let Some(i) = rows.iter().position(|r| r.len() != dimensions) {
            return Err(format!("vector {i} has {} values, vector 0 has {dimensions}", rows[i].len()));
        }
        let count = rows.len();
        Ok(Embedded { data: rows.concat(), count, dimensions, usage: None, model: None })
    }

    /// The answer in OpenAI's shape (how a native format's is handed on and cached).
    pub(crate) fn openai_json(&self) -> Value {
        let data: Vec<Value> = self.data.chunks(self.dimensions.max(1)).enumerate().map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v})).collect();
        let mut out = json!({"object": "list", "data": data, "model": self.model});
        if let Some(u) = &self.usage {
            out["usage"] = json!({"prompt_tokens": u.prompt_tokens, "total_tokens": u.total_tokens});
        }
        out
    }
}

#[derive(Deserialize)]
struct OpenAiList {
    data: Vec<OpenAiItem>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct OpenAiItem {
    #[serde(default)]
    index: Option<usize>,
    embedding: Floats,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Floats {
    List(Vec<f32>),
    /// `encoding_format: base64`: little-endian float32s.
    Base64(String),
}

impl Floats {
    fn into_vec(self) -> Result<Vec<f32>, String> {
        match self {
            Floats::List(v) => Ok(v),
            Floats::Base64(s) => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(s.as_bytes()).map_err(|e| format!("a base64 embedding does not decode: {e}"))?;
                if bytes.len() % 4 != 0 {
                    return Err("a base64 embedding is not a whole number of float32s".into());
                }
                Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
            }
        }
    }
}

/// OpenAI's (and Azure's) embeddings answer, vectors in `index` order.
pub(crate) fn parse_openai(body: &[u8], inputs: Option<usize>) -> Result<Embedded, String> {
    let list: OpenAiList = serde_json::from_slice(body).map_err(|e| format!("not an embeddings list: {e}"))?;
    let n = list.data.len();
    let mut rows: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in list.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(pos);
        let slot = rows.get_mut(i).ok_or_else(|| format!("index {i} out of range for {n} vectors"))?;
        if slot.is_some() {
            return Err(format!("index {i} twice"));
        }
        *slot = Some(item.embedding.into_vec()?);
    }
    let rows: Vec<Vec<f32>> = rows.into_iter().map(|r| r.expect("every index filled once")).collect();
    let mut e = Embedded::from_rows(rows, inputs)?;
    e.usage = Usage::from_value(list.usage.as_ref())?;
    e.model = list.model;
    Ok(e)
}

#[derive(Deserialize)]
struct GeminiBatch {
    embeddings: Vec<GeminiValues>,
}

#[derive(Deserialize)]
struct GeminiValues {
    values: Vec<f32>,
}

/// Gemini's `batchEmbedContents` answer (no usage: Gemini reports none).
pub(crate) fn parse_gemini(body: &[u8], inputs: Option<usize>) -> Result<Embedded, String> {
    let b: GeminiBatch = serde_json::from_slice(body).map_err(|e| format!("not a batchEmbedContents answer: {e}"))?;
    Embedded::from_rows(b.embeddings.into_iter().map(|v| v.values).collect(), inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_answers_are_put_in_index_order_and_checked() {
        let e = parse_openai(br#"{"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":5,"total_tokens":5}}"#, Some(2)).unwrap();
        assert_eq!((e.data, e.count, e.dimensions, e.usage.unwrap().prompt_tokens), (vec![1.0, 2.0, 3.0, 4.0], 2, 2, 5));
        // base64, as OpenAI sends it with encoding_format=base64: [1.0, -2.5]
        let b64 = base64::engine::general_purpose::STANDARD.encode([1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat());
        let e = parse_openai(format!(r#"{{"data":[{{"embedding":"{b64}"}}]}}"#).as_bytes(), Some(1)).unwrap();
        assert_eq!(e.data, [1.0, -2.5]);
        assert!(parse_openai(br#"{"data":[{"embedding":[1]}]}"#, Some(2)).unwrap_err().contains("1 vectors for 2 inputs"));
        assert!(parse_openai(br#"{"data":[{"embedding":[1]},{"embedding":[1,2]}]}"#, Some(2)).unwrap_err().contains("vector 1 has 2"));
        assert!(parse_openai(br#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}"#, None).unwrap_err().contains("twice"));
        assert!(parse_openai(br#"{"data":[{"index":7,"embedding":[1]}]}"#, None).unwrap_err().contains("out of range"));
        assert!(parse_openai(br#"{"data":[{"embedding":[]}]}"#, None).unwrap_err().contains("empty"));
        assert!(parse_openai(b"{}", None).is_err());
    }

    #[test]
    fn gemini_answers_and_requests_are_checked() {
        let e = parse_gemini(br#"{"embeddings":[{"values":[0.5,1]},{"values":[2,3]}]}"#, Some(2)).unwrap();
        assert_eq!(e.data, [0.5, 1.0, 2.0, 3.0]);
        assert!(EmbedRequest::new(vec![]).check().unwrap_err().message.starts_with("inputs:"));
        assert!(EmbedRequest::new(vec!["a".into(), "".into()]).check().unwrap_err().message.starts_with("inputs[1]"));
        let r = EmbedResponse { data: vec![1.0, 2.0, 3.0, 4.0], count: 2, dimensions: 2, ..Default::default() };
        assert_eq!(r.vector(1), [3.0, 4.0]);
        assert_eq!(r.le_bytes().len(), 16);
    }
}
