//! The narrow waist between the core and the bindings: every asynchronous capability is
//! one `Operation`, every result one `Outcome`, and `Operation::start` gives one value a
//! binding awaits on any executor, spawns on the core's runtime, or drives to completion
//! on a blocking host thread.
//!
//! A binding has one completion path, generic over `Outcome`: a new capability is a new
//! variant here and one conversion in each binding, never a new entry point per driver.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::adapters::{ChatChunk, ChatRequest, ChatResponse, EmbedRequest, EmbedResponse};
use crate::client::Client;
use crate::error::HarnessError;
use crate::idempotency::{Claim, Idempotency, Lease};
use crate::pipeline::chat::ChatStreamHandle;
use crate::pipeline::stream::StreamHandle;
use crate::request::Request;
use crate::response::Response;
use crate::runtime::{BlockingCall, Task};

/// One asynchronous thing a host asks for.
pub enum Operation {
    /// A request, its whole body read.
    Request(Client, Request),
    /// A request up to its response head; the body is pulled with `Read`.
    Stream(Client, Request),
    /// A chat answer on a route.
    Chat(Client, String, ChatRequest),
    /// A chat stream, up to its first provider's answer; chunks are pulled with `ChatRead`.
    ChatStream(Client, String, ChatRequest),
    /// An embeddings call on a route.
    Embed(Client, String, EmbedRequest),
    /// The next chunk of an open stream.
    Read(StreamHandle),
    /// The next chunk of a chat stream.
    ChatRead(ChatStreamHandle),
    /// The idempotent receiver claims a key.
    Claim(Arc<Idempotency>, String),
    /// The receiver stores a handler's result (JSON text) for a lease.
    Complete(Arc<Idempotency>, Lease, Bytes),
    /// The receiver marks a lease failed.
    Fail(Arc<Idempotency>, Lease),
}

/// What an operation gives back.
pub enum Outcome {
    Response(Response),
    Stream(StreamHandle),
    /// A body chunk; `None` at the end.
    Chunk(Option<Bytes>),
    Chat(ChatResponse),
    ChatStream(ChatStreamHandle),
    /// A chat chunk; `None` after `done`.
    ChatChunk(Option<ChatChunk>),
    Embed(EmbedResponse),
    Claimed(Claim),
    /// A receiver's `complete` or `fail` was recorded.
    Settled,
}

type Boxed = Pin<Box<dyn Future<Output = Result<Outcome, HarnessError>> + Send + 'static>>;

/// A started operation: await it, `spawn` it on the core's runtime, or drive it on a
/// blocking thread (`blocking`). Dropping it (or its task or blocking call) cancels the
/// operation and frees every permit it held.
#[must_use = "an operation does nothing until it is awaited, spawned or driven"]
pub struct Started(Boxed);

impl Operation {
    /// Starts the operation (boxed once, so spawning and polling never copy the large
    /// pipeline future). A closed or forked client fails it at once.
    pub fn start(self) -> Started {
        Started(Box::pin(async move {
            match self {
                Operation::Request(client, req) => client.request(req).await.map(Outcome::Response),
                Operation::Stream(client, req) => client.stream(req).await.map(|s| Outcome::Stream(StreamHandle::new(s))),
                Operation::Chat(client, route, chat) => client.chat(&route, chat).await.map(Outcome::Chat),
                Operation::ChatStream(client, route, chat) => client.chat_stream(&route, chat).await.map(|s| Outcome::ChatStream(ChatStreamHandle::new(s))),
                Operation::Embed(client, route, req) => client.embed(&route, req).await.map(Outcome::Embed),
                Operation::Read(stream) => stream.next().await.map(Outcome::Chunk),
                Operation::ChatRead(stream) => stream.next().await.map(Outcome::ChatChunk),
                Operation::Claim(receiver, key) => receiver.claim(&key).await.map(Outcome::Claimed),
                Operation::Complete(receiver, lease, result) => receiver.complete(&lease, &result).await.map(|()| Outcome::Settled),
                Operation::Fail(receiver, lease) => receiver.fail(&lease).await.map(|()| Outcome::Settled),
            }
        }))
    }
}

impl Started {
    /// Runs on the core's runtime; await the task from any executor, drop it to cancel.
    pub fn spawn(self) -> Result<Task<Result<Outcome, HarnessError>>, HarnessError> {
        crate::runtime::spawn(self.0)
    }

    /// Driven on the calling (non-runtime) thread by `wait_timeout`, with sockets and
    /// timers served by the runtime's workers: no thread hand-off per call.
    pub fn blocking(self) -> Result<BlockingCall<Result<Outcome, HarnessError>>, HarnessError> {
        BlockingCall::new(self.0)
    }
}

impl Future for Started {
    type Output = Result<Outcome, HarnessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}
