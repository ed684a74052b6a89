//! W3C trace context: take the caller's `traceparent` when valid, else start a trace.

use rand::RngCore;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: String,
    pub span_id: String,
    pub sampled: bool,
}

fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) && s.bytes().any(|b| b != b'0')
}

impl TraceContext {
    /// A new span in the caller's trace, or a new trace when `parent` is absent or malformed.
    pub fn child_of(parent: Option<&str>) -> TraceContext {
        let mut rng = rand::rng();
        let mut span = [0u8; 8];
        rng.fill_bytes(&mut span);
        if let Some(p) = parent.and_then(parse) {
            return TraceContext { trace_id: p.0, span_id: hex(&span), sampled: p.1 };
        }
        let mut trace = [0u8; 16];
        rng.fill_bytes(&mut trace);
        TraceContext { trace_id: hex(&trace), span_id: hex(&span), sampled: true }
    }

    /// A fresh span id for one attempt, same trace.
    pub fn next_span(&self) -> TraceContext {
        let mut span = [0u8; 8];
        rand::rng().fill_bytes(&mut span);
        TraceContext { trace_id: self.trace_id.clone(), span_id: hex(&span), sampled: self.sampled }
    }

    pub fn header(&self) -> String {
        // Hand-assembled: format! costs more than the rest of this struct's work per request.
        let mut h = String::with_capacity(55);
        h.push_str("00-");
        h.push_str(&self.trace_id);
        h.push('-');
        h.push_str(&self.span_id);
        h.push_str(if self.sampled { "-01" } else { "-00" });
        h
    }
}

/// Parses `00-<32 hex>-<16 hex>-<2 hex>`; returns the trace id and sampled flag.
fn parse(v: &str) -> Option<(String, bool)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    if parts.len() < 4 || parts[0].len() != 2 || parts[0] == "ff" {
        return None;
    }
    if !is_lower_hex(parts[1], 32) || !is_lower_hex(parts[2], 16) || parts[3].len() != 2 {
        return None;
    }
    let flags = u8::from_str_radix(parts[3], 16).ok()?;
    Some((parts[1].to_string(), flags & 1 == 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_callers_trace() {
        let t = TraceContext::child_of(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(t.span_id, "00f067aa0ba902b7");
        assert!(t.header().starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    }

    #[test]
    fn malformed_parent_starts_new_trace() {
        let t = TraceContext::child_of(Some("garbage"));
        assert_eq!(t.trace_id.len(), 32);
        let z = TraceContext::child_of(Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
        assert_ne!(z.trace_id, "00000000000000000000000000000000");
    }
}
