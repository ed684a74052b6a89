//! Adapters: how a route's requests and answers are shaped per provider.
//! `http` passes them through; `openai` normalises the chat-completions shape and
//! reads usage (`usage`), which the route prices (`routing/price.rs`).

pub mod openai;
pub mod usage;

pub use openai::{ChatChunk, ChatChunkKind, ChatRequest, ChatResponse, ToolCall, ToolCallDelta};
pub use usage::Usage;
