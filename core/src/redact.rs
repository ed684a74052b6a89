//! What Harness prints about a request: control characters escaped, secrets
//! replaced by `***`, downstream text capped.
//!
//! Guarantees: `escape_control` output has no C0/C1 control character or DEL;
//! `redact_url` never shows a URL's password; `Secrets::scrub` replaces every
//! known secret value (and its bare token after an auth scheme) before a
//! downstream message reaches an error or a log line.

use std::borrow::Cow;
use std::fmt::Write;

/// Longest downstream message (in characters) carried into an error or a log line.
pub const MAX_DOWNSTREAM_MESSAGE: usize = 200;

/// Shortest value treated as a secret: shorter ones would blank out ordinary words.
const MIN_SECRET_LEN: usize = 4;

/// `\n`, `\r`, `\t` and `\u{..}` for every control character; other text as is.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A URL as it may be printed: a password in the userinfo becomes `***`
/// (`http://user:***@host/`), a user name alone stays. Works on unparseable text too.
pub fn redact_url(s: &str) -> Cow<'_, str> {
    let Some(scheme_end) = s.find("://") else { return Cow::Borrowed(s) };
    let rest = &s[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else { return Cow::Borrowed(s) };
    let userinfo = &authority[..at];
    let user = match userinfo.split_once(':') {
        Some((user, _)) => user,
        None => return Cow::Borrowed(s),
    };
    Cow::Owned(format!("{}{}:***{}", &s[..scheme_end + 3], user, &rest[at..]))
}

/// Header names whose values are credentials (matched case-insensitively, by substring).
pub fn is_sensitive_name(name: &str) -> bool {
    const EXACT: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];
    const PARTS: [&str; 8] = ["token", "secret", "key", "auth", "session", "password", "passwd", "signature"];
    let lower = name.to_ascii_lowercase();
    EXACT.contains(&lower.as_str()) || PARTS.iter().any(|p| lower.contains(p))
}

/// Every secret value Harness knows for one request.
#[derive(Default, Clone)]
pub struct Secrets {
    values: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.values.len())
    }
}

impl Secrets {
    /// Adds a credential; `Bearer abc` also adds `abc`, `a=1; b=2` (cookies) each value.
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        self.push(value);
        if let Some((scheme, token)) = value.split_once(' ') {
            if !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                self.push(token.trim());
            }
        }
        if value.contains(';') || value.contains('=') {
            for part in value.split(';') {
                if let Some((_, v)) = part.split_once('=') {
                    self.push(v.trim());
                }
            }
        }
    }

    /// Adds the value of a header or query parameter when its name says it is a credential.
    pub fn add_if_sensitive(&mut self, name: &str, value: &str) {
        if is_sensitive_name(name) {
            self.add(value);
        }
    }

    fn push(&mut self, v: &str) {
        if v.chars().count() >= MIN_SECRET_LEN && !self.values.iter().any(|x| x == v) {
            self.values.push(v.to_string());
            // Longest first, so a value containing a shorter secret is replaced whole.
            self.values.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The values themselves, longest first: for a scrubber of another shape (a stream, an
    /// encoded form). Never print them.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.values.iter().map(String::as_str)
    }

    /// Every known secret replaced by `***`.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = Cow::Owned(out.replace(v.as_str(), "***"));
            }
        }
        out
    }

    /// `bytes` with every known secret replaced by `***`; `None` when none occurs.
    pub fn scrub_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        for v in &self.values {
            let needle = v.as_bytes();
            let hay = out.as_deref().unwrap_or(bytes);
            if needle.is_empty() || !hay.windows(needle.len()).any(|w| w == needle) {
                continue;
            }
            let mut next = Vec::with_capacity(hay.len());
            let mut i = 0;
            while i < hay.len() {
                if hay[i..].starts_with(needle) {
                    next.extend_from_slice(b"***");
                    i += needle.len();
                } else {
                    next.push(hay[i]);
                    i += 1;
                }
            }
            out = Some(next);
        }
        out
    }

    /// A downstream message as Harness may show it: scrubbed, control characters
    /// escaped, and at most `MAX_DOWNSTREAM_MESSAGE` characters (then `...`).
    pub fn downstream_message(&self, text: &str) -> String {
        let scrubbed = self.scrub(text);
        let escaped = escape_control(&scrubbed);
        if escaped.chars().count() <= MAX_DOWNSTREAM_MESSAGE {
            return escaped.into_owned();
        }
        let mut capped: String = escaped.chars().take(MAX_DOWNSTREAM_MESSAGE).collect();
        capped.push_str("...");
        capped
    }
}

/// At most `max` characters of `s`, then `...`.
pub fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push_str("...");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_control("a\r\nb\tc\u{7f}d\u{1b}"), "a\\r\\nb\\tc\\u{7f}d\\u{1b}");
        assert!(matches!(escape_control("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn url_password_is_redacted() {
        assert_eq!(redact_url("ftp://user:SECRET@host/x"), "ftp://user:***@host/x");
        assert_eq!(redact_url("http://u:p@ss@h:1/"), "http://u:***@h:1/");
        assert_eq!(redact_url("http://user@host/"), "http://user@host/");
        assert_eq!(redact_url("http://host/a@b"), "http://host/a@b");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn secrets_are_scrubbed_and_messages_capped() {
        let mut s = Secrets::default();
        s.add_if_sensitive("Authorization", "Bearer tok-123456");
        s.add_if_sensitive("X-Api-Key", "k-abcdef");
        s.add_if_sensitive("X-Team", "checkout");
        assert_eq!(s.scrub("bad token tok-123456 for k-abcdef by checkout"), "bad token *** for *** by checkout");
        assert_eq!(s.scrub("Bearer tok-123456"), "***");
        let long = "x".repeat(500);
        let m = s.downstream_message(&format!("k-abcdef\n{long}"));
        assert!(m.starts_with("***\\nxxx") && m.ends_with("...") && m.chars().count() == MAX_DOWNSTREAM_MESSAGE + 3);
    }

    #[test]
    fn bytes_are_scrubbed_too() {
        let mut s = Secrets::default();
        s.add("tok-123456");
        assert_eq!(s.scrub_bytes(b"{\"t\":\"tok-123456\"} tok-123456").unwrap(), b"{\"t\":\"***\"} ***");
        assert!(s.scrub_bytes(b"nothing here").is_none());
    }

    #[test]
    fn sensitive_names() {
        for n in ["authorization", "Cookie", "x-api-key", "X-Auth-Token", "client_secret", "api_key"] {
            assert!(is_sensitive_name(n), "{n}");
        }
        for n in ["x-team", "accept", "content-type"] {
            assert!(!is_sensitive_name(n), "{n}");
        }
    }
}
