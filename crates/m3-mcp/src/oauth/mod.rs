//! OAuth for Streamable HTTP servers (the MCP authorization specification), on rmcp's
//! `auth` module.
//!
//! A server that answers `401` with a `WWW-Authenticate` challenge starts authorization:
//! protected-resource metadata (RFC 9728), authorization-server metadata (RFC 8414 / OIDC
//! discovery), dynamic client registration (RFC 7591) unless the binding names a client
//! id, then the binding's grant: client credentials for a worker, or the authorization
//! code with PKCE for a person, whose authorization URL goes to the
//! [`AuthorizationPrompt`] while a loopback listener waits for the redirect. The
//! connection is then made again with the token; it is refreshed before it expires and
//! once after a `401`.
//!
//! Tokens go through an [`OAuthTokenStore`] (in memory unless the caller gives one; the
//! runtime's is the encrypted store table). They never appear in errors, logs or
//! results: errors name the server, the endpoint and the step, never a token or secret.

mod authorizer;
mod callback;
mod client;
mod context;
mod credentials;

pub(crate) use authorizer::{
    Authorizer, CHALLENGE_DETAIL, SharedAuthorizer, SharedManager, challenge_of,
};
pub use context::{
    AuthorizationNotice, AuthorizationPrompt, MemoryTokenStore, OAuthContext, OAuthKey,
    OAuthTokenStore,
};
