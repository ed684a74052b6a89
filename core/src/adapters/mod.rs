//! Adapters: how a route's requests and answers are shaped per provider. A route speaks
//! one shape to its callers (OpenAI's chat completions); each provider is reached in its
//! own wire format (`providers[].adapter`), one file per format:
//! `openai-compatible` (`openai`), `anthropic`, `gemini` and `azure-openai` (`azure`), or
//! an adapter a host registered by name (`host`). `usage` reads token counts, which the
//! route prices (`routing/price.rs`).
//!
//! Guarantees: every adapter maps its errors onto the common codes (`CODES`), so
//! `on_error`, failover, breakers and health work across vendors; an answer or event that
//! does not parse is an error naming what is missing, never an empty success; a native
//! answer is handed on in the OpenAI shape (`openai::completion_bytes`), so callers, the
//! fallback cache and the gateway see one shape whoever answered.

pub mod anthropic;
pub mod azure;
pub mod embeddings;
pub mod gemini;
pub mod host;
pub mod openai;
pub(crate) mod structured;
pub mod usage;
pub mod wire;


pub use embeddings::{EmbedRequest, EmbedResponse, Embedded};
pub use host::{HostAdapter, HostAdapters};
pub use openai::{ChatChunk, ChatChunkKind, ChatRequest, ChatResponse, ToolCall, ToolCallDelta};
pub use usage::Usage;
pub use wire::{AnswerFault, ChatAdapter, EventFault, EventRead, EventReader, Parsed, RouteDefaults, Shaped, BUILT_IN, CODES};

use crate::routing::config::ProviderConfig;

/// A provider's adapter, resolved when the config is loaded (a host adapter registered
/// later is picked up by the rebuild `register_adapter` does).
#[derive(Clone)]
pub(crate) enum Adapter {
    /// A plain `http` route: bodies pass through.
    Pass,
    Native(&'static dyn ChatAdapter),
    Host(std::sync::Arc<host::HostChat>),
    /// A host adapter name nobody has registered (yet): the provider is refused.
    Missing(std::sync::Arc<str>),
}

impl Adapter {
    /// The adapter `p` names on a route of `kind`.
    pub(crate) fn resolve(route: crate::routing::config::AdapterKind, p: &ProviderConfig, hosts: &HostAdapters) -> Adapter {
        if route != crate::routing::config::AdapterKind::OpenaiCompatible {
            return Adapter::Pass;
        }
        let name = p.adapter.as_deref().unwrap_or("openai-compatible");
        if let Some(a) = built_in(name) {
            return Adapter::Native(a);
        }
        match hosts.get(name) {
            Some(h) => Adapter::Host(std::sync::Arc::new(host::HostChat::new(name, h))),
            None => Adapter::Missing(name.into()),
        }
    }

    /// Most inputs per embeddings request (the format's limit).
    pub(crate) fn max_batch(&self) -> u32 {
        match self {
            Adapter::Native(a) => a.max_batch(),
            _ => 2048,
        }
    }

    /// Whether answers arrive in OpenAI's shape already (nothing to translate back).
    pub(crate) fn speaks_openai(&self) -> bool {
        match self {
            Adapter::Native(a) => a.name() == "openai-compatible" || a.name() == "azure-openai",
            _ => false,
        }
    }
}

/// The built-in adapter of that name.
pub fn built_in(name: &str) -> Option<&'static dyn ChatAdapter> {
    match name {
        "openai-compatible" => Some(&openai::OpenAi),
        "anthropic" => Some(&anthropic::Anthropic),
        "gemini" => Some(&gemini::Gemini),
        "azure-openai" => Some(&azure::Azure),
        _ => None,
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_lists_name_every_built_in_adapter_and_which_embed() {
        for name in BUILT_IN {
            let a = built_in(name).expect("a built-in adapter");
            assert_eq!(a.name(), name);
            assert_eq!(a.embeds(), crate::routing::config::EMBEDDING_ADAPTERS.contains(&name), "{name}");
        }
        assert!(built_in("inhouse").is_none());
    }
}
