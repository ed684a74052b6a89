//! The in-house model server (`POST /inhouse/generate`, `{"prompt", "max_new_tokens"?,
//! "stream"?}`): `{"output": {"text"}, "tokens": {"in", "out"}, "done_reason"}`, or SSE
//! `data: {"token"}` per word then `data: {"end": true, "tokens"}`; failures
//! `{"failure": {"kind", "detail"}}`. No tool calls; no prefill.

use serde_json::{json, Value};

use super::{sse, Call, Format, Op};
use crate::provider::{Answer, Failure, Reply, Stream};

pub(super) fn read(request: &Value) -> Call {
    let model = request.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let mut call = Call::new(Format::InHouse, Op::Chat, model);
    call.stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    call.prompt_chars = request.get("prompt").and_then(Value::as_str).map_or(0, str::len);
    call.max_new_tokens = request.get("max_new_tokens").and_then(Value::as_u64).map(|n| n as usize);
    call
}

pub(super) fn failure(f: &Failure) -> Value {
    let kind = f.code.clone().unwrap_or_else(|| if f.status == 429 || f.status >= 500 { "busy" } else { "bad_input" }.into());
    json!({"failure": {"kind": kind, "detail": f.message}})
}

pub(super) fn answer(a: &Answer, streamed: bool) -> Reply {
    let tokens = json!({"in": a.prompt_tokens, "out": a.completion_tokens});
    if !streamed {
        let done = if a.finish == "length" { "length" } else { "complete" };
        return Reply::json(200, &json!({"output": {"text": a.content}, "tokens": tokens, "done_reason": done}));
    }
    let mut events: Vec<(String, bool)> = a.words().into_iter().map(|w| (sse(None, &json!({"token": w})), true)).collect();
    events.push((sse(None, &json!({"end": true, "tokens": tokens})), false));
    Reply::Stream(Stream {
        events,
        error: sse(None, &json!({"failure": {"kind": "busy", "detail": "Overloaded"}})),
        malformed: "data: {\"token\": [broken\n\n".into(),
    })
}
