//! Property-based fuzzing of every parser that sees outside input: the config parser (YAML,
//! JSON, TOML), path and header checks, endpoint templating, `Retry-After`, `traceparent`,
//! the SSE reader with the chunk parser, and the Prometheus label encoder.
//!
//! Properties: nothing panics; valid input round-trips; invalid input is a `ConfigError`
//! naming a field; output is well-formed (no raw control characters in labels or headers).
//! CI runs each target for a bounded number of cases (`FUZZ_CASES`, default 256);
//! `bench/fuzz.sh` sets `FUZZ_SECONDS` and each target runs that long, printing its count.

use std::time::{Duration, Instant, SystemTime};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestError, TestRunner};

use crate::error::ErrorKind;

/// Runs `check` on values of `strategy`: `FUZZ_CASES` cases, or as many as fit in
/// `FUZZ_SECONDS` when set; prints the count; panics with the minimal failing input.
fn fuzz<S: Strategy>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let seconds: Option<u64> = std::env::var("FUZZ_SECONDS").ok().and_then(|v| v.parse().ok());
    let cases: u32 = std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let mut total: u64 = 0;
    loop {
        let batch = if deadline.is_some() { 2_000 } else { cases };
        let mut runner = TestRunner::new(RunnerConfig { cases: batch, failure_persistence: None, max_shrink_iters: 10_000, ..RunnerConfig::default() });
        match runner.run(&strategy, &check) {
            Ok(()) => total += u64::from(batch),
            Err(TestError::Fail(why, value)) => panic!("{name}: {why}\nminimal input: {value:#?}"),
            Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    println!("fuzz {name}: {total} cases");
}

/// Text that looks like config, or like nothing at all.
fn config_text() -> impl Strategy<Value = (String, &'static str)> {
    let format = prop_oneof![Just("yaml"), Just("json"), Just("toml")];
    let text = prop_oneof![
        any::<String>(),
        "[ -~\n\t]{0,200}",
        // Near-valid documents with mutated keys and values.
        ("[a-z_]{1,12}", "[a-z_]{1,12}", "[ -~]{0,20}", -5i64..100_000).prop_map(|(svc, key, val, n)| {
            format!("services:\n  {svc}:\n    base_url: \"{val}\"\n    {key}: {n}\n    retry: {{ max_retries: {n} }}\n")
        }),
        ("[a-z_]{1,12}", "[ -~]{0,20}").prop_map(|(k, v)| format!("{{\"services\": {{\"s\": {{\"base_url\": \"http://h\", \"{k}\": \"{v}\"}}}}}}")),
        ("[a-z_]{1,12}", 0u32..50).prop_map(|(k, depth)| format!("[services.s]\nbase_url = \"http://h\"\n{k} = {}1{}\n", "[".repeat(depth as usize), "]".repeat(depth as usize))),
    ];
    (text, format)
}

#[test]
fn fuzz_config_parser() {
    fuzz("config", config_text(), |(text, format)| {
        // A shape no service matches must still be caught, and any error names where.
        match crate::config::Config::from_str_with_format(&text, format) {
            Ok(c) => {
                // Valid input round-trips through JSON with the same meaning.
                let again = crate::config::Config::from_value(serde_json::to_value(&c).unwrap()).map_err(|e| TestCaseError::fail(format!("round trip: {e}")))?;
                prop_assert_eq!(again.version(), c.version());
            }
            Err(e) => {
                prop_assert_eq!(e.kind, ErrorKind::Config);
                prop_assert!(!e.message.is_empty());
                prop_assert!(!e.message.contains('\u{0}'), "raw NUL in {:?}", e.message);
                // A parse error says so; any other starts with the field it is about.
                let field = e.message.split(": ").next().unwrap_or("");
                prop_assert!(e.message.starts_with("config") || (!field.is_empty() && e.message.len() > field.len()), "no field named: {}", e.message);
                prop_assert!(!e.message.chars().any(char::is_control), "raw control character in {:?}", e.message);
            }
        }
        Ok(())
    });
}

/// Valid configs, generated: they parse in every format and keep their meaning.
#[test]
fn fuzz_valid_configs_round_trip_in_every_format() {
    let svc = ("[a-z][a-z0-9_]{0,10}", 0u32..10, 1u64..60_000, any::<bool>(), 1u32..500);
    fuzz("config_round_trip", proptest::collection::vec(svc, 1..4), |services| {
        let mut map = serde_json::Map::new();
        for (name, retries, timeout, jitter, conc) in &services {
            map.insert(
                name.clone(),
                serde_json::json!({"base_url": format!("http://{name}.internal:8080/v1"), "retry": {"max_retries": retries, "jitter": jitter},
                    "timeouts": {"request_ms": timeout}, "bulkhead": {"max_concurrency": conc}}),
            );
        }
        let value = serde_json::json!({"services": map});
        let base = crate::config::Config::from_value(value.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let yaml = serde_yaml::to_string(&value).unwrap();
        let toml = toml::to_string(&value).unwrap();
        for (text, format) in [(value.to_string(), "json"), (yaml, "yaml"), (toml, "toml")] {
            let c = crate::config::Config::from_str_with_format(&text, format).map_err(|e| TestCaseError::fail(format!("{format}: {e}")))?;
            prop_assert_eq!(c.version(), base.version(), "{}", format);
        }
        Ok(())
    });
}

#[test]
fn fuzz_paths_and_headers() {
    let path = prop_oneof![any::<String>(), "/[ -~]{0,60}", "/[a-z0-9%./?#&=]{0,60}"];
    fuzz("path", path, |p| {
        match crate::target::check_path(&p) {
            Ok(()) => {
                // What passes can be set on a URL, and the URL has no raw control character.
                let mut u = url::Url::parse("http://h/base").unwrap();
                u.set_path(p.split('?').next().unwrap_or(""));
                prop_assert!(!u.as_str().chars().any(char::is_control));
                prop_assert!(!p.chars().any(char::is_control));
            }
            Err(e) => {
                prop_assert_eq!(e.kind, ErrorKind::Config);
                prop_assert!(e.message.starts_with("request.path"), "{}", e.message);
                prop_assert!(!e.message.chars().any(|c| c.is_control()), "raw control in {:?}", e.message);
            }
        }
        Ok(())
    });
    let header = (prop_oneof![any::<String>(), "[!-~]{1,20}"], prop_oneof![any::<String>(), "[ -~]{0,40}"]);
    fuzz("header", header, |(name, value)| {
        let forbidden = crate::target::is_forbidden_header(&name);
        let parsed = (http::HeaderName::try_from(name.as_str()), http::HeaderValue::try_from(value.as_str()));
        if let (Ok(n), Ok(v)) = parsed {
            // Anything accepted is free of CR, LF and NUL (no header injection).
            prop_assert!(!n.as_str().bytes().any(|b| b.is_ascii_control()));
            prop_assert!(!v.as_bytes().iter().any(|b| matches!(b, b'\r' | b'\n' | 0)));
            let _ = forbidden;
        }
        Ok(())
    });
}

#[test]
fn fuzz_endpoint_templating() {
    let path = prop_oneof![any::<String>(), "(/[a-zA-Z0-9_.@-]{0,24}){0,6}"];
    fuzz("endpoint_template", path, |p| {
        let t = crate::endpoint::template(&p);
        prop_assert_eq!(crate::endpoint::template(&t), t.clone(), "templating is idempotent");
        prop_assert!(t.len() <= p.len() + 4 * p.matches('/').count() + 4);
        prop_assert!(!t.contains('?') && !t.contains('#'));
        if !p.chars().any(char::is_control) {
            prop_assert!(!t.chars().any(char::is_control));
        }
        // A template matches the path it came from.
        let bare = p.split(['?', '#']).next().unwrap_or("");
        if !bare.is_empty() && !bare.contains("{") {
            prop_assert!(crate::endpoint::capture(&t, bare).is_some(), "{} from {}", t, bare);
        }
        Ok(())
    });
}

#[test]
fn fuzz_retry_after() {
    let v = prop_oneof![any::<String>(), "[0-9]{1,30}", "[ -~]{0,40}", (0u64..4_000_000_000).prop_map(|s| httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(s)))];
    fuzz("retry_after", v, |v| {
        let now = SystemTime::now();
        let parsed = crate::retry::parse_retry_after(&v, now);
        // delta-seconds is 1*DIGIT (RFC 9110): no sign, no space inside.
        let t = v.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            let secs = t.parse::<u64>().unwrap_or(u64::MAX / 1000);
            prop_assert_eq!(parsed, Some(Duration::from_secs(secs)), "delta-seconds round-trip");
        } else if httpdate::parse_http_date(t).is_err() {
            prop_assert_eq!(parsed, None, "garbage is no wait");
        }
        if let Ok(at) = httpdate::parse_http_date(v.trim()) {
            prop_assert_eq!(parsed, Some(at.duration_since(now).unwrap_or(Duration::ZERO)));
        }
        Ok(())
    });
}

#[test]
fn fuzz_traceparent() {
    let tp = prop_oneof![
        any::<String>(),
        "[0-9a-f-]{0,60}",
        ("[0-9a-f]{2}", "[0-9a-f]{32}", "[0-9a-f]{16}", "[0-9a-f]{2}").prop_map(|(v, t, s, f)| format!("{v}-{t}-{s}-{f}")),
    ];
    fuzz("traceparent", tp, |v| {
        let t = crate::observability::trace::TraceContext::child_of(Some(&v), 1.0);
        let h = t.header();
        prop_assert_eq!(h.len(), 55);
        prop_assert!(h.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        prop_assert!(http::HeaderValue::try_from(h.as_str()).is_ok());
        // A valid parent's trace (version 00-fe, non-zero ids) is kept; its span is the parent.
        let parts: Vec<&str> = v.split('-').collect();
        let valid = parts.len() == 4
            && parts[0] != "ff"
            && parts[1].len() == 32
            && parts[2].len() == 16
            && parts[3].len() == 2
            && parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            && parts[1].bytes().any(|b| b != b'0')
            && parts[2].bytes().any(|b| b != b'0');
        if valid {
            prop_assert_eq!(t.trace_id.as_str(), parts[1]);
            prop_assert_eq!(t.parent.map(|p| p.to_string()), Some(parts[2].to_string()));
        } else {
            prop_assert!(t.parent.is_none(), "{:?} was taken as a parent", v);
        }
        Ok(())
    });
}

/// A body handed over in the given pieces.
struct Pieces(std::collections::VecDeque<bytes::Bytes>);

impl crate::transport::BodySource for Pieces {
    fn next_chunk(&mut self) -> crate::transport::BoxFuture<'_, Result<Option<bytes::Bytes>, crate::transport::TransportFailure>> {
        let next = self.0.pop_front();
        Box::pin(async move { Ok(next) })
    }
}

#[test]
fn fuzz_sse_and_chunks() {
    use futures_util::StreamExt;
    use eventsource_stream::Eventsource;
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let contents = proptest::collection::vec("[ -~]{0,30}", 0..8);
    let raw = proptest::collection::vec(any::<Vec<u8>>(), 0..6);
    let cut = 1usize..64;
    fuzz("sse", (contents, raw, cut), |(contents, raw, cut)| {
        // Well-formed chunks, cut at arbitrary byte boundaries, with garbage after them.
        let mut text = String::new();
        for c in &contents {
            let chunk = serde_json::json!({"choices": [{"delta": {"content": c}}]});
            text.push_str(&format!("data: {chunk}\n\n"));
        }
        let mut bytes = text.clone().into_bytes();
        for r in &raw {
            bytes.extend_from_slice(r);
        }
        let pieces: std::collections::VecDeque<bytes::Bytes> = bytes.chunks(cut).map(bytes::Bytes::copy_from_slice).collect();
        let since = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let events = rt.block_on(async {
            let stream = crate::pipeline::chat::sse(Box::new(Pieces(pieces)), since, 1 << 20).eventsource();
            stream.collect::<Vec<_>>().await
        });
        let mut seen = Vec::new();
        // The other formats' readers take the same hostile events without a panic.
        let mut others: Vec<Box<dyn crate::adapters::EventReader>> = ["anthropic", "gemini"].iter().map(|n| crate::adapters::built_in(n).expect("built in").stream()).collect();
        for e in events.into_iter().flatten() {
            for r in &mut others {
                let _ = r.read(&e.event, &e.data);
            }
            match crate::adapters::openai::parse_chunk(&e.data) {
                Ok(p) => seen.push(p.content),
                Err(crate::adapters::EventFault::Malformed(why)) => prop_assert!(why.starts_with("malformed chunk"), "{}", why),
                Err(crate::adapters::EventFault::Failed { .. }) => {}
            }
        }
        // Every well-formed chunk arrives, in order, whatever followed it.
        prop_assert_eq!(&seen[..contents.len().min(seen.len())], &contents[..contents.len().min(seen.len())]);
        if raw.is_empty() {
            prop_assert_eq!(seen, contents);
        }
        Ok(())
    });
}

#[test]
fn fuzz_prometheus_labels() {
    use crate::observability::metrics::{Label, Metrics, RequestLabels};
    let label = prop_oneof![any::<String>(), "[ -~]{0,30}", "[\\\\\"\n{}=,]{0,10}"];
    fuzz("prometheus_labels", (label.clone(), label), |(service, endpoint)| {
        let m = Metrics::new();
        m.requests
            .get_or_create(&RequestLabels { service: Label(service.clone()), endpoint: Label(endpoint.clone()), method: "GET".into(), status: "2xx".into() })
            .inc();
        let text = m.encode();
        let line = text.lines().find(|l| l.starts_with("harness_requests_total{")).ok_or_else(|| TestCaseError::fail("no series"))?;
        // One line per series; no raw control character; the values decode back to the input.
        prop_assert!(!line.chars().any(char::is_control));
        let labels = parse_labels(line).ok_or_else(|| TestCaseError::fail(format!("unparseable: {line}")))?;
        let (want_service, want_endpoint) = (unescape_expected(&service), unescape_expected(&endpoint));
        prop_assert_eq!(labels.first().map(|(k, v)| (k.as_str(), v.as_str())), Some(("service", want_service.as_str())));
        prop_assert_eq!(labels.get(1).map(|(k, v)| (k.as_str(), v.as_str())), Some(("endpoint", want_endpoint.as_str())));
        Ok(())
    });
}

/// What a Prometheus parser reads back from our escaping: controls other than `\n` are
/// spelled `\u{..}` (Prometheus has no escape for them), everything else is exact.
fn unescape_expected(s: &str) -> String {
    s.chars().map(|c| if c.is_control() && c != '\n' { format!("\\u{{{:x}}}", c as u32) } else { c.to_string() }).collect()
}

/// A minimal reader of `name{k="v",...} value` with Prometheus escapes (`\\`, `\"`, `\n`).
fn parse_labels(line: &str) -> Option<Vec<(String, String)>> {
    let rest = line.split_once('{')?.1;
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next()? != '"' {
            return None;
        }
        let mut val = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => val.push('\n'),
                    c @ ('\\' | '"') => val.push(c),
                    c => {
                        val.push('\\');
                        val.push(c);
                    }
                },
                '"' => break,
                c => val.push(c),
            }
        }
        out.push((key, val));
        match chars.next()? {
            ',' => continue,
            '}' => return Some(out),
            _ => return None,
        }
    }
}
