//! Adapters: how a route's requests and answers are shaped per provider.
//! `http` passes them through; `openai` normalises the chat-completions shape,
//! reads usage and prices it.

pub mod openai;

pub use openai::{ChatChunk, ChatChunkKind, ChatRequest, ChatResponse, Usage};
