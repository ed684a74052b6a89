//! Where a request may go and what a caller may put on it.
//!
//! Guarantees: a request path never leaves `base_url`'s path (a `.` or `..`
//! segment in any spelling, including with `;` parameters as in `..;` that Tomcat,
//! Jetty and Spring resolve as `..`, a backslash and every C0 control or DEL are refused);
//! framing and routing headers (`Host`, `Content-Length`, `Transfer-Encoding`,
//! `Connection`, `Upgrade`, `TE`, `Trailer`, `Keep-Alive`, `Proxy-*`) never come
//! from config or callers; an `endpoint` label is printable and short.

use http::Method;

use crate::error::HarnessError;
use crate::redact::escape_control;

/// Longest `endpoint` label a caller may give.
pub const MAX_ENDPOINT_LEN: usize = 256;

/// Checks `request.path` (which may carry `?query`).
pub fn check_path(path: &str) -> Result<(), HarnessError> {
    let bad = |why: &str| HarnessError::config(format!("request.path: {why}, got {:?}", escape_control(path)));
    if !path.starts_with('/') {
        return Err(bad("must start with '/'"));
    }
    if path.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(bad("control characters are not allowed"));
    }
    let path_part = path.split(['?', '#']).next().unwrap_or("");
    if path_part.contains('\\') {
        return Err(bad("a backslash is not allowed (percent-encode it as %5C)"));
    }
    for segment in path_part.split('/') {
        if is_dot_segment(segment) {
            return Err(bad("`.` and `..` segments are not allowed (the path must stay under base_url)"));
        }
    }
    Ok(())
}

/// `.`/`..` however spelled: percent-encoded (any case, up to three layers), hidden
/// behind an encoded `/` or `\` inside the segment, or followed by `;` path parameters
/// (`..;`, `..;jsessionid=x`: servlet containers drop them and resolve the dots).
fn is_dot_segment(segment: &str) -> bool {
    // The common case, checked without allocating: no dot and nothing encoded.
    if !segment.bytes().any(|b| b == b'.' || b == b'%') {
        return false;
    }
    let mut text = segment.to_string();
    for _ in 0..4 {
        let dots = |piece: &str| {
            let bare = piece.split(';').next().unwrap_or("");
            bare == "." || bare == ".."
        };
        if text.split(['/', '\\']).any(dots) {
            return true;
        }
        let decoded = percent_decode(&text);
        if decoded == text {
            return false;
        }
        text = decoded;
    }
    false
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

/// Headers that decide framing or the target; never taken from config or callers.
pub fn is_forbidden_header(name: &str) -> bool {
    const FORBIDDEN: [&str; 8] =
        ["host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive"];
    let lower = name.to_ascii_lowercase();
    FORBIDDEN.contains(&lower.as_str()) || lower.starts_with("proxy-")
}

/// The error for a forbidden header at `field` (e.g. `request.headers`).
pub fn forbidden_header(field: &str, name: &str) -> HarnessError {
    HarnessError::config(format!(
        "{field}.{}: this header is set by Harness (framing and target headers cannot be overridden)",
        escape_control(name)
    ))
}

/// Checks a caller's `endpoint` label.
/// Longest `request.principal`, in characters.
const MAX_PRINCIPAL_LEN: usize = 256;

/// A caller-supplied principal: 1 to 256 characters, no control characters.
pub fn check_principal(principal: Option<&str>) -> Result<(), HarnessError> {
    let Some(p) = principal else { return Ok(()) };
    if p.is_empty() || p.chars().count() > MAX_PRINCIPAL_LEN {
        return Err(HarnessError::config(format!("request.principal: expected 1 to {MAX_PRINCIPAL_LEN} characters, got {}", p.chars().count())));
    }
    if p.chars().any(char::is_control) {
        return Err(HarnessError::config(format!("request.principal: control characters are not allowed, got {:?}", escape_control(p))));
    }
    Ok(())
}

pub fn check_endpoint(endpoint: &str) -> Result<(), HarnessError> {
    if endpoint.is_empty() || endpoint.chars().count() > MAX_ENDPOINT_LEN {
        return Err(HarnessError::config(format!(
            "request.endpoint: expected 1 to {MAX_ENDPOINT_LEN} characters, got {}",
            endpoint.chars().count()
        )));
    }
    if endpoint.chars().any(char::is_control) {
        return Err(HarnessError::config(format!(
            "request.endpoint: control characters are not allowed, got {:?}",
            escape_control(endpoint)
        )));
    }
    Ok(())
}

/// The request method, upper-cased; `CONNECT` and `TRACE` are refused.
pub fn method(raw: &str) -> Result<Method, HarnessError> {
    let method = Method::from_bytes(raw.to_ascii_uppercase().as_bytes())
        .map_err(|_| HarnessError::config(format!("request.method: not an HTTP method: {:?}", escape_control(raw))))?;
    if method == Method::CONNECT || method == Method::TRACE {
        return Err(HarnessError::config(format!("request.method: {method} is not allowed")));
    }
    Ok(method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_in_any_spelling_are_refused() {
        for p in [
            "/../../admin",
            "/%2e%2e/admin",
            "/%2E%2e/admin",
            "/.%2e/admin",
            "/..\\..\\admin",
            "/a/./b",
            "/a/%2e",
            "/a/%252e%252e/b",
            "/a/..%2fadmin",
            "/a/..%5cadmin",
            "/..",
            "/..;/admin",
            "/%2e%2e;jsessionid=x/admin",
            "/x/..;/..;/admin",
            "/x/.;/admin",
            "/x/%2e%2e%3b/admin",
            "/x/..%3bx=1/admin",
        ] {
            let e = check_path(p).unwrap_err();
            assert!(e.message.starts_with("request.path:"), "{p}: {}", e.message);
        }
        for p in ["/a/b", "/a/...", "/a/.well-known/x", "/a/b..c", "/a?x=../y", "/", "/a/%2e%2ex", "/a/b;v=1", "/a/...;x", "/a/x..;y"] {
            check_path(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
    }

    #[test]
    fn control_characters_are_refused() {
        for p in ["/a\tb", "/a\nb", "/a\rb", "/a\u{7f}", "/a?q=\u{0}"] {
            let e = check_path(p).unwrap_err();
            assert!(e.message.contains("control characters") && !e.message.contains('\n'), "{}", e.message);
        }
    }

    #[test]
    fn framing_headers_are_forbidden() {
        for h in ["Host", "content-length", "Transfer-Encoding", "CONNECTION", "upgrade", "te", "trailer", "keep-alive", "Proxy-Authorization"] {
            assert!(is_forbidden_header(h), "{h}");
        }
        for h in ["x-host", "content-type", "authorization", "tea"] {
            assert!(!is_forbidden_header(h), "{h}");
        }
    }

    #[test]
    fn endpoint_labels_are_printable_and_short() {
        check_endpoint("/orders/{id}").unwrap();
        assert!(check_endpoint("a\"}\nx 1").is_err());
        assert!(check_endpoint(&"x".repeat(257)).is_err());
        assert!(check_endpoint("").is_err());
    }

    #[test]
    fn connect_and_trace_are_refused() {
        assert!(method("connect").is_err() && method("TRACE").is_err());
        assert_eq!(method("get").unwrap(), Method::GET);
        assert!(method("GE T").is_err());
    }
}
