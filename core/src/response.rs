//! What a request gives back: a buffered `Response` (a `StreamResponse`, whose body the
//! caller pulls, is the pipeline's: `pipeline/stream.rs`).

use bytes::Bytes;
use http::HeaderMap;


#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names in lower case, in the order received; repeated names repeat.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub elapsed_ms: f64,
    pub attempts: u32,
    pub trace_id: String,
    /// Set when the request named a route: who answered, and how.
    pub routed: Option<Box<Routed>>,
    /// Set when a cache had a part in the answer (served it, revalidated it, shared it).
    pub cache: Option<Box<crate::cache::stamp::CacheStamp>>,
}

/// What routing did for one request.
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
pub struct Routed {
    pub route: String,
    /// The provider that answered (`None` for a static fallback).
    pub provider: Option<String>,
    /// The model that answered (the provider's report, else its configured model).
    pub model: Option<String>,
    /// Attempts each provider got, in the order they were first tried.
    pub attempts_by_provider: Vec<(String, u32)>,
    /// `cache` (a stale answer for the same request) or `static`, when no provider answered.
    #[schemars(extend("enum" = ["cache", "static", null]))]
    pub fallback: Option<&'static str>,
    pub usage: Option<crate::adapters::Usage>,
    /// From the answering provider's prices and the usage it reported.
    pub cost: Option<f64>,
}

impl Response {
    pub fn provider(&self) -> Option<&str> {
        self.routed.as_ref().and_then(|r| r.provider.as_deref())
    }

    pub fn model(&self) -> Option<&str> {
        self.routed.as_ref().and_then(|r| r.model.as_deref())
    }

    /// A cached answer served because no provider could answer now.
    pub fn is_stale(&self) -> bool {
        self.routed.as_ref().is_some_and(|r| r.fallback == Some("cache"))
    }

    /// Served from a store, not fetched for this call.
    pub fn from_cache(&self) -> bool {
        self.cache.as_ref().is_some_and(|c| c.from_cache())
    }

    /// A stored answer the origin confirmed with a 304.
    pub fn revalidated(&self) -> bool {
        self.cache.as_ref().is_some_and(|c| c.outcome == "revalidated")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Response headers as (lower-case name, value) pairs, every value in order.
pub(crate) fn headers_to_pairs(headers: HeaderMap) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(headers.len());
    let mut last: Option<String> = None;
    for (name, value) in headers {
        // `HeaderMap::into_iter` names only the first of a run of values.
        if let Some(n) = name {
            last = Some(n.as_str().to_string());
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        out.push((last.clone().unwrap_or_default(), value));
    }
    out
}
