//! What a cache did for one answer, as the answer, the record and the metrics say it.

/// How an answer came to be, when a cache had a part in it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CacheStamp {
    /// `hit` (a fresh stored answer), `revalidated` (stored, confirmed by a 304), `stale`
    /// (stored, served past its freshness within `stale-while-revalidate` or
    /// `stale-if-error`), `exact` or `semantic` (a chat answer), `coalesced` (another
    /// caller's identical call, shared), `miss` (fetched, and stored when allowed), `bypass`
    /// (not cached: the request carries credentials and the service is not `per_credential`).
    #[schemars(extend("enum" = ["hit", "revalidated", "stale", "exact", "semantic", "coalesced", "miss", "bypass"]))]
    pub outcome: &'static str,
    /// `semantic`: the cosine similarity of the stored prompt.
    pub similarity: Option<f32>,
    /// A cached chat answer: what the provider call it replaced would have cost.
    pub saved_cost: Option<f64>,
}

impl CacheStamp {
    pub fn of(outcome: &'static str) -> CacheStamp {
        CacheStamp { outcome, ..Default::default() }
    }

    /// The answer was served from a store (not fetched for this caller).
    pub fn from_cache(&self) -> bool {
        matches!(self.outcome, "hit" | "revalidated" | "stale" | "exact" | "semantic")
    }
}
