//! Response validation: the endpoints' JSON Schemas and their check (`schema`), and a
//! service's OpenAPI document at run time (`openapi`).

pub mod openapi;
pub mod schema;

pub use openapi::OpenApiConfig;
pub use schema::*;
