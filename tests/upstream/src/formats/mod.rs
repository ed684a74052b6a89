//! The wire formats a simulated provider speaks (see `provider.rs`): each reads a request
//! into a `Call` and renders the shared plan (`Failure`, `Answer`, `Embeddings`) its way.

use serde_json::{json, Value};

use crate::provider::{Answer, Embeddings, Failure, Reply, StreamSpec};

mod anthropic;
mod embeddings;
mod gemini;
mod inhouse;
mod openai;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    OpenAi,
    Azure,
    Anthropic,
    Gemini,
    InHouse,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Azure => "azure",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::InHouse => "inhouse",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Chat,
    Embed,
}

/// One request, read in its format's terms.
pub(crate) struct Call {
    pub format: Format,
    pub op: Op,
    pub model: String,
    pub stream: bool,
    /// The text of a last assistant (Gemini: model) message to continue.
    pub prefill: Option<String>,
    /// Characters of prompt text, for the default `prompt_tokens` (a quarter of them).
    pub prompt_chars: usize,
    /// Embeddings: each input's text and the dimension it asks for.
    pub inputs: Vec<(String, Option<usize>)>,
    /// Embeddings: vectors as base64 of little-endian f32s.
    pub base64: bool,
    /// Gemini embeddings: `batchEmbedContents` (else `embedContent`).
    pub batch: bool,
    /// The in-house server's `max_new_tokens`: the answer stops there (`length`).
    pub max_new_tokens: Option<usize>,
    /// Refused before any fault: status and body.
    pub reject: Option<(u16, Value)>,
}

impl Call {
    fn new(format: Format, op: Op, model: String) -> Call {
        Call {
            format,
            op,
            model,
            stream: false,
            prefill: None,
            prompt_chars: 0,
            inputs: Vec::new(),
            base64: false,
            batch: false,
            max_new_tokens: None,
            reject: None,
        }
    }
}

/// A request header's value (names are lower-case), when present and not empty.
pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
}

/// A query parameter's value (not percent-decoded: the tests send plain values).
pub(crate) fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// Reads a request under `/llm/{name}`; `rest` is the path after the name, with its query.
pub(crate) fn read(rest: &str, headers: &[(String, String)], request: &Value) -> Call {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path == "/v1/messages" {
        return anthropic::read(headers, request);
    }
    if let Some(target) = path.strip_prefix("/v1beta/models/") {
        let (model, method) = target.rsplit_once(':').unwrap_or((target, ""));
        match method {
            "generateContent" | "streamGenerateContent" => {
                return gemini::read(model, method == "streamGenerateContent", query, headers, request)
            }
            "embedContent" | "batchEmbedContents" => {
                return embeddings::read_gemini(model, method == "batchEmbedContents", query, headers, request)
            }
            _ => {}
        }
    }
    if let Some(target) = path.strip_prefix("/openai/deployments/") {
        if let Some((deployment, op)) = target.split_once('/') {
            let embed = match op {
                "chat/completions" => Some(false),
                "embeddings" => Some(true),
                _ => None,
            };
            if let Some(embed) = embed {
                let mut call = if embed {
                    embeddings::read_openai(Format::Azure, request)
                } else {
                    openai::read(Format::Azure, request)
                };
                call.model = deployment.to_string();
                call.reject = openai::azure_reject(query, headers);
                return call;
            }
        }
    }
    if path == "/v1/embeddings" {
        return embeddings::read_openai(Format::OpenAi, request);
    }
    if path == "/inhouse/generate" {
        return inhouse::read(request);
    }
    openai::read(Format::OpenAi, request)
}

/// A failure's status, headers and body.
pub(crate) fn failure(format: Format, f: &Failure) -> (u16, Vec<(String, String)>, Value) {
    let headers = crate::provider::json_headers();
    let body = match format {
        Format::OpenAi | Format::Azure => openai::failure(f),
        Format::Anthropic => anthropic::failure(f),
        Format::Gemini => gemini::failure(f),
        Format::InHouse => inhouse::failure(f),
    };
    (f.status, headers, body)
}

/// A blocked prompt's answer.
pub(crate) fn blocked(format: Format, model: &str, prompt_tokens: u64, stream: bool) -> Reply {
    match format {
        Format::OpenAi | Format::Azure => Reply::json(400, &openai::content_filter()),
        Format::Anthropic => anthropic::blocked(model, prompt_tokens, stream),
        Format::Gemini => gemini::blocked(model, prompt_tokens, stream),
        Format::InHouse => Reply::json(400, &json!({"failure": {"kind": "blocked", "detail": "the prompt was blocked by the content policy"}})),
    }
}

/// An answer, buffered or streamed.
pub(crate) fn answer(format: Format, a: &Answer, stream: bool, spec: &StreamSpec) -> Reply {
    match format {
        Format::OpenAi | Format::Azure => openai::answer(a, stream, spec),
        Format::Anthropic => anthropic::answer(a, stream),
        Format::Gemini => gemini::answer(a, stream),
        Format::InHouse => inhouse::answer(a, stream),
    }
}

/// An embeddings answer.
pub(crate) fn embeddings(call: &Call, e: &Embeddings) -> Reply {
    match call.format {
        Format::Gemini => embeddings::gemini(e, call.batch),
        _ => embeddings::openai(e, call.base64),
    }
}

/// Anthropic's and OpenAI's SSE event with a name; Gemini's events have none.
pub(crate) fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}
