//! Names across languages: `snake_case` on the wire, `camelCase` and `PascalCase` in hosts.

/// `retry_after_ms` -> `retryAfterMs`.
pub fn camel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut upper = false;
    for c in s.chars() {
        if c == '_' || c == '-' || c == ' ' || c == '.' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `oauth2_client_credentials` -> `Oauth2ClientCredentials`.
pub fn pascal(s: &str) -> String {
    let c = camel(s);
    let mut chars = c.chars();
    match chars.next() {
        Some(f) => f.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `weighted-health` -> `WEIGHTED_HEALTH`.
pub fn constant(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
}

/// A doc comment's text, one line per line, trimmed.
pub fn doc_lines(doc: &str) -> Vec<&str> {
    doc.lines().map(str::trim_end).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_convert() {
        assert_eq!(camel("retry_after_ms"), "retryAfterMs");
        assert_eq!(camel("type"), "type");
        assert_eq!(pascal("oauth2_client_credentials"), "Oauth2ClientCredentials");
        assert_eq!(pascal("request_finished"), "RequestFinished");
        assert_eq!(constant("weighted-health"), "WEIGHTED_HEALTH");
    }
}
