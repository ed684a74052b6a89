//! The endpoint label used for breaker keys and metrics: the caller's label if
//! given, else the path with ID-like segments (numbers, UUIDs, long hex) as `{id}`.

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

fn is_id(seg: &str) -> bool {
    if seg.is_empty() {
        return false;
    }
    if seg.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    if is_uuid(seg) {
        return true;
    }
    seg.len() >= 16 && seg.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_uuid(seg: &str) -> bool {
    let b = seg.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::template;

    #[test]
    fn collapses_ids() {
        assert_eq!(template("/orders/123/items/9"), "/orders/{id}/items/{id}");
        assert_eq!(template("/u/550e8400-e29b-41d4-a716-446655440000"), "/u/{id}");
        assert_eq!(template("/blob/deadbeefdeadbeef01"), "/blob/{id}");
        assert_eq!(template("/v1/orders?x=1"), "/v1/orders");
        assert_eq!(template("/cafe"), "/cafe");
        assert_eq!(template(""), "/");
    }
}
