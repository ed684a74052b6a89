//! What the config says about caching: the client's stores (`cache:`), a service's or an
//! endpoint's HTTP caching and coalescing (`services.<s>.cache`), and a route's answer
//! caches (`routes.<r>.cache`). Everything is off unless the config turns it on.

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

/// `cache:` at the top: how big the stores may grow, and the fleet's shared store.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// All HTTP-cache entries and exact answers together, in bytes (least recently used out first).
    pub max_bytes: u64,
    /// A larger answer is never stored.
    pub max_entry_bytes: u64,
    /// The semantic index: most entries, and most bytes (vectors and answers).
    pub semantic_max_entries: u64,
    pub semantic_max_bytes: u64,
    /// HTTP-cache entries and answers live in Redis too, shared by every instance.
    pub shared: Option<SharedCacheConfig>,
}

/// The semantic index's default size: `harness-semantic-bench` finds every near-duplicate
/// prompt at 100k entries in one scope (the byte cap usually binds first).
const SEMANTIC_MAX_ENTRIES: u64 = 100_000;

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { max_bytes: 64 << 20, max_entry_bytes: 1 << 20, semantic_max_entries: SEMANTIC_MAX_ENTRIES, semantic_max_bytes: 256 << 20, shared: None }
    }
}

/// `cache.shared`: the fleet's store.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SharedCacheConfig {
    pub redis_url: String,
    /// Every key and the pub/sub channel start with this.
    pub key_prefix: String,
}

impl Default for SharedCacheConfig {
    fn default() -> Self {
        SharedCacheConfig { redis_url: String::new(), key_prefix: "harness:cache:".into() }
    }
}

/// `services.<s>.cache` (and `services.<s>.endpoints.<e>.cache`, which replaces it for that endpoint).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpCacheConfig {
    /// RFC 9111, as a private cache, for GET and HEAD answers.
    pub http: bool,
    /// Identical in-flight GET and HEAD requests (same method, path, query, headers and
    /// principal) share one downstream call.
    pub coalesce: bool,
    /// Answers to requests that carry credentials may be stored, each keyed by the
    /// credential's identity (a digest, never the secret); off: such answers are never stored.
    pub per_credential: bool,
}

/// Who may share an answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheScope {
    /// Only requests of the same principal (tenant or user).
    #[default]
    Principal,
    /// Every caller of the route.
    Route,
}

/// `routes.<r>.cache`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RouteCacheConfig {
    /// Identical in-flight chats share one provider call.
    pub coalesce: bool,
    pub exact: Option<ExactCacheConfig>,
    pub semantic: Option<SemanticCacheConfig>,
}

/// `routes.<r>.cache.exact`: the same normalised request gets the stored answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ExactCacheConfig {
    pub ttl_ms: u64,
    /// Part of every key: a new version never gets an answer stored under an old one.
    pub version: String,
    /// Cache requests whatever their sampling; off: only `temperature: 0` or a `seed`.
    pub any_temperature: bool,
    pub scope: CacheScope,
}

impl Default for ExactCacheConfig {
    fn default() -> Self {
        ExactCacheConfig { ttl_ms: 3_600_000, version: String::new(), any_temperature: false, scope: CacheScope::Principal }
    }
}

/// What the semantic cache embeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EmbedText {
    /// The last user message.
    #[default]
    LastMessage,
    /// Every message of the conversation, in order.
    Conversation,
}

/// `routes.<r>.cache.semantic`: a close enough earlier prompt gets its answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SemanticCacheConfig {
    /// The route (`kind: embeddings`) that embeds prompts.
    pub embeddings_route: String,
    /// Least cosine similarity served (0..1].
    pub threshold: f32,
    pub ttl_ms: u64,
    pub scope: CacheScope,
    pub embed: EmbedText,
    pub version: String,
    pub any_temperature: bool,
}

impl Default for SemanticCacheConfig {
    fn default() -> Self {
        SemanticCacheConfig {
            embeddings_route: String::new(),
            threshold: 0.95,
            ttl_ms: 3_600_000,
            scope: CacheScope::Principal,
            embed: EmbedText::LastMessage,
            version: String::new(),
            any_temperature: false,
        }
    }
}

impl CacheConfig {
    pub fn validate(&self) -> Result<(), HarnessError> {
        if self.max_entry_bytes == 0 || self.max_entry_bytes > self.max_bytes.max(1) {
            return Err(HarnessError::config(format!("cache.max_entry_bytes: must be 1..=cache.max_bytes ({}), got {}", self.max_bytes, self.max_entry_bytes)));
        }
        if self.semantic_max_entries == 0 {
            return Err(HarnessError::config("cache.semantic_max_entries: must be at least 1"));
        }
        if let Some(s) = &self.shared {
            match url::Url::parse(&s.redis_url) {
                Ok(u) if matches!(u.scheme(), "redis" | "rediss") => {}
                _ => return Err(HarnessError::config("cache.shared.redis_url: expected a redis:// or rediss:// URL")),
            }
            if s.key_prefix.is_empty() || s.key_prefix.len() > 128 || s.key_prefix.chars().any(char::is_control) {
                return Err(HarnessError::config("cache.shared.key_prefix: must be 1 to 128 printable characters"));
            }
        }
        Ok(())
    }
}

impl RouteCacheConfig {
    /// `path` is `routes.<r>.cache`; `is_route(name, embeddings)` says whether a route of that name (and kind) exists.
    pub fn validate(&self, path: &str, is_chat: bool, is_embeddings_route: &dyn Fn(&str) -> bool) -> Result<(), HarnessError> {
        if (self.exact.is_some() || self.semantic.is_some()) && !is_chat {
            return Err(HarnessError::config(format!("{path}: answer caches are for chat routes (kind: chat, adapter: openai-compatible)")));
        }
        if let Some(e) = &self.exact {
            if e.ttl_ms == 0 {
                return Err(HarnessError::config(format!("{path}.exact.ttl_ms: must be at least 1")));
            }
        }
        if let Some(s) = &self.semantic {
            if !(s.threshold > 0.0 && s.threshold <= 1.0) {
                return Err(HarnessError::config(format!("{path}.semantic.threshold: must be in (0, 1], got {}", s.threshold)));
            }
            if s.ttl_ms == 0 {
                return Err(HarnessError::config(format!("{path}.semantic.ttl_ms: must be at least 1")));
            }
            if !is_embeddings_route(&s.embeddings_route) {
                return Err(HarnessError::config(format!(
                    "{path}.semantic.embeddings_route: `{}` is not a route of kind embeddings",
                    crate::redact::escape_control(&s.embeddings_route)
                )));
            }
        }
        Ok(())
    }
}
