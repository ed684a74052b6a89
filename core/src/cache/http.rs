//! HTTP caching by RFC 9111, as a private cache: the rules are `http-cache-semantics`'
//! (freshness from `Cache-Control`, `Expires` and `Age`; `no-store`, `no-cache`,
//! `must-revalidate`; validators and the 304 refresh; `Vary`); `stale-while-revalidate`
//! and `stale-if-error` (RFC 5861), which that crate does not read, are read here.
//!
//! Guarantees: only GET and HEAD answers the policy calls storable are kept; a stored
//! answer is served only while the policy says it is fresh for this request (its `Vary`
//! headers included), or stale within the answer's own `stale-while-revalidate` /
//! `stale-if-error` window and never under `must-revalidate` or `no-cache`; a 304 refreshes
//! the stored answer only when its validator matches.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use http_cache_semantics::{AfterResponse, BeforeRequest, CacheOptions, CachePolicy};

use super::store::Weigh;

/// Variants kept per URL (one per distinct set of `Vary` header values).
const MAX_VARIANTS: usize = 4;

/// One stored answer.
pub struct HttpEntry {
    policy: CachePolicy,
    pub status: u16,
    pub body: Bytes,
    /// When it stops being fresh (stored then, from the policy's time to live).
    fresh_until: SystemTime,
    stale_if_error: Option<Duration>,
    stale_while_revalidate: Option<Duration>,
    /// `must-revalidate` or `no-cache`: never served stale.
    strict: bool,
    /// As received.
    headers: Vec<(String, String)>,
    header_bytes: usize,
    /// A `stale-while-revalidate` refresh is under way.
    refreshing: std::sync::atomic::AtomicBool,
}

/// Every variant stored for one URL.
#[derive(Default)]
pub struct Variants(pub Vec<Arc<HttpEntry>>);

impl Weigh for Variants {
    fn bytes(&self) -> usize {
        self.0.iter().map(|e| e.body.len() + e.header_bytes + 256).sum()
    }
}

/// What a lookup found for a request.
pub enum Lookup {
    /// Served as is: the stored status, body and these headers (`age` brought up to date).
    Fresh { entry: Arc<HttpEntry>, headers: Vec<(String, String)> },
    /// Must go to the origin with these validator headers (`if-none-match`,
    /// `if-modified-since`); `entry` is what a 304, an error or `stale-while-revalidate` may serve.
    Stale { entry: Arc<HttpEntry>, validators: Vec<(String, String)>, serve_while_revalidating: bool },
    Miss,
}

/// The request as the policy sees it: method, path and query, the caller's headers but
/// its credentials (the policy is stored, in Redis too when shared; a credentialed answer
/// is kept apart by the credential's digest in its key instead).
pub fn request_parts(method: &Method, path_and_query: &str, headers: &[(String, String)]) -> http::request::Parts {
    let mut parts = http::Request::builder().method(method.clone()).uri(uri_of(path_and_query)).body(()).expect("a method and a URI").into_parts().0;
    let plain: Vec<(String, String)> = headers.iter().filter(|(k, _)| !crate::redact::is_sensitive_name(k)).cloned().collect();
    parts.headers = header_map(&plain);
    parts
}

fn uri_of(path_and_query: &str) -> http::Uri {
    http::Uri::try_from(path_and_query).unwrap_or_else(|_| http::Uri::from_static("/"))
}

fn header_map(headers: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (k, v) in headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
            map.append(n, v);
        }
    }
    map
}

fn pairs(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}

fn options() -> CacheOptions {
    // A private cache: `private` answers may be kept, `s-maxage` is ignored.
    CacheOptions { shared: false, ..Default::default() }
}

/// A directive's seconds in `Cache-Control` (`stale-if-error=60`).
fn directive_secs(headers: &HeaderMap, name: &str) -> Option<Duration> {
    headers.get_all(http::header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).find_map(|d| {
        let (k, v) = d.trim().split_once('=')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().trim_matches('"').parse::<u64>().ok()).flatten().map(Duration::from_secs)
    })
}

fn has_directive(headers: &HeaderMap, name: &str) -> bool {
    headers.get_all(http::header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|d| {
        let d = d.trim();
        let k = d.split_once('=').map_or(d, |(k, _)| k).trim();
        k.eq_ignore_ascii_case(name)
    })
}

/// The entry to store for this answer, if the rules allow storing it.
pub fn storable(req: &http::request::Parts, status: u16, headers: &[(String, String)], body: Bytes, now: SystemTime) -> Option<HttpEntry> {
    if req.method != Method::GET && req.method != Method::HEAD {
        return None;
    }
    let mut res = http::Response::builder().status(status).body(()).ok()?.into_parts().0;
    res.headers = header_map(headers);
    let policy = CachePolicy::new_options(req, &res, now, options());
    if !policy.is_storable() {
        return None;
    }
    let ttl = policy.time_to_live(now);
    let strict = has_directive(&res.headers, "must-revalidate") || has_directive(&res.headers, "no-cache");
    let has_validator = res.headers.contains_key(http::header::ETAG) || res.headers.contains_key(http::header::LAST_MODIFIED);
    let stale_if_error = directive_secs(&res.headers, "stale-if-error");
    let stale_while_revalidate = directive_secs(&res.headers, "stale-while-revalidate");
    // Never fresh, nothing to revalidate with, no stale window: nothing to gain by keeping it.
    if ttl.is_zero() && !has_validator && stale_if_error.is_none() && stale_while_revalidate.is_none() {
        return None;
    }
    let header_bytes = headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    Some(HttpEntry { policy, status, body, fresh_until: now + ttl, stale_if_error, stale_while_revalidate, strict, headers: headers.to_vec(), header_bytes, refreshing: Default::default() })
}

impl HttpEntry {
    /// What this entry can do for `req` at `now`.
    fn lookup(self: &Arc<Self>, req: &http::request::Parts, now: SystemTime) -> Option<Lookup> {
        match self.policy.before_request(req, now) {
            BeforeRequest::Fresh(parts) => Some(Lookup::Fresh { entry: self.clone(), headers: pairs(&parts.headers) }),
            BeforeRequest::Stale { request, matches: true } => {
                let validators = ["if-none-match", "if-modified-since"]
                    .iter()
                    .filter_map(|n| request.headers.get(*n).and_then(|v| v.to_str().ok()).map(|v| (n.to_string(), v.to_string())))
                    .collect();
                let serve_while_revalidating = !self.strict
                    && !no_cache_requested(req)
                    && self.stale_while_revalidate.is_some_and(|w| now.duration_since(self.fresh_until).is_ok_and(|late| late <= w));
                Some(Lookup::Stale { entry: self.clone(), validators, serve_while_revalidating })
            }
            BeforeRequest::Stale { matches: false, .. } => None,
        }
    }

    /// How long the store keeps it: while fresh, then its stale windows, then (with a
    /// validator) up to `revalidation` more for a 304 to refresh it.
    pub fn keep_for(&self, now: SystemTime, revalidation: Duration) -> Duration {
        let fresh = self.fresh_until.duration_since(now).unwrap_or_default();
        let windows = self.stale_if_error.unwrap_or_default().max(self.stale_while_revalidate.unwrap_or_default());
        let validator = self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("etag") || k.eq_ignore_ascii_case("last-modified"));
        fresh + windows.max(if validator { revalidation } else { Duration::ZERO })
    }

    /// Claims the entry's one background refresh; false when one is under way.
    pub fn start_refresh(&self) -> bool {
        !self.refreshing.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    pub fn end_refresh(&self) {
        self.refreshing.store(false, std::sync::atomic::Ordering::Release);
    }

    /// Whether this stale entry may stand in for an error at `now` (`stale-if-error`).
    pub fn serves_on_error(&self, now: SystemTime) -> bool {
        !self.strict && self.stale_if_error.is_some_and(|w| now.duration_since(self.fresh_until).map_or(true, |late| late <= w))
    }

    /// The stored answer's headers with `age` brought up to date (a stale answer served).
    pub fn headers_at(&self, now: SystemTime) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self.headers.iter().filter(|(k, _)| k != "age").cloned().collect();
        out.push(("age".into(), self.policy.age(now).as_secs().to_string()));
        out
    }

    /// The entry refreshed by the origin's 304 (its headers merged), when the validator matches.
    pub fn refreshed(&self, req: &http::request::Parts, status: u16, headers: &[(String, String)], now: SystemTime) -> Option<(HttpEntry, Vec<(String, String)>)> {
        let mut res = http::Response::builder().status(status).body(()).ok()?.into_parts().0;
        res.headers = header_map(headers);
        match self.policy.after_response(req, &res, now) {
            AfterResponse::NotModified(policy, parts) => {
                let ttl = policy.time_to_live(now);
                let merged = pairs(&parts.headers);
                let entry = HttpEntry {
                    fresh_until: now + ttl,
                    stale_if_error: directive_secs(&parts.headers, "stale-if-error"),
                    stale_while_revalidate: directive_secs(&parts.headers, "stale-while-revalidate"),
                    strict: has_directive(&parts.headers, "must-revalidate") || has_directive(&parts.headers, "no-cache"),
                    header_bytes: merged.iter().map(|(k, v)| k.len() + v.len()).sum(),
                    headers: merged.clone(),
                    refreshing: Default::default(),
                    policy,
                    status: self.status,
                    body: self.body.clone(),
                };
                Some((entry, merged))
            }
            AfterResponse::Modified(..) => None,
        }
    }
}

fn no_cache_requested(req: &http::request::Parts) -> bool {
    has_directive(&req.headers, "no-cache") || has_directive(&req.headers, "max-age")
}

/// One stored answer as the fleet's store keeps it (JSON; the body in base64).
#[derive(serde::Serialize, serde::Deserialize)]
struct EntryWire {
    policy: CachePolicy,
    status: u16,
    body: String,
    fresh_until: SystemTime,
    stale_if_error: Option<Duration>,
    stale_while_revalidate: Option<Duration>,
    strict: bool,
    headers: Vec<(String, String)>,
}

impl Variants {
    /// The variants as the fleet's store keeps them.
    pub fn to_wire(&self) -> Option<Vec<u8>> {
        use base64::Engine as _;
        let list: Vec<EntryWire> = self
            .0
            .iter()
            .map(|e| EntryWire {
                policy: e.policy.clone(),
                status: e.status,
                body: base64::engine::general_purpose::STANDARD.encode(&e.body),
                fresh_until: e.fresh_until,
                stale_if_error: e.stale_if_error,
                stale_while_revalidate: e.stale_while_revalidate,
                strict: e.strict,
                headers: e.headers.clone(),
            })
            .collect();
        serde_json::to_vec(&list).ok()
    }

    /// Variants read back from the fleet's store; `None` when malformed.
    pub fn from_wire(bytes: &[u8]) -> Option<Variants> {
        use base64::Engine as _;
        let list: Vec<EntryWire> = serde_json::from_slice(bytes).ok()?;
        if list.is_empty() || list.len() > MAX_VARIANTS {
            return None;
        }
        let mut out = Vec::with_capacity(list.len());
        for w in list {
            let body = base64::engine::general_purpose::STANDARD.decode(w.body.as_bytes()).ok()?;
            let header_bytes = w.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
            out.push(Arc::new(HttpEntry {
                policy: w.policy,
                status: w.status,
                body: Bytes::from(body),
                fresh_until: w.fresh_until,
                stale_if_error: w.stale_if_error,
                stale_while_revalidate: w.stale_while_revalidate,
                strict: w.strict,
                headers: w.headers,
                header_bytes,
                refreshing: Default::default(),
            }));
        }
        Some(Variants(out))
    }

    /// The best a stored variant can do for `req`: fresh, else one to revalidate.
    pub fn lookup(&self, req: &http::request::Parts, now: SystemTime) -> Lookup {
        let mut stale = None;
        for e in &self.0 {
            match e.lookup(req, now) {
                Some(fresh @ Lookup::Fresh { .. }) => return fresh,
                Some(s @ Lookup::Stale { .. }) if stale.is_none() => stale = Some(s),
                _ => {}
            }
        }
        stale.unwrap_or(Lookup::Miss)
    }

    /// These variants with `entry` in place of the one it answers the same request for.
    pub fn with(&self, req: &http::request::Parts, entry: HttpEntry, now: SystemTime) -> Variants {
        let mut list: Vec<Arc<HttpEntry>> = self.0.iter().filter(|e| !matches!(e.lookup(req, now), Some(Lookup::Fresh { .. } | Lookup::Stale { .. }))).cloned().collect();
        list.insert(0, Arc::new(entry));
        list.truncate(MAX_VARIANTS);
        Variants(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(headers: &[(&str, &str)]) -> http::request::Parts {
        let h: Vec<(String, String)> = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        request_parts(&Method::GET, "/a?b=1", &h)
    }

    fn answer(headers: &[(&str, &str)]) -> Vec<(String, String)> {
        headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn max_age_is_fresh_then_stale_with_its_validator() {
        let now = SystemTime::now();
        let e = storable(&get(&[]), 200, &answer(&[("cache-control", "max-age=10"), ("etag", "\"v1\"")]), Bytes::from_static(b"x"), now).unwrap();
        let v = Variants(vec![Arc::new(e)]);
        assert!(matches!(v.lookup(&get(&[]), now + Duration::from_secs(5)), Lookup::Fresh { .. }));
        match v.lookup(&get(&[]), now + Duration::from_secs(11)) {
            Lookup::Stale { validators, serve_while_revalidating, .. } => {
                assert_eq!(validators, vec![("if-none-match".to_string(), "\"v1\"".to_string())]);
                assert!(!serve_while_revalidating);
            }
            _ => panic!("stale"),
        }
    }

    #[test]
    fn no_store_private_and_non_get_answers() {
        let now = SystemTime::now();
        assert!(storable(&get(&[]), 200, &answer(&[("cache-control", "no-store, max-age=10")]), Bytes::new(), now).is_none());
        assert!(storable(&get(&[]), 200, &answer(&[("cache-control", "private, max-age=10")]), Bytes::new(), now).is_some(), "a private cache keeps private answers");
        let post = request_parts(&Method::POST, "/a", &[]);
        assert!(storable(&post, 200, &answer(&[("cache-control", "max-age=10")]), Bytes::new(), now).is_none());
        assert!(storable(&get(&[]), 200, &answer(&[]), Bytes::new(), now).is_none(), "no freshness and no validator");
    }

    #[test]
    fn vary_selects_the_variant_and_a_304_refreshes_only_a_matching_validator() {
        let now = SystemTime::now();
        let en = get(&[("accept-language", "en")]);
        let de = get(&[("accept-language", "de")]);
        let h = answer(&[("cache-control", "max-age=10"), ("vary", "Accept-Language"), ("etag", "\"e\"")]);
        let v = Variants::default().with(&en, storable(&en, 200, &h, Bytes::from_static(b"en"), now).unwrap(), now);
        assert!(matches!(v.lookup(&de, now), Lookup::Miss));
        let v = v.with(&de, storable(&de, 200, &h, Bytes::from_static(b"de"), now).unwrap(), now);
        match v.lookup(&en, now) {
            Lookup::Fresh { entry, .. } => assert_eq!(&entry.body[..], b"en"),
            _ => panic!("fresh en"),
        }
        let later = now + Duration::from_secs(20);
        let Lookup::Stale { entry, .. } = v.lookup(&de, later) else { panic!("stale") };
        assert!(entry.refreshed(&de, 304, &answer(&[("etag", "\"other\"")]), later).is_none());
        let (fresh, _) = entry.refreshed(&de, 304, &answer(&[("etag", "\"e\""), ("cache-control", "max-age=10")]), later).unwrap();
        assert_eq!(&fresh.body[..], b"de");
    }

    #[test]
    fn a_stored_policy_never_holds_the_callers_credentials() {
        let now = SystemTime::now();
        let req = request_parts(&Method::GET, "/a", &[("authorization".into(), "Bearer s3cret".into()), ("accept".into(), "text/plain".into())]);
        let e = storable(&req, 200, &answer(&[("cache-control", "max-age=10")]), Bytes::new(), now).unwrap();
        let wire = String::from_utf8(Variants(vec![Arc::new(e)]).to_wire().unwrap()).unwrap();
        assert!(!wire.contains("s3cret") && wire.contains("text/plain"), "{wire}");
    }

    #[test]
    fn variants_round_trip_through_the_fleets_wire_form() {
        let now = SystemTime::now();
        let h = answer(&[("cache-control", "max-age=10, stale-if-error=30"), ("etag", "\"e\"")]);
        let v = Variants::default().with(&get(&[]), storable(&get(&[]), 200, &h, Bytes::from_static(b"\x00body"), now).unwrap(), now);
        let back = Variants::from_wire(&v.to_wire().unwrap()).unwrap();
        match back.lookup(&get(&[]), now + Duration::from_secs(5)) {
            Lookup::Fresh { entry, .. } => assert_eq!((&entry.body[..], entry.status), (&b"\x00body"[..], 200)),
            _ => panic!("fresh after the round trip"),
        }
        assert!(back.0[0].serves_on_error(now + Duration::from_secs(20)));
        assert!(Variants::from_wire(b"[]").is_none() && Variants::from_wire(b"{").is_none());
    }

    #[test]
    fn stale_windows_and_must_revalidate() {
        let now = SystemTime::now();
        let e = storable(&get(&[]), 200, &answer(&[("cache-control", "max-age=1, stale-if-error=30, stale-while-revalidate=5")]), Bytes::new(), now).unwrap();
        assert!(e.serves_on_error(now + Duration::from_secs(20)));
        assert!(!e.serves_on_error(now + Duration::from_secs(40)));
        let v = Variants(vec![Arc::new(e)]);
        assert!(matches!(v.lookup(&get(&[]), now + Duration::from_secs(3)), Lookup::Stale { serve_while_revalidating: true, .. }));
        assert!(matches!(v.lookup(&get(&[]), now + Duration::from_secs(9)), Lookup::Stale { serve_while_revalidating: false, .. }));
        let strict = storable(&get(&[]), 200, &answer(&[("cache-control", "max-age=1, must-revalidate, stale-if-error=30")]), Bytes::new(), now).unwrap();
        assert!(!strict.serves_on_error(now + Duration::from_secs(5)));
    }
}
