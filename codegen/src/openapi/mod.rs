//! Typed service clients from an OpenAPI document (3.0 or 3.1, YAML or JSON): the document
//! and the files its `$ref`s name are read (`loader`), its schemas become named types
//! (`schema`) and its operations a language-neutral model (`operations`, `model`), which each
//! host's emitter writes as a client (`python`).
//!
//! Guarantees: the output depends on the documents alone (their order, no timestamps, no
//! paths beyond the spec's file name), so it can be checked in and compared; every operation
//! is either generated or refused with the JSON pointer of what is not supported and why;
//! a document that cannot be read at all is an error naming where. Only the types the
//! generated operations use are written.
//!
//! The document is read as JSON values with a typed layer of its own, not through `oas3` or
//! `openapiv3`: each reads one version only (`oas3` 0.21 refuses 3.0.x and fails on 3.0's
//! boolean `exclusiveMinimum`; `openapiv3` 2.2 fails on 3.1's type arrays, tried here), and
//! neither follows file-relative references or keeps the pointers our errors name.

pub mod loader;
pub mod model;
pub mod operations;
pub mod python;
pub mod schema;

use std::path::Path;

pub use model::Api;

/// Reads the spec at `path` (and every file it refers to).
pub fn load(path: &Path) -> Result<Api, String> {
    let docs = loader::Docs::load(path)?;
    operations::read(&docs)
}
