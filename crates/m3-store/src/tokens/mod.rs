//! Scoped API tokens: who may read, answer and administer through `m3 serve`, kept in the
//! store so that every server on it knows the same principals, and revoked for all of them
//! at once.
//!
//! A token is a random secret shown once when it is made ([`TokenSecret`]); the store keeps
//! only its SHA-256 digest (a token is 256 random bits, so a slow password hash would add
//! nothing), its name (the principal an answer is recorded as), its [`TokenScope`] and its
//! expiry. [`TokenStore::authenticate`] finds a token by the digest of what a request
//! presented.
//!
//! Every decision is in [`rules`]; [`rows`] builds the whole store from a backend's rows,
//! which is how the shipped backends (and a custom one) do it.

mod contract;
mod record;
pub mod rows;
pub mod rules;

pub use contract::TokenStore;
pub use record::{ApiToken, NewToken, TokenCheck, TokenScope, TokenSecret};
pub use rows::{RowTokenStore, TokenRows};
