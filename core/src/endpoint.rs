//! The endpoint label used for breaker keys and metrics: the caller's label if
//! given, else the path with ID-like segments as `{id}`: numbers, UUIDs, hex of 8
//! or more, emails, and any segment mixing letters and digits (`user-42z`,
//! `ord_ab12`) except version-like words (`v1`, `v2beta1`, `oauth2`, `utf8`).
//!
//! Guarantees: the label of a path is bounded by the path's non-ID words; the
//! per-service count of labels is bounded separately (`limits.max_endpoints`).

/// Collapses ID-like path segments to `{id}`; the query string is dropped.
pub fn template(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut out = String::with_capacity(path.len());
    for (i, seg) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if is_id(seg) {
            out.push_str("{id}");
        } else {
            out.push_str(seg);
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The label shared by every endpoint past a service's `limits.max_endpoints`.
pub const OTHER: &str = "{other}";

fn is_id(seg: &str) -> bool {
    if seg.is_empty() {
        return false;
    }
    let b = seg.as_bytes();
    if b.iter().all(u8::is_ascii_digit) || is_uuid(seg) || seg.contains('@') {
        return true;
    }
    if b.len() >= 8 && b.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    let has_digit = b.iter().any(u8::is_ascii_digit);
    let has_letter = b.iter().any(u8::is_ascii_alphabetic);
    has_digit && (has_letter || b.iter().any(|c| !c.is_ascii_alphanumeric())) && !is_versionish(b)
}

/// `v1`, `v2beta1`, `v10`, and a word of two or more letters ending in one digit
/// (`oauth2`, `http2`, `utf8`, `ipv4`): names in an API, not IDs.
fn is_versionish(b: &[u8]) -> bool {
    if b.first() == Some(&b'v') && b.get(1).is_some_and(u8::is_ascii_digit) {
        return b[1..].iter().all(u8::is_ascii_alphanumeric) && b.len() <= 12;
    }
    let letters = b.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    letters >= 2 && b.len() == letters + 1 && b[letters].is_ascii_digit()
}

fn is_uuid(seg: &str) -> bool {
    let b = seg.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Whether a config key names (`method`, `endpoint`): `METHOD /template`, or the template
/// alone for any method (rate-limit and validation keys alike).
/// Matches a concrete `path` (no query) against a path template: `{name}` takes one
/// segment, a lone `*` takes any path. Returns the captured `(name, value)` pairs.
pub fn capture<'t, 'p>(template: &'t str, path: &'p str) -> Option<Vec<(&'t str, &'p str)>> {
    if template == "*" {
        return Some(Vec::new());
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut out = Vec::new();
    let mut t = template.split('/');
    let mut p = path.split('/');
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(out),
            (Some(ts), Some(ps)) => {
                if let Some(name) = ts.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                    if ps.is_empty() {
                        return None;
                    }
                    out.push((name, ps));
                } else if ts != ps {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

/// Does `key` (`"METHOD /tpl"` or `"/tpl"`) match this method and concrete path?
pub fn key_matches_path(key: &str, method: &str, path: &str) -> bool {
    match key.split_once(' ') {
        Some((m, t)) => m.eq_ignore_ascii_case(method) && capture(t, path).is_some(),
        None => capture(key, path).is_some(),
    }
}

pub fn key_matches(key: &str, method: &str, endpoint: &str) -> bool {
    key == endpoint || key.split_once(' ').is_some_and(|(m, e)| m.eq_ignore_ascii_case(method) && e == endpoint)
}

#[cfg(test)]
mod tests {
    use super::{capture, key_matches_path, template};

    #[test]
    fn captures_template_variables() {
        assert_eq!(capture("/orders/{id}", "/orders/42"), Some(vec![("id", "42")]));
        assert_eq!(capture("/a/{x}/b/{y}", "/a/1/b/2?q=1"), Some(vec![("x", "1"), ("y", "2")]));
        assert_eq!(capture("/orders/{id}", "/orders/"), None);
        assert_eq!(capture("/orders/{id}", "/orders/1/items"), None);
        assert_eq!(capture("/orders", "/order"), None);
        assert_eq!(capture("*", "/anything/at/all"), Some(vec![]));
        assert!(key_matches_path("GET /orders/{id}", "get", "/orders/7"));
        assert!(!key_matches_path("POST /orders/{id}", "GET", "/orders/7"));
        assert!(key_matches_path("/orders/{id}", "DELETE", "/orders/7"));
    }

    #[test]
    fn collapses_ids() {
        assert_eq!(template("/orders/123/items/9"), "/orders/{id}/items/{id}");
        assert_eq!(template("/u/550e8400-e29b-41d4-a716-446655440000"), "/u/{id}");
        assert_eq!(template("/blob/deadbeefdeadbeef01"), "/blob/{id}");
        assert_eq!(template("/v1/orders?x=1"), "/v1/orders");
        assert_eq!(template("/cafe"), "/cafe");
        assert_eq!(template(""), "/");
    }

    #[test]
    fn collapses_mixed_prefixed_hex_and_email_segments() {
        assert_eq!(template("/users/user-42z"), "/users/{id}");
        assert_eq!(template("/orders/ord_ab12/lines"), "/orders/{id}/lines");
        assert_eq!(template("/blob/deadbeef"), "/blob/{id}");
        assert_eq!(template("/people/ann@example.com"), "/people/{id}");
        assert_eq!(template("/v1/customers/cus_NffrFeUfNV2Hib"), "/v1/customers/{id}");
        assert_eq!(template("/files/2024-01-05"), "/files/{id}");
    }

    #[test]
    fn keeps_versions_and_words() {
        assert_eq!(template("/api/v1/orders"), "/api/v1/orders");
        assert_eq!(template("/api/v2beta1/x"), "/api/v2beta1/x");
        assert_eq!(template("/oauth2/token"), "/oauth2/token");
        assert_eq!(template("/ipv4/utf8"), "/ipv4/utf8");
        assert_eq!(template("/users/me/settings"), "/users/me/settings");
        assert_eq!(template("/well-known"), "/well-known");
    }
}
