//! Service credentials never reach a caller.
//!
//! Guarantees: every secret the configured services hold now (the core's `service_secrets`:
//! sensitive static headers, base URL passwords, tokens, pool keys, OAuth2 client secrets and
//! access tokens), in its raw, URL-encoded and JSON-escaped forms, is replaced by `***` in
//! whatever the gateway sends: every response header and every body, whatever the status. A
//! stream holds back only a tail that could be the start of a secret, so a secret split across
//! chunks is replaced too, and nothing else is delayed.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use axum::http::HeaderValue;

/// Shorter values are not treated as secrets (the core's rule: they would blank out words).
const MIN_LEN: usize = 4;
const MASK: &[u8] = b"***";

/// Every form of every known secret, compiled once per set of secrets.
pub struct Scrubber {
    ac: Option<AhoCorasick>,
    patterns: Vec<Vec<u8>>,
}

/// The forms a secret may take in an answer: as sent, in a query string (form and percent
/// encoding), and inside a JSON string.
fn forms(secret: &str) -> Vec<Vec<u8>> {
    let mut out = vec![secret.as_bytes().to_vec()];
    out.push(form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>().into_bytes());
    out.push(percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC).to_string().into_bytes());
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"');
    out.push(json.as_bytes().to_vec());
    out.push(json.replace('/', "\\/").into_bytes());
    out
}

impl Scrubber {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Scrubber {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for s in secrets {
            for f in forms(s) {
                if f.len() >= MIN_LEN && !patterns.contains(&f) {
                    patterns.push(f);
                }
            }
        }
        // Leftmost-longest: a secret that contains a shorter one is replaced whole.
        let ac = (!patterns.is_empty()).then(|| {
            AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns).expect("a few short patterns always compile")
        });
        Scrubber { ac, patterns }
    }

    pub fn is_empty(&self) -> bool {
        self.ac.is_none()
    }

    /// `bytes` with every secret replaced; `None` when there is none.
    pub fn bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let ac = self.ac.as_ref()?;
        if !ac.is_match(bytes) {
            return None;
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut last = 0;
        for m in ac.find_iter(bytes) {
            out.extend_from_slice(&bytes[last..m.start()]);
            out.extend_from_slice(MASK);
            last = m.end();
        }
        out.extend_from_slice(&bytes[last..]);
        Some(out)
    }

    /// A header value with every secret replaced; `None` when there is none.
    pub fn header(&self, value: &HeaderValue) -> Option<HeaderValue> {
        let b = self.bytes(value.as_bytes())?;
        Some(HeaderValue::from_bytes(&b).unwrap_or(HeaderValue::from_static("***")))
    }

    /// A scrubber for one stream of chunks.
    pub fn stream(self: &Arc<Self>) -> StreamScrub {
        StreamScrub { scrubber: self.clone(), carry: Vec::new() }
    }

    /// The first position at or after `from` where the rest of `buf` is a proper prefix of a
    /// secret (it may be completed by the next chunk); `buf.len()` when there is none.
    fn hold_point(&self, buf: &[u8], from: usize) -> usize {
        let longest = self.patterns.iter().map(Vec::len).max().unwrap_or(0);
        let start = from.max(buf.len().saturating_sub(longest.saturating_sub(1)));
        (start..buf.len()).find(|&p| self.patterns.iter().any(|pat| pat.len() > buf.len() - p && pat.starts_with(&buf[p..]))).unwrap_or(buf.len())
    }
}

/// Scrubs a body that arrives in chunks: each `push` returns what can be sent now.
pub struct StreamScrub {
    scrubber: Arc<Scrubber>,
    carry: Vec<u8>,
}

impl StreamScrub {
    /// What of everything pushed so far can be sent: all but a tail that may begin a secret.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let Some(ac) = self.scrubber.ac.as_ref() else { return chunk.to_vec() };
        self.carry.extend_from_slice(chunk);
        let buf = std::mem::take(&mut self.carry);
        let mut out = Vec::with_capacity(buf.len());
        let mut pos = 0;
        loop {
            let hold = self.scrubber.hold_point(&buf, pos);
            // A match that starts before the hold point is complete: no later byte can make a
            // longer one start there (a longer one would make that position a hold point).
            match ac.find(Input::new(&buf).span(pos..buf.len())) {
                Some(m) if m.start() < hold => {
                    out.extend_from_slice(&buf[pos..m.start()]);
                    out.extend_from_slice(MASK);
                    pos = m.end();
                }
                _ => {
                    out.extend_from_slice(&buf[pos..hold]);
                    self.carry = buf[hold..].to_vec();
                    return out;
                }
            }
        }
    }

    /// `push` for text: a secret starts on a character boundary, so both parts stay UTF-8.
    pub fn push_str(&mut self, chunk: &str) -> String {
        let out = self.push(chunk.as_bytes());
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The held tail at the end of the stream, scrubbed.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.carry);
        self.scrubber.bytes(&rest).unwrap_or(rest)
    }

    pub fn finish_str(&mut self) -> String {
        let out = self.finish();
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Scrubber {
        fn text(&self, text: &str) -> String {
            String::from_utf8(self.bytes(text.as_bytes()).unwrap_or_else(|| text.as_bytes().to_vec())).unwrap()
        }
    }

    fn streamed(s: &Arc<Scrubber>, chunks: &[&str]) -> String {
        let mut st = s.stream();
        let mut out: String = chunks.iter().map(|c| st.push_str(c)).collect();
        out.push_str(&st.finish_str());
        out
    }

    #[test]
    fn every_form_of_a_secret_is_replaced() {
        let s = Scrubber::new(["pg+key/42=secret", "tok-1", "abc"]);
        assert_eq!(s.text("a pg+key/42=secret b"), "a *** b");
        assert_eq!(s.text("?api_key=pg%2Bkey%2F42%3Dsecret&x"), "?api_key=***&x");
        assert_eq!(s.text(r#"{"k":"pg+key\/42=secret"}"#), r#"{"k":"***"}"#);
        assert_eq!(s.text("tok-12 abc"), "***2 abc", "values under 4 characters are not secrets");
        assert!(s.bytes(b"nothing").is_none());
        assert!(Scrubber::new([]).is_empty());
    }

    #[test]
    fn a_secret_split_across_chunks_is_replaced_and_nothing_else_is_held() {
        let s = Arc::new(Scrubber::new(["s3cr3t_a bc9z", "bc9z-longer"]));
        assert_eq!(streamed(&s, &["the key", " s3cr", "3t_a", " bc9z", " ends"]), "the key *** ends");
        assert_eq!(streamed(&s, &["x s3cr3t_a bc9z-longer y"]), "x ***-longer y", "leftmost first");
        assert_eq!(streamed(&s, &["ends with s3cr"]), "ends with s3cr");
        let mut st = s.stream();
        assert_eq!(st.push_str("hello "), "hello ", "text that cannot start a secret is sent at once");
        assert_eq!(st.push_str("wor s3"), "wor ");
        assert_eq!(st.push_str("x"), "s3x");
        assert_eq!(st.push_str("é s"), "é ");
        assert_eq!(st.finish_str(), "s");
    }
}
