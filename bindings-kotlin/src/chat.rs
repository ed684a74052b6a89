//! Chat for UniFFI: a chat call crosses as the core's `ChatRequest` JSON
//! (`request_path::chat_frame`, `ChatRequest::from_host`). Chat answers, chunks, what routing
//! did for a request and `routing_state` cross as the core's JSON views (`request_path`,
//! `NativeClient::view`), decoded into the generated `Types.kt`.
//! Translation only: choosing, failing over and pricing are the core's.

/// An opened chat stream: the handle its chunks are read with (`request_path`), then its route and trace.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeChatStreamHead {
    /// First, so the facade can close a stream whose caller has gone without decoding the rest.
    pub stream: u64,
    pub route: String,
    pub trace_id: String,
}
