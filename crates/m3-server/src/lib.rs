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
//!   interval, base path, shutdown token); [`check_bind`] is the "no token,
//!   no public address" rule of `m3 serve`.
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
mod config;
mod error;
mod events;
mod page;

use std::future::Future;
use std::net::SocketAddr;

pub use config::{DEFAULT_BODY_LIMIT, DEFAULT_POLL_INTERVAL, ServerBuilder};
use m3_types::{Error, Result};

/// Refuses to serve on a non-loopback address without a token (the rule of
/// `m3 serve`): anyone who can reach the port could otherwise read and answer
/// every round.
///
/// # Errors
/// `invalid_argument` naming the address.
pub fn check_bind(addr: SocketAddr, token: Option<&str>) -> Result<()> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        return Ok(());
    }
    Err(Error::model_validation(format!(
        "refusing to bind {addr} without a token: pass --token (or M3_SERVE_TOKEN) to serve beyond loopback"
    ))
    .with_detail("bind", addr.to_string()))
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting and lets in-flight requests finish (event streams end when the
/// builder's shutdown token is cancelled).
///
/// # Errors
/// An I/O failure of the listener, as [`Error::protocol`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::protocol("the HTTP server stopped with an I/O error").with_source(e))
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
