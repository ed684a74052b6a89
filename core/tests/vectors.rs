//! Runs every shared scenario vector (tests/vectors/scenarios.json) through the
//! core against the fault-injecting upstream. The binding test suites run the same file.

#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use harness_core::{Body, Client, HarnessError, Request, Response};
use serde_json::{json, Value};

struct Ctx {
    upstream: harness_upstream::Upstream,
    admin: reqwest::Client,
}

fn substitute(v: &mut Value, ctx: &Ctx) {
    match v {
        Value::String(s) => {
            *s = s
                .replace("{token_url}", "{upstream}/s/{name}-token/oauth/token")
                .replace("{llm}", "{upstream}/llm/{name}-")
                .replace("{upstream}", &ctx.upstream.url())
                .replace("{blackhole}", &ctx.upstream.blackhole_url())
                .replace("{closed}", &ctx.upstream.closed_url())
                .replace("{vectors}", concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors"));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute(x, ctx)),
        Value::Object(o) => o.values_mut().for_each(|x| substitute(x, ctx)),
        _ => {}
    }
}

use harness_upstream::merge_json as merge;

fn build_request(scenario: &str, call: &Value) -> Request {
    let s = |k: &str| call.get(k).and_then(Value::as_str).map(str::to_string);
    // A routed request names the route as its service, and its path is the provider's own.
    let mut req = match s("route") {
        Some(route) => Request::new(route, s("method").unwrap(), s("path").unwrap()),
        None => Request::new(s("service").unwrap_or_else(|| "svc".into()), s("method").unwrap(), format!("/s/{scenario}{}", s("path").unwrap())),
    };
    req.endpoint = s("endpoint");
    req.idempotency_key = s("idempotency_key");
    req.traceparent = s("traceparent");
    req.timeout_ms = call.get("timeout_ms").and_then(Value::as_u64);
    match call.get("headers") {
        Some(Value::Object(h)) => req.headers = h.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect(),
        Some(Value::Array(pairs)) => {
            req.headers = pairs.iter().map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string())).collect()
        }
        _ => {}
    }
    if let Some(depth) = call.get("json_depth").and_then(Value::as_u64) {
        let depth = depth as usize;
        req.body = Body::JsonText(format!("{}0{}", "[".repeat(depth), "]".repeat(depth)).into());
    } else if let Some(j) = call.get("json") {
        req.body = Body::Json(j.clone());
    } else if let Some(b) = s("body") {
        req.body = Body::Bytes(b.into_bytes().into());
    }
    req
}

type Outcome = (Result<Response, HarnessError>, Duration);

/// A streamed call: the body read chunk by chunk (all of it, or `read_chunks` and then stop),
/// folded into a `Response` so the same checks apply.
async fn run_stream(client: &Client, req: Request, read_chunks: Option<u64>) -> Outcome {
    let start = Instant::now();
    let result = async {
        let mut s = client.stream(req).await?;
        let mut body = Vec::new();
        let mut n = 0;
        while read_chunks.is_none_or(|max| n < max) {
            match s.next_chunk().await? {
                Some(c) => body.extend_from_slice(&c),
                None => break,
            }
            n += 1;
        }
        // Stopping early is dropping the stream: the connection and permit go at once.
        let resp = Response {
            status: s.status,
            headers: s.headers.clone(),
            body: body.into(),
            elapsed_ms: 0.0,
            attempts: s.attempts,
            trace_id: s.trace_id.clone(),
            routed: None,
            cache: None,
        };
        drop(s);
        Ok(resp)
    }
    .await;
    (result, start.elapsed())
}

async fn run_one(client: &Client, req: Request, cancel_after: Option<u64>) -> Outcome {
    let start = Instant::now();
    let task = harness_core::Operation::Request(client.clone(), req).start().spawn().expect("spawn");
    let response = |r: Result<harness_core::Outcome, HarnessError>| match r {
        Ok(harness_core::Outcome::Response(resp)) => Ok(resp),
        Ok(_) => unreachable!("a request gives a response"),
        Err(e) => Err(e),
    };
    let result = match cancel_after {
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), task).await {
            Ok(r) => r.and_then(response),
            // Dropping the task is the host-side cancel every binding performs.
            Err(_) => Err(HarnessError::new(harness_core::ErrorKind::Cancelled, "cancelled by the caller")),
        },
        None => task.await.and_then(response),
    };
    (result, start.elapsed())
}

fn outcome_label(r: &Result<Response, HarnessError>) -> String {
    match r {
        Ok(resp) => resp.status.to_string(),
        Err(e) => e.name().to_string(),
    }
}

async fn check(name: &str, i: usize, call: &Value, client: &Client, outcome: &Outcome, errors: &mut Vec<String>) {
    let exp = &call["expect"];
    let (result, elapsed) = outcome;
    let ms = elapsed.as_secs_f64() * 1000.0;
    let mut fail = |what: String| errors.push(format!("{name} call {i}: {what}"));
    if let Some(status) = exp.get("status").and_then(Value::as_u64) {
        match result {
            Ok(r) if r.status as u64 == status => {}
            other => fail(format!("expected status {status}, got {:?}", other.as_ref().map(|r| r.status))),
        }
    }
    if let Some(kind) = exp.get("error").and_then(Value::as_str) {
        match result {
            Err(e) if e.name() == kind => {}
            Err(e) => fail(format!("expected {kind}, got {e}")),
            Ok(r) => fail(format!("expected {kind}, got status {}", r.status)),
        }
    }
    let err = result.as_ref().err();
    if let Some(phase) = exp.get("phase").and_then(Value::as_str) {
        if err.and_then(|e| e.phase()) != Some(phase) {
            fail(format!("expected phase {phase}, got {:?}", err.map(|e| e.phase())));
        }
    }
    if let Some(st) = exp.get("error_status").and_then(Value::as_u64) {
        if err.and_then(|e| e.status).map(u64::from) != Some(st) {
            fail(format!("expected error status {st}, got {:?}", err.map(|e| e.status)));
        }
    }
    if let Some(code) = exp.get("code").and_then(Value::as_str) {
        if err.and_then(|e| e.code.as_deref()) != Some(code) {
            fail(format!("expected code {code}, got {:?}", err.map(|e| &e.code)));
        }
    }
    if let Some(msg) = exp.get("message").and_then(Value::as_str) {
        if !err.is_some_and(|e| e.message.contains(msg)) {
            fail(format!("expected message containing {msg:?}, got {:?}", err.map(|e| &e.message)));
        }
    }
    if let Some(msg) = exp.get("message_excludes").and_then(Value::as_str) {
        if err.is_none_or(|e| e.message.contains(msg) || e.to_string().contains(msg)) {
            fail(format!("expected an error whose message excludes {msg:?}, got {:?}", err.map(|e| e.to_string())));
        }
    }
    if let Some(n) = exp.get("message_max_chars").and_then(Value::as_u64) {
        let len = err.map(|e| e.message.chars().count()).unwrap_or(usize::MAX);
        if len as u64 > n {
            fail(format!("expected a message of at most {n} characters, got {len}"));
        }
    }
    if let Some(n) = exp.get("error_body_len").and_then(Value::as_u64) {
        let len = err.and_then(|e| e.body.as_ref()).map(|b| b.len() as u64);
        if len != Some(n) {
            fail(format!("expected an error body of {n} bytes, got {len:?}"));
        }
    }
    if let Some(want) = exp.get("body").and_then(Value::as_str) {
        let got = result.as_ref().ok().map(|r| String::from_utf8_lossy(&r.body).into_owned());
        if got.as_deref() != Some(want) {
            fail(format!("expected body {want:?}, got {got:?}"));
        }
    }
    for (k, want) in exp.get("headers").and_then(Value::as_object).into_iter().flatten() {
        let got: Vec<&str> = match result {
            Ok(r) => r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str()).collect(),
            Err(_) => Vec::new(),
        };
        let want: Vec<&str> = want.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        if got != want {
            fail(format!("response header {k}: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(ra) = exp.get("retry_after_ms").and_then(Value::as_u64) {
        if err.and_then(|e| e.retry_after_ms) != Some(ra) {
            fail(format!("expected retry_after_ms {ra}, got {:?}", err.map(|e| e.retry_after_ms)));
        }
    }
    if let Some(t) = exp.get("trace_id").and_then(Value::as_str) {
        if result.as_ref().ok().map(|r| r.trace_id.as_str()) != Some(t) {
            fail(format!("expected trace id {t}"));
        }
    }
    if let Some(a) = exp.get("attempts").and_then(Value::as_u64) {
        let got = match result {
            Ok(r) => r.attempts,
            Err(e) => e.attempts,
        };
        if got as u64 != a {
            fail(format!("expected {a} attempts, got {got} ({:?})", result.as_ref().err().map(|e| e.to_string())));
        }
    }
    if let Some(min) = exp.get("min_ms").and_then(Value::as_f64) {
        if ms < min {
            fail(format!("took {ms:.1} ms, expected at least {min}"));
        }
    }
    if let Some(max) = exp.get("max_ms").and_then(Value::as_f64) {
        if ms > max {
            fail(format!("took {ms:.1} ms, expected at most {max}"));
        }
    }
    if !is_stream(call) {
        let answer = result.as_ref().ok().map(|r| (r.from_cache(), r.cache.as_ref().map(|c| c.outcome)));
        check_cache(exp, answer, err, &mut fail);
    }
    let view = match result {
        Ok(r) => r.routed.as_deref().map(|rt| ChatView::from_routed(rt, r)),
        Err(_) => None,
    };
    check_routed(name, i, exp, view.as_ref(), err, errors);
    check_state(name, i, call, client, errors).await;
}

fn is_stream(call: &Value) -> bool {
    call.get("stream").and_then(Value::as_bool) == Some(true)
}

/// `from_cache` and `cache` (the stamp's outcome, or null): what a cache did for a plain call
/// or a chat, given as (from_cache, outcome) when the call answered. Streams are not checked.
fn check_cache(exp: &Value, answer: Option<(bool, Option<&str>)>, err: Option<&HarnessError>, fail: &mut dyn FnMut(String)) {
    if exp.get("from_cache").is_none() && exp.get("cache").is_none() {
        return;
    }
    let Some((from_cache, outcome)) = answer else {
        return fail(format!("expected from_cache/cache, the call failed: {:?}", err.map(|e| e.to_string())));
    };
    if let Some(want) = exp.get("from_cache").and_then(Value::as_bool) {
        if from_cache != want {
            fail(format!("expected from_cache {want}, got {from_cache} (cache {outcome:?})"));
        }
    }
    if let Some(want) = exp.get("cache") {
        if want.as_str() != outcome {
            fail(format!("expected cache {want}, got {outcome:?}"));
        }
    }
}

/// What a routed call answered, whichever API made it.
#[derive(Default, Debug)]
struct ChatView {
    content: Option<String>,
    finish_reason: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    fallback: Option<String>,
    usage: Option<harness_core::Usage>,
    cost: Option<f64>,
    attempts_by_provider: Vec<(String, u32)>,
    chunk_kinds: Vec<String>,
    tool_calls: Vec<harness_core::ToolCall>,
    cache: Option<harness_core::cache::stamp::CacheStamp>,
}

impl ChatView {
    fn from_routed(rt: &harness_core::Routed, _r: &Response) -> Self {
        ChatView {
            provider: rt.provider.clone(),
            model: rt.model.clone(),
            fallback: rt.fallback.map(str::to_string),
            usage: rt.usage,
            cost: rt.cost,
            attempts_by_provider: rt.attempts_by_provider.clone(),
            ..Default::default()
        }
    }

    fn from_chat(c: &harness_core::ChatResponse) -> Self {
        ChatView {
            content: Some(c.content.clone()),
            finish_reason: c.finish_reason.clone(),
            provider: c.provider.clone(),
            model: c.model.clone(),
            fallback: c.fallback.map(str::to_string),
            usage: c.usage,
            cost: c.cost,
            attempts_by_provider: c.attempts_by_provider.clone(),
            chunk_kinds: Vec::new(),
            tool_calls: c.tool_calls.clone(),
            cache: c.cache.clone(),
        }
    }
}

fn check_routed(name: &str, i: usize, exp: &Value, view: Option<&ChatView>, err: Option<&HarnessError>, errors: &mut Vec<String>) {
    let mut fail = |what: String| errors.push(format!("{name} call {i}: {what}"));
    let str_of = |v: &Value| v.as_str().map(str::to_string);
    for (key, got) in [
        ("provider", view.and_then(|v| v.provider.clone())),
        ("model", view.and_then(|v| v.model.clone())),
        ("content", view.and_then(|v| v.content.clone())),
        ("finish_reason", view.and_then(|v| v.finish_reason.clone())),
        ("fallback", view.and_then(|v| v.fallback.clone())),
    ] {
        if let Some(want) = exp.get(key) {
            if view.is_none() {
                fail(format!("expected {key} {want}, the call failed: {:?}", err.map(|e| e.to_string())));
            } else if str_of(want) != got {
                fail(format!("expected {key} {want}, got {got:?}"));
            }
        }
    }
    if let Some(want) = exp.get("attempts_by_provider").and_then(Value::as_array) {
        let want: Vec<(String, u32)> = want.iter().map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_u64().unwrap() as u32)).collect();
        let got = view.map(|v| v.attempts_by_provider.clone());
        if got.as_ref() != Some(&want) {
            fail(format!("expected attempts_by_provider {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = exp.get("usage").and_then(Value::as_object) {
        let got = view.and_then(|v| v.usage).map(|u| serde_json::to_value(u).unwrap());
        for (k, w) in want {
            if got.as_ref().and_then(|g| g.get(k)) != Some(w) {
                fail(format!("expected usage.{k} {w}, got {got:?}"));
            }
        }
    }
    if let Some(want) = exp.get("cost").and_then(Value::as_f64) {
        let got = view.and_then(|v| v.cost);
        if got.is_none_or(|c| (c - want).abs() > 1e-9) {
            fail(format!("expected cost {want}, got {got:?}"));
        }
    }
    if let Some(want) = exp.get("chunk_kinds").and_then(Value::as_array) {
        let want: Vec<&str> = want.iter().map(|k| k.as_str().unwrap()).collect();
        let got: Vec<&str> = view.map(|v| v.chunk_kinds.iter().map(String::as_str).collect()).unwrap_or_default();
        if got != want {
            fail(format!("expected chunk kinds {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = exp.get("tool_calls") {
        let got = view.map(|v| serde_json::to_value(&v.tool_calls).unwrap());
        if got.as_ref() != Some(want) {
            fail(format!("expected tool_calls {want}, got {got:?}"));
        }
    }
    if let Some(want) = exp.get("provider_errors").and_then(Value::as_array) {
        let want: Vec<&str> = want.iter().map(|k| k.as_str().unwrap()).collect();
        let got: Vec<&str> = err.map(|e| e.provider_errors.iter().map(|(p, _)| p.as_str()).collect()).unwrap_or_default();
        if got != want {
            fail(format!("expected provider errors for {want:?}, got {:?}", err.map(|e| &e.provider_errors)));
        }
    }
    if let Some(want) = exp.get("error_provider").and_then(Value::as_str) {
        if err.and_then(|e| e.provider.as_deref()) != Some(want) {
            fail(format!("expected the error from provider {want}, got {:?}", err.map(|e| &e.provider)));
        }
    }
}

/// A chat call through the chat API (or the chat-stream API, read to its end), with the
/// same checks as any call plus the routed ones.
async fn run_chat(client: &Client, call: &Value) -> (Result<ChatView, HarnessError>, Duration) {
    let route = call["route"].as_str().unwrap();
    let chat = &call["chat"];
    let mut req = harness_core::ChatRequest::new(chat["messages"].clone());
    if let Some(p) = chat.get("params").and_then(Value::as_object) {
        req.params = p.clone();
    }
    let start = Instant::now();
    let result = if call.get("stream").and_then(Value::as_bool) == Some(true) {
        async {
            let mut s = client.chat_stream(route, req).await?;
            let mut view = ChatView { content: Some(String::new()), ..Default::default() };
            while let Some(c) = s.next().await? {
                let kind = c.kind.as_str().to_string();
                if view.chunk_kinds.last() != Some(&kind) || (kind != "delta" && kind != "tool_call") {
                    view.chunk_kinds.push(kind);
                }
                match c.kind {
                    harness_core::ChatChunkKind::Delta => view.content.as_mut().unwrap().push_str(&c.content),
                    harness_core::ChatChunkKind::ToolCall => {}
                    harness_core::ChatChunkKind::Restart => view.content = Some(String::new()),
                    harness_core::ChatChunkKind::Done => {
                        view.provider = c.provider;
                        view.model = c.model;
                        view.finish_reason = c.finish_reason;
                        view.tool_calls = c.tool_calls;
                        view.usage = c.usage;
                        view.cost = c.cost;
                    }
                }
            }
            Ok(view)
        }
        .await
    } else {
        client.chat(route, req).await.map(|c| ChatView::from_chat(&c))
    };
    (result, start.elapsed())
}

async fn check_chat(name: &str, i: usize, call: &Value, client: &Client, errors: &mut Vec<String>) {
    let (result, elapsed) = run_chat(client, call).await;
    let exp = &call["expect"];
    let ms = elapsed.as_secs_f64() * 1000.0;
    let err = result.as_ref().err();
    let mut fail = |what: String| errors.push(format!("{name} call {i}: {what}"));
    match (exp.get("error").and_then(Value::as_str), &result) {
        (Some(kind), Err(e)) if e.name() == kind => {}
        (Some(kind), other) => fail(format!("expected {kind}, got {:?}", other.as_ref().map(|_| "an answer").map_err(|e| e.to_string()))),
        (None, Err(e)) => fail(format!("expected an answer, got {e}")),
        (None, Ok(_)) => {}
    }
    if let Some(phase) = exp.get("phase").and_then(Value::as_str) {
        if err.and_then(|e| e.phase()) != Some(phase) {
            fail(format!("expected phase {phase}, got {:?}", err.map(|e| e.phase())));
        }
    }
    if let Some(st) = exp.get("error_status").and_then(Value::as_u64) {
        if err.and_then(|e| e.status).map(u64::from) != Some(st) {
            fail(format!("expected error status {st}, got {:?}", err.map(|e| e.status)));
        }
    }
    if let Some(code) = exp.get("code").and_then(Value::as_str) {
        if err.and_then(|e| e.code.as_deref()) != Some(code) {
            fail(format!("expected code {code}, got {:?}", err.map(|e| &e.code)));
        }
    }
    if let Some(msg) = exp.get("message").and_then(Value::as_str) {
        if !err.is_some_and(|e| e.message.contains(msg)) {
            fail(format!("expected message containing {msg:?}, got {:?}", err.map(|e| &e.message)));
        }
    }
    if let Some(a) = exp.get("attempts").and_then(Value::as_u64) {
        let got = match &result {
            Ok(v) => v.attempts_by_provider.iter().map(|(_, n)| *n as u64).sum(),
            Err(e) => e.attempts as u64,
        };
        if got != a {
            fail(format!("expected {a} attempts, got {got}"));
        }
    }
    if let Some(max) = exp.get("max_ms").and_then(Value::as_f64) {
        if ms > max {
            fail(format!("took {ms:.1} ms, expected at most {max}"));
        }
    }
    if !is_stream(call) {
        let answer = result.as_ref().ok().map(|v| (v.cache.as_ref().is_some_and(|c| c.from_cache()), v.cache.as_ref().map(|c| c.outcome)));
        check_cache(exp, answer, err, &mut fail);
    }
    check_routed(name, i, exp, result.as_ref().ok(), err, errors);
}

async fn check_routing_state(name: &str, i: usize, call: &Value, client: &Client, errors: &mut Vec<String>) {
    let route = call["routing_state"].as_str().unwrap();
    let state = match client.routing_state(route) {
        Ok(s) => s.to_value(),
        Err(e) => return errors.push(format!("{name} call {i}: routing_state failed: {e}")),
    };
    for (id, want) in call["expect"]["providers"].as_object().unwrap() {
        let Some(got) = state["providers"].as_array().unwrap().iter().find(|p| p["id"] == id.as_str()) else {
            errors.push(format!("{name} call {i}: no provider {id} in {state}"));
            continue;
        };
        for (k, w) in want.as_object().unwrap() {
            if k == "last_error_contains" {
                if !got["last_error"].as_str().is_some_and(|e| e.contains(w.as_str().unwrap())) {
                    errors.push(format!("{name} call {i}: {id}.last_error should contain {w}, got {}", got["last_error"]));
                }
            } else if &got[k] != w {
                errors.push(format!("{name} call {i}: {id}.{k}: expected {w}, got {}", got[k]));
            }
        }
    }
}

async fn check_provider_upstream(ctx: &Ctx, name: &str, exp: &Value, errors: &mut Vec<String>) {
    for (id, want) in exp.as_object().unwrap() {
        let url = format!("{}/__admin/provider-log/{name}-{id}", ctx.upstream.url());
        let log: Value = serde_json::from_slice(&ctx.admin.get(url).send().await.unwrap().bytes().await.unwrap()).unwrap();
        if let Some(n) = want.get("requests").and_then(Value::as_u64) {
            if log["count"].as_u64() != Some(n) {
                errors.push(format!("{name} provider {id}: expected {n} requests, got {}", log["count"]));
            }
        }
        let first = &log["requests"][0]["body"];
        for (k, w) in want.get("first_body").and_then(Value::as_object).into_iter().flatten() {
            if &first[k] != w {
                errors.push(format!("{name} provider {id}: first body {k}: expected {w}, got {}", first[k]));
            }
        }
        if let Some(w) = want.get("first_last_message") {
            let got = first["messages"].as_array().and_then(|m| m.last());
            if got != Some(w) {
                errors.push(format!("{name} provider {id}: expected last message {w}, got {got:?}"));
            }
        }
    }
}

async fn check_state(name: &str, i: usize, call: &Value, client: &Client, errors: &mut Vec<String>) {
    let exp = &call["expect"];
    let service = call.get("service").and_then(Value::as_str).unwrap_or("svc");
    if let Some(state) = exp.get("breaker").and_then(Value::as_str) {
        let path = format!("/s/{name}{}", call["path"].as_str().unwrap());
        let got = client.breaker_state(service, call["method"].as_str().unwrap(), &path, call.get("endpoint").and_then(Value::as_str));
        if got != state {
            errors.push(format!("{name} call {i}: expected breaker {state}, got {got}"));
        }
    }
    if let Some(want) = exp.get("rate_limit").and_then(Value::as_object) {
        let all = client.view("rate_limits", &[]).unwrap();
        let got = all.as_array().unwrap().iter().find(|s| s["service"] == service).cloned().unwrap_or(Value::Null);
        for (k, w) in want {
            let g = if k == "paused" { got.get("paused_ms").and_then(Value::as_u64).map(|ms| Value::Bool(ms > 0)) } else { got.get(k).cloned() };
            if g.as_ref() != Some(w) {
                errors.push(format!("{name} call {i}: expected rate limit {k} {w}, got {g:?} (of {all})"));
            }
        }
    }
    if let Some(n) = exp.get("bulkhead_in_use").and_then(Value::as_u64) {
        // A cancel frees its permits asynchronously (the task is aborted on the runtime).
        let settle = Instant::now();
        let mut got = client.bulkhead_in_use(service).unwrap();
        while got as u64 != n && settle.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            got = client.bulkhead_in_use(service).unwrap();
        }
        if got as u64 != n {
            errors.push(format!("{name} call {i}: expected {n} bulkhead permits in use, got {got}"));
        }
    }
}

fn name_placeholder(v: &mut Value, name: &str) {
    match v {
        Value::String(s) => *s = s.replace("{name}", name),
        Value::Array(a) => a.iter_mut().for_each(|x| name_placeholder(x, name)),
        Value::Object(o) => o.values_mut().for_each(|x| name_placeholder(x, name)),
        _ => {}
    }
}

async fn check_upstream(ctx: &Ctx, name: &str, exp: &Value, errors: &mut Vec<String>) {
    let log = ctx
        .admin
        .get(format!("{}/__admin/log/{name}", ctx.upstream.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let log: Value = serde_json::from_slice(&log).unwrap();
    let reqs = log["requests"].as_array().unwrap();
    let mut fail = |what: String| errors.push(format!("{name} upstream: {what}"));
    if let Some(n) = exp.get("requests").and_then(Value::as_u64) {
        if reqs.len() as u64 != n {
            fail(format!("expected {n} requests, got {}", reqs.len()));
        }
    }
    if let Some(methods) = exp.get("methods").and_then(Value::as_array) {
        let got: Vec<&Value> = reqs.iter().map(|r| &r["method"]).collect();
        if got != methods.iter().collect::<Vec<_>>() {
            fail(format!("expected methods {methods:?}, got {got:?}"));
        }
    }
    if let Some(bodies) = exp.get("bodies").and_then(Value::as_array) {
        let got: Vec<&Value> = reqs.iter().map(|r| &r["body"]).collect();
        if got != bodies.iter().collect::<Vec<_>>() {
            fail(format!("expected bodies {bodies:?}, got {got:?}"));
        }
    }
    for r in reqs {
        let headers = &r["headers"];
        for h in exp.get("headers_present").and_then(Value::as_array).into_iter().flatten() {
            if headers.get(h.as_str().unwrap()).is_none() {
                fail(format!("header {h} missing"));
            }
        }
        for h in exp.get("header_absent").and_then(Value::as_array).into_iter().flatten() {
            if headers.get(h.as_str().unwrap()).is_some() {
                fail(format!("header {h} should be absent"));
            }
        }
        for (k, v) in exp.get("header_equals").and_then(Value::as_object).into_iter().flatten() {
            if headers.get(k) != Some(v) {
                fail(format!("header {k}: expected {v}, got {:?}", headers.get(k)));
            }
        }
        for (k, want) in exp.get("header_values").and_then(Value::as_object).into_iter().flatten() {
            let got: Vec<&Value> = r["header_list"].as_array().unwrap().iter().filter(|p| p[0] == k.as_str()).map(|p| &p[1]).collect();
            if got != want.as_array().unwrap().iter().collect::<Vec<_>>() {
                fail(format!("header {k}: expected values {want:?}, got {got:?}"));
            }
        }
        for (k, v) in exp.get("header_prefix").and_then(Value::as_object).into_iter().flatten() {
            let got = headers.get(k).and_then(Value::as_str).unwrap_or("");
            if !got.starts_with(v.as_str().unwrap()) {
                fail(format!("header {k}: expected prefix {v}, got {got:?}"));
            }
        }
    }
    for (k, want) in exp.get("header_sequence").and_then(Value::as_object).into_iter().flatten() {
        let got: Vec<Value> = reqs.iter().map(|r| r["headers"].get(k).cloned().unwrap_or(Value::Null)).collect();
        if &got != want.as_array().unwrap() {
            fail(format!("header {k} by request: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(gap) = exp.get("min_gap_ms").and_then(Value::as_f64) {
        for w in reqs.windows(2) {
            let d = w[1]["at_ms"].as_f64().unwrap() - w[0]["at_ms"].as_f64().unwrap();
            if d < gap {
                fail(format!("requests {d:.1} ms apart, expected at least {gap}"));
            }
        }
    }
}

async fn run_scenario(ctx: &Ctx, scenario: &Value) -> Vec<String> {
    let name = scenario["name"].as_str().unwrap();
    let mut errors = Vec::new();
    let steps = json!({"steps": scenario["steps"]});
    let resp = ctx.admin.put(format!("{}/__admin/script/{name}", ctx.upstream.url())).body(steps.to_string()).send().await.unwrap();
    assert!(resp.status().is_success(), "{name}: upstream refused the script: {}", resp.text().await.unwrap());

    if let Some(token_steps) = scenario.get("token_steps") {
        let steps = json!({"steps": token_steps});
        let url = format!("{}/__admin/script/{name}-token", ctx.upstream.url());
        let resp = ctx.admin.put(url).body(steps.to_string()).send().await.unwrap();
        assert!(resp.status().is_success(), "{name}: upstream refused the token script");
    }
    for (id, spec) in scenario.get("providers").and_then(Value::as_object).into_iter().flatten() {
        let url = format!("{}/__admin/provider/{name}-{id}", ctx.upstream.url());
        let resp = ctx.admin.post(url).body(spec.to_string()).send().await.unwrap();
        assert!(resp.status().is_success(), "{name}: upstream refused provider {id}: {}", resp.text().await.unwrap());
    }
    let mut config = json!({"client": {"name": "vectors"}, "log": {"enabled": false}, "services": {"svc": {"base_url": "{upstream}"}}});
    if let Some(over) = scenario.get("config") {
        merge(&mut config, over);
    }
    substitute(&mut config, ctx);
    name_placeholder(&mut config, name);
    if let Some(want) = scenario.get("config_error").and_then(Value::as_str) {
        match Client::from_value(config) {
            Err(e) if e.name() == "ConfigError" && e.message.contains(want) => {
                if let Some(x) = scenario.get("config_error_excludes").and_then(Value::as_str) {
                    if e.to_string().contains(x) || format!("{e:?}").contains(x) {
                        errors.push(format!("{name}: config error shows {x:?}: {e}"));
                    }
                }
            }
            Err(e) => errors.push(format!("{name}: expected a ConfigError containing {want:?}, got {e}")),
            Ok(_) => errors.push(format!("{name}: expected a ConfigError containing {want:?}, the client was built")),
        }
        return errors;
    }
    let client = Client::from_value(config).unwrap_or_else(|e| panic!("{name}: {e}"));
    for spec in scenario.get("interceptors").and_then(Value::as_array).into_iter().flatten() {
        vector_interceptor::register(&client, spec);
    }
    let base = json!({"client": {"name": "vectors"}, "log": {"enabled": false}, "services": {"svc": {"base_url": "{upstream}"}}});

    let mut background = Vec::new();
    for (i, call) in scenario["calls"].as_array().unwrap().iter().enumerate() {
        if let Some(ms) = call.get("wait_ms").and_then(Value::as_u64) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(over) = call.get("reload") {
            let mut cfg = base.clone();
            merge(&mut cfg, over);
            substitute(&mut cfg, ctx);
            name_placeholder(&mut cfg, name);
            let exp = &call["expect"];
            match (client.reload_value(cfg), exp.get("error").and_then(Value::as_str)) {
                (Ok(_), None) => {}
                (Err(e), Some(kind)) if e.name() == kind => {
                    if let Some(m) = exp.get("message").and_then(Value::as_str) {
                        if !e.message.contains(m) {
                            errors.push(format!("{name} call {i}: reload error {:?} lacks {m:?}", e.message));
                        }
                    }
                }
                (r, want) => errors.push(format!("{name} call {i}: reload expected {want:?}, got {r:?}")),
            }
            continue;
        }
        if call.get("routing_state").is_some() {
            check_routing_state(name, i, call, &client, &mut errors).await;
            continue;
        }
        if let Some(args) = call.get("set_weight").and_then(Value::as_array) {
            let r = client.set_weight(args[0].as_str().unwrap(), args[1].as_str().unwrap(), args[2].as_u64().unwrap() as u32);
            let exp = &call["expect"];
            match (r, exp.get("error").and_then(Value::as_str)) {
                (Ok(_), None) => {}
                (Err(e), Some(kind)) if e.name() == kind && exp.get("message").and_then(Value::as_str).is_none_or(|m| e.message.contains(m)) => {}
                (r, want) => errors.push(format!("{name} call {i}: set_weight expected {want:?}, got {r:?}")),
            }
            continue;
        }
        if call.get("chat").is_some() {
            check_chat(name, i, call, &client, &mut errors).await;
            continue;
        }
        if call.get("stream").and_then(Value::as_bool) == Some(true) {
            let outcome = run_stream(&client, build_request(name, call), call.get("read_chunks").and_then(Value::as_u64)).await;
            check(name, i, call, &client, &outcome, &mut errors).await;
            continue;
        }
        let cancel = call.get("cancel_after_ms").and_then(Value::as_u64);
        if call.get("background").and_then(Value::as_bool) == Some(true) {
            let (c, req) = (client.clone(), build_request(name, call));
            background.push((i, call, tokio::spawn(async move { run_one(&c, req, cancel).await })));
            continue;
        }
        match call.get("parallel").and_then(Value::as_u64) {
            Some(n) => {
                let handles: Vec<_> = (0..n)
                    .map(|_| {
                        let (c, req) = (client.clone(), build_request(name, call));
                        tokio::spawn(async move { run_one(&c, req, cancel).await })
                    })
                    .collect();
                let mut counts: BTreeMap<String, u64> = BTreeMap::new();
                for h in handles {
                    *counts.entry(outcome_label(&h.await.unwrap().0)).or_default() += 1;
                }
                if let Some(want) = call["expect"].get("outcomes") {
                    let want: BTreeMap<String, u64> = serde_json::from_value(want.clone()).unwrap();
                    if want != counts {
                        errors.push(format!("{name} call {i}: expected outcomes {want:?}, got {counts:?}"));
                    }
                }
                check_state(name, i, call, &client, &mut errors).await;
            }
            None => {
                let outcome = run_one(&client, build_request(name, call), cancel).await;
                check(name, i, call, &client, &outcome, &mut errors).await;
            }
        }
    }
    for (i, call, h) in background {
        let outcome = h.await.unwrap();
        check(name, i, call, &client, &outcome, &mut errors).await;
    }
    if let Some(exp) = scenario.get("upstream") {
        check_upstream(ctx, name, exp, &mut errors).await;
    }
    if let Some(exp) = scenario.get("token_upstream") {
        check_upstream(ctx, &format!("{name}-token"), exp, &mut errors).await;
    }
    if let Some(exp) = scenario.get("provider_upstream") {
        check_provider_upstream(ctx, name, exp, &mut errors).await;
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_vector_passes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/scenarios.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let scenarios = file["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 30, "the issue asks for at least 30 scenarios");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ctx = Ctx { upstream: harness_upstream::start().await.unwrap(), admin: reqwest::Client::new() };
    let only = std::env::var("HARNESS_SCENARIO").ok();
    let mut errors = Vec::new();
    let mut ran = 0;
    for s in scenarios {
        if only.as_deref().is_some_and(|o| !s["name"].as_str().unwrap().contains(o)) {
            continue;
        }
        ran += 1;
        errors.extend(run_scenario(&ctx, s).await);
    }
    println!("{ran} scenarios run, {} failures", errors.len());
    assert!(errors.is_empty(), "{} vector failures:\n{}", errors.len(), errors.join("\n"));
}

/// A scenario's declarative interceptor (tests/README.md, "interceptors"), as every runner
/// builds it in its own language.
mod vector_interceptor {
    use std::sync::Arc;
    use std::time::Duration;

    use harness_core::interceptors::{HostInterceptor, Level, Phase, Registration};
    use harness_core::transport::BoxFuture;
    use harness_core::Client;
    use serde_json::{json, Map, Value};

    struct Spec(Value);

    pub fn register(client: &Client, spec: &Value) {
        let level = match spec["level"].as_str() {
            Some("attempt") => Some(Level::Attempt),
            Some("application") => Some(Level::Application),
            _ => None,
        };
        let reg = Registration {
            name: spec["name"].as_str().unwrap().to_string(),
            level,
            services: spec.get("services").and_then(Value::as_array).map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect()).unwrap_or_default(),
            before: spec.get("before").is_some(),
            after: spec.get("after").is_some(),
            want_body: spec.get("want_body").and_then(Value::as_bool).unwrap_or(false),
        };
        client.add_interceptor(reg, Arc::new(Spec(spec.clone()))).unwrap();
    }

    fn contains(have: &Value, want: &Value) -> bool {
        match (have, want) {
            (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, v)| h.get(k).is_some_and(|x| contains(x, v))),
            _ => have == want,
        }
    }

    impl HostInterceptor for Spec {
        fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Result<String, String>> {
            Box::pin(async move {
                let input: Value = serde_json::from_str(&input).unwrap();
                match phase {
                    Phase::Before => {
                        let b = &self.0["before"];
                        if let Some(ms) = b.get("sleep_ms").and_then(Value::as_u64) {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        if let Some(m) = b.get("raise").and_then(Value::as_str) {
                            return Err(format!("Error: {m}"));
                        }
                        let mut out = Map::new();
                        let mut headers = b.get("headers").and_then(Value::as_object).cloned().unwrap_or_default();
                        if let Some(h) = b.get("attempt_header").and_then(Value::as_str) {
                            let n = input["attempt"].as_u64().map_or("none".to_string(), |n| n.to_string());
                            headers.insert(h.to_string(), json!(n));
                        }
                        if !headers.is_empty() {
                            out.insert("headers".into(), Value::Object(headers));
                        }
                        for k in ["query", "path"] {
                            if let Some(v) = b.get(k) {
                                out.insert(k.into(), v.clone());
                            }
                        }
                        if let Some(set) = b.get("json_set").and_then(Value::as_object) {
                            let mut j = input["json"].as_object().cloned().unwrap_or_default();
                            j.extend(set.clone());
                            out.insert("json".into(), Value::Object(j));
                        }
                        Ok(if out.is_empty() { "null".into() } else { Value::Object(out).to_string() })
                    }
                    Phase::After => {
                        let a = &self.0["after"];
                        if let Some(m) = a.get("raise").and_then(Value::as_str) {
                            return Err(format!("Error: {m}"));
                        }
                        match a.get("reject_when_json") {
                            Some(w) if contains(&input["json"], w) => Ok(json!({"fail": {
                                "message": "rejected by the vector",
                                "retryable": a.get("retryable").and_then(Value::as_bool).unwrap_or(false),
                                "code": a.get("code"),
                            }})
                            .to_string()),
                            _ => Ok("null".into()),
                        }
                    }
                }
            })
        }
    }
}
