//! An OpenAPI document (3.0 or 3.1, YAML or JSON) as Harness reads it: the document and the
//! files its `$ref`s name (`loader`), its schemas as named types (`schema`) and its
//! operations as a language-neutral model (`operations`, `model`). The client generator
//! (`harness-codegen`) writes clients from the model; the core reads the same model at run
//! time (`services.<name>.openapi`) for per-operation endpoints, response schemas and retries.
//!
//! Guarantees: the model depends on the documents alone (their order, no timestamps, no
//! paths beyond the spec's file name); every operation is either read or refused with the
//! JSON pointer of what is not supported and why; a document that cannot be read at all is
//! an error naming where.
//!
//! The document is read as JSON values with a typed layer of its own, not through `oas3` or
//! `openapiv3`: each reads one version only (`oas3` 0.21 refuses 3.0.x and fails on 3.0's
//! boolean `exclusiveMinimum`; `openapiv3` 2.2 fails on 3.1's type arrays, tried here), and
//! neither follows file-relative references or keeps the pointers our errors name.

pub mod contract;
pub mod loader;
pub mod model;
pub mod names;
pub mod operations;
pub mod schema;

use std::path::Path;

pub use model::Api;

/// Reads the spec at `path` (and every file it refers to).
pub fn load(path: &Path) -> Result<Api, String> {
    let docs = loader::Docs::load(path)?;
    operations::read(&docs)
}
