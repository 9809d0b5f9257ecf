//! The HTTP face of an m3 execution store: a JSON API that programs use to
//! list and answer managed-input rounds, a live event stream, and an answer
//! page where a person answers rounds in a browser.
//!
//! Everything here is a call of the public `m3-kit` API on the kit's store:
//! answering is exactly [`AsyncExecutionHandle::respond_elicitation`]
//! (validation, idempotency, errors), and every response shown anywhere is the
//! redacted projection. The server runs no executions; a committed response
//! wakes the worker wherever it runs.
//!
//! # Embedding
//!
//! [`ServerBuilder::build`] returns an axum [`Router`](axum::Router) that a
//! service mounts like any other (see `docs/serve.md`):
//!
//! ```no_run
//! # async fn demo() -> m3_types::Result<()> {
//! let kit = m3_kit::AsyncMcpTestKit::builder().database("executions.sqlite").build().await?;
//! let router = m3_server::ServerBuilder::new(kit).token("s3cret").build();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7878").await
//!     .map_err(|e| m3_types::Error::storage("cannot bind").with_source(e))?;
//! m3_server::serve(listener, router, std::future::pending()).await
//! # }
//! ```
//!
//! # Concepts
//!
//! - [`ServerBuilder`]: the kit plus options (token, body limit, poll
//!   interval, base path, shutdown token, [`AllowedHost`]s); [`check_bind`]
//!   and [`check_token`] are the rules of `m3 serve` (no token, no public
//!   address; no weak token).
//! - [`serve()`] / [`serve_with()`]: the connection loop with [`ServeOptions`]
//!   (header and body timeouts, a connection limit under the file limit, a
//!   bounded graceful shutdown).
//! - Without a token only loopback `Host` names are answered (DNS
//!   rebinding), and a state-changing request's `Origin` must be the
//!   server's own, scheme included.
//! - The JSON API under `/api/v1`, `/healthz`, and Server-Sent Events at
//!   `/api/v1/events` (ids resume with `Last-Event-ID`).
//! - The page: `/` (the inbox), `/executions/{id}`, plain form posts that
//!   work without JavaScript; `/assets/*` serves the only script and style.
//!
//! # Feature flags
//!
//! None.
//!
//! [`AsyncExecutionHandle::respond_elicitation`]: m3_kit::AsyncExecutionHandle::respond_elicitation
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

mod api;
mod auth;
mod error;
mod events;
mod extract;
mod host;
mod metrics;
mod page;
mod principal;
mod proxy;
mod router;
mod serve;
mod state;
mod throttle;
mod webhooks;

use std::net::SocketAddr;

pub use host::AllowedHost;
use m3_types::{Error, Result};
pub use metrics::serve_metrics;
pub use proxy::TrustedProxy;
pub use router::{DEFAULT_BODY_LIMIT, DEFAULT_POLL_INTERVAL, ServerBuilder};
pub use serve::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_SHUTDOWN_GRACE, ServeOptions, serve, serve_with,
};

/// The fewest characters a token may have (`m3 serve --token`): about 95 bits
/// from a random alphanumeric string, far beyond online guessing.
pub const MIN_TOKEN_LENGTH: usize = 16;

/// Refuses to serve on a non-loopback address without a token, and refuses
/// a weak token anywhere (the rules of `m3 serve`): anyone who can reach the
/// port could otherwise read and answer every round.
///
/// # Errors
/// `invalid_argument` naming the address, or the token rule (see
/// [`check_token`]).
pub fn check_bind(addr: SocketAddr, token: Option<&str>) -> Result<()> {
    if let Some(token) = token {
        check_token(token)?;
        return Ok(());
    }
    if addr.ip().is_loopback() {
        return Ok(());
    }
    Err(Error::model_validation(format!(
        "refusing to bind {addr} without a token: pass --token (or M3_SERVE_TOKEN) to serve beyond loopback"
    ))
    .with_detail("bind", addr.to_string()))
}

/// Checks that `token` is strong enough to guard the server: at least
/// [`MIN_TOKEN_LENGTH`] characters, each a visible ASCII character other than
/// `"`, `,`, `;` and `\` (the token travels in a header and in a cookie,
/// where anything else would not arrive intact).
///
/// ```
/// assert!(m3_server::check_token("Yk3vQ9-rT2mWx8Lp").is_ok());
/// let weak = m3_server::check_token(" ").unwrap_err();
/// assert_eq!(weak.code(), "invalid_argument");
/// ```
///
/// # Errors
/// `invalid_argument` with `details.rule` `token_too_short` or
/// `token_characters`; the token itself is never part of the error.
pub fn check_token(token: &str) -> Result<()> {
    let length = token.chars().count();
    if length < MIN_TOKEN_LENGTH {
        return Err(Error::model_validation(format!(
            "the token has {length} characters; a token needs at least {MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 16`)"
        ))
        .with_detail("rule", "token_too_short")
        .with_detail("minimum_length", MIN_TOKEN_LENGTH));
    }
    let allowed = |c: char| c.is_ascii_graphic() && !matches!(c, '"' | ',' | ';' | '\\');
    if !token.chars().all(allowed) {
        return Err(Error::model_validation(
            "the token may hold only visible ASCII characters other than '\"', ',', ';' and '\\' (no spaces)",
        )
        .with_detail("rule", "token_characters"));
    }
    Ok(())
}

/// `docs/serve.md`, compiled as doctests so its embedding example stays correct
/// (its shell examples run in `m3-cli`'s `cli_serve` test).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/serve.md")]
pub struct ServeGuide;

/// This crate's README, compiled as a doctest so its example keeps building.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
