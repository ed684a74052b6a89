//! Typed service clients from an OpenAPI document: `harness-openapi` reads the document
//! into a language-neutral model, and each host's emitter here writes it as a client
//! (`python`, `typescript`, `kotlin`).
//!
//! Guarantees: the output depends on the documents alone, so it can be checked in and
//! compared; only the types the generated operations use are written.

mod common;
pub mod kotlin;
pub mod python;
pub mod typescript;

pub use harness_openapi::{load, loader, model, operations, schema, Api};
