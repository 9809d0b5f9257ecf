//! Diagnostic projection: secrets become `"[REDACTED]"`.
//!
//! Values under sensitive key names ([`is_sensitive_key`], lists in [`names`]) are replaced
//! whole; inside strings that are URLs, the userinfo and the values of sensitive query
//! parameters are replaced; configured secret values ([`redact_with`]) are replaced wherever
//! they occur in a string. A round's responses also lose the values their request's schema
//! marks secret (`"format": "password"`, `"writeOnly": true`: [`redact_responses`]).
//! Everything else, including the shape (`action`, `content`, `meta`, `null`s), is kept.

pub mod names;
pub mod schema;
mod value;

pub use names::is_sensitive_key;
pub use schema::{
    is_secret_schema, marked_secret_values, redact_content, redact_marked, redact_marked_responses,
    redact_responses,
};
pub use value::{
    MIN_ECHOED_SECRET_CHARS, REDACTED, redact, redact_echoes, redact_with, secret_values,
};
