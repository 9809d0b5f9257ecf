//! OAuth credentials of the MCP servers executions reach, kept in the store so that every
//! worker on it uses (and refreshes) the same tokens, sealed with a key the application
//! holds: the store never sees a token in the clear, and a copy of the database without
//! the key reveals none.
//!
//! A backend keeps one row per server URL and client ([`OAuthCredentialRows`]); the sealing
//! and every decision are in [`rules`]; [`SealedOAuthCredentials`] is the store over any
//! backend's rows with a [`CredentialKey`], which is how the runtime uses it.

mod rows;
pub mod rules;

pub use rows::{OAuthCredentialRows, SealedOAuthCredentials};
pub use rules::CredentialKey;
