//! W3C trace context: take the caller's `traceparent` when valid, else start a trace.

use rand::RngCore;

/// Lower-case hex of `N` characters, held inline: ids cost no allocation, so a
/// request record can cross to the writer thread without a heap string to free there.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hex<const N: usize>([u8; N]);

/// A W3C trace id (32 hex characters).
pub type TraceId = Hex<32>;
/// A W3C span id (16 hex characters).
pub type SpanId = Hex<16>;

impl<const N: usize> Hex<N> {
    fn from_bytes(bytes: &[u8]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [b'0'; N];
        for (i, b) in bytes.iter().take(N / 2).enumerate() {
            out[2 * i] = HEX[(b >> 4) as usize];
            out[2 * i + 1] = HEX[(b & 15) as usize];
        }
        Hex(out)
    }

    /// From text already checked to be `N` lower-case hex characters.
    fn from_checked(s: &str) -> Self {
        let mut out = [b'0'; N];
        out.copy_from_slice(&s.as_bytes()[..N]);
        Hex(out)
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex is ASCII")
    }

    /// The `N / 2` bytes the hex spells.
    pub fn to_bytes<const B: usize>(&self) -> [u8; B] {
        let mut out = [0u8; B];
        for (i, pair) in self.0.chunks_exact(2).take(B).enumerate() {
            let nibble = |c: u8| if c.is_ascii_digit() { c - b'0' } else { c - b'a' + 10 };
            out[i] = nibble(pair[0]) << 4 | nibble(pair[1]);
        }
        out
    }
}

impl<const N: usize> std::fmt::Display for Hex<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> std::fmt::Debug for Hex<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl<const N: usize> serde::Serialize for Hex<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<const N: usize> PartialEq<&str> for Hex<N> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// The caller's span, when it sent a valid `traceparent`.
    pub parent: Option<SpanId>,
    pub sampled: bool,
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) && s.bytes().any(|b| b != b'0')
}

impl TraceContext {
    /// A new span in the caller's trace (its sampling decision kept), or a new trace when
    /// `parent` is absent or malformed, sampled with probability `ratio` (by trace id, as
    /// OpenTelemetry's `TraceIdRatioBased` does, so every process agrees on a trace).
    pub fn child_of(parent: Option<&str>, ratio: f64) -> TraceContext {
        let mut rng = rand::rng();
        let mut span = [0u8; 8];
        rng.fill_bytes(&mut span);
        if let Some((trace_id, parent, sampled)) = parent.and_then(parse) {
            return TraceContext { trace_id, span_id: Hex::from_bytes(&span), parent: Some(parent), sampled };
        }
        let mut trace = [0u8; 16];
        rng.fill_bytes(&mut trace);
        let sampled = ratio >= 1.0 || {
            let low = u64::from_be_bytes(trace[8..].try_into().expect("8 bytes")) >> 1;
            (low as f64) < ratio * (1u64 << 63) as f64
        };
        TraceContext { trace_id: Hex::from_bytes(&trace), span_id: Hex::from_bytes(&span), parent: None, sampled }
    }

    /// A fresh span id in the same trace, whose parent is this span (one attempt on the wire).
    pub fn next_span(&self) -> TraceContext {
        let mut span = [0u8; 8];
        rand::rng().fill_bytes(&mut span);
        TraceContext { trace_id: self.trace_id, span_id: Hex::from_bytes(&span), parent: Some(self.span_id), sampled: self.sampled }
    }

    /// The `traceparent` value: `00-<trace>-<span>-<flags>`, assembled on the stack.
    pub fn header_bytes(&self) -> [u8; 55] {
        let mut h = [0u8; 55];
        h[..3].copy_from_slice(b"00-");
        h[3..35].copy_from_slice(&self.trace_id.0);
        h[35] = b'-';
        h[36..52].copy_from_slice(&self.span_id.0);
        h[52..].copy_from_slice(if self.sampled { b"-01" } else { b"-00" });
        h
    }

    pub fn header(&self) -> String {
        String::from_utf8(self.header_bytes().to_vec()).expect("ASCII")
    }
}

/// Parses `00-<32 hex>-<16 hex>-<2 hex>`; returns the trace id, parent span id and sampled flag.
fn parse(v: &str) -> Option<(TraceId, SpanId, bool)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    if parts.len() < 4 || parts[0].len() != 2 || parts[0] == "ff" {
        return None;
    }
    if !is_lower_hex(parts[1], 32) || !is_lower_hex(parts[2], 16) || parts[3].len() != 2 {
        return None;
    }
    let flags = u8::from_str_radix(parts[3], 16).ok()?;
    Some((Hex::from_checked(parts[1]), Hex::from_checked(parts[2]), flags & 1 == 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_callers_trace() {
        let t = TraceContext::child_of(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), 0.0);
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.parent.unwrap(), "00f067aa0ba902b7");
        assert!(t.sampled, "the caller's decision wins over the ratio");
        assert_eq!(t.trace_id.to_bytes::<16>()[..2], [0x4b, 0xf9]);
        assert_ne!(t.span_id, "00f067aa0ba902b7");
        assert!(t.header().starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    }

    #[test]
    fn malformed_parent_starts_new_trace() {
        let t = TraceContext::child_of(Some("garbage"), 1.0);
        assert_eq!(t.trace_id.as_str().len(), 32);
        assert!(t.parent.is_none() && t.sampled);
        let z = TraceContext::child_of(Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), 1.0);
        assert_ne!(z.trace_id, "00000000000000000000000000000000");
    }

    #[test]
    fn ratio_samples_that_share_of_new_traces() {
        let sampled = (0..20_000).filter(|_| TraceContext::child_of(None, 0.25).sampled).count();
        assert!((4_400..5_600).contains(&sampled), "{sampled} of 20000 at 0.25");
        assert!((0..1000).all(|_| !TraceContext::child_of(None, 0.0).sampled));
        let t = TraceContext::child_of(None, 0.0);
        assert!(!t.next_span().sampled && t.next_span().parent == Some(t.span_id));
    }
}
