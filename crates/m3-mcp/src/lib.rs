//! The MCP client of m3-rs: stdio servers and Streamable HTTP endpoints, both protocol eras,
//! input rounds, traces.
//!
//! `m3-mcp` speaks MCP to one server on behalf of an agent and depends on `m3-types` only:
//! it knows nothing about stores, leases or the worker. `m3-runtime` builds the
//! managed-input coordinator and the harnesses on it (and its MCP relay on the line reader
//! and the HTTP plumbing here); applications use `m3-kit`.
//!
//! # Stability
//!
//! Plumbing for `m3-runtime`, `m3-kit` and the `m3` binary. Like `sqlx-core`, it is exempt
//! from semver: anything in it may change in any release. The modules [`ndjson`],
//! [`process`], [`wire`] and [`http`] are public only so that `m3-runtime`'s relay and Codex
//! harness can share them. Public types are `#[non_exhaustive]` unless an
//! `#[expect(clippy::exhaustive_*)]` says why not.
//!
//! # Quick start
//!
//! ```no_run
//! use m3_mcp::{ConnectOptions, McpConnection, OperationProgress, OperationRequest};
//! use m3_types::{ElicitationResponse, ResponseMap, StdioServer};
//! # async fn demo(server: StdioServer) -> m3_types::Result<()> {
//! let connection = McpConnection::connect(&server, ConnectOptions::new()).await?;
//! let mut progress = connection
//!     .start(OperationRequest::tool("book_shipment", serde_json::Map::new()))
//!     .await?;
//! loop {
//!     match progress {
//!         OperationProgress::Complete(done) => {
//!             println!("{}", done.text());
//!             break;
//!         }
//!         OperationProgress::InputRequired(round) => {
//!             // Show round.requests() to someone, collect one answer per key.
//!             let answers: ResponseMap = round
//!                 .requests()
//!                 .keys()
//!                 .map(|key| (key.clone(), ElicitationResponse::decline()))
//!                 .collect();
//!             progress = round.respond(answers).await?;
//!         }
//!     }
//! }
//! connection.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Concepts
//!
//! - [`McpConnection`]: one server process and its MCP session. `connect` spawns
//!   the [`StdioServer`](m3_types::StdioServer) binding with exactly its command,
//!   args, env and cwd (no ambient environment unless
//!   [`ConnectOptions::with_inherited_env`]), in its own process group, drains its
//!   stderr into a bounded tail, and negotiates the [`ProtocolEra`]. `close` (or
//!   drop) kills the process group and reaps the server.
//! - [`OperationRequest`] / [`OperationProgress`] / [`InputRound`]: an operation
//!   that may need input, identical in both eras. A round carries keyed
//!   [`ElicitationRequest`](m3_types::ElicitationRequest)s, the opaque
//!   `requestState` (2026-07-28), the logical operation id, the attempt number and
//!   the round index; [`InputRound::respond`] takes a
//!   [`ResponseMap`](m3_types::ResponseMap) and continues. A `tools/call` a 2026-07-28
//!   server answers with a task (the tasks extension, `io.modelcontextprotocol/tasks`,
//!   which every request declares) is polled with `tasks/get`; a task asking for input is
//!   a round like any other, answered with `tasks/update`, and an abandoned task is
//!   cancelled with `tasks/cancel`.
//! - [`LogicalOperation`] / [`OperationAttempt`]: serializable records of every
//!   wire attempt, from [`McpConnection::operation_record`] or
//!   [`CompletedOperation::record`].
//!
//! # Guarantees
//!
//! - A tool outside the [`ToolSelection`](m3_types::ToolSelection) is refused
//!   locally (`invalid_argument`), never sent.
//! - Rounds per operation are bounded (default [`DEFAULT_ROUND_LIMIT`]);
//!   state-only retries are bounded by the same number.
//! - A bad peer never hangs or crashes the client: a crash, a non-JSON line or an
//!   oversized frame ends every in-flight attempt with `transport_error` or
//!   `protocol_error` at once; silence ends it with `timeout` after the request
//!   timeout. See `docs/protocol.md`.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod compat;
mod completed;
mod connection;
mod driver;
mod fault;
mod frames;
mod handler;
pub mod http;
pub mod ndjson;
mod negotiation;
pub mod oauth;
mod operation;
mod options;
pub mod process;
mod raw;
mod record;
mod request;
mod shared;
mod tasks;
mod trace_context;
mod transport;
pub mod wire;

pub use completed::CompletedOperation;
pub use connection::{McpConnection, ToolDescriptor};
pub use negotiation::ServerIdentity;
pub use operation::{InputRound, OperationProgress};
pub use options::{ConnectOptions, DEFAULT_MAX_FRAME_BYTES, DEFAULT_ROUND_LIMIT, ProtocolEra};
pub use record::{AttemptOutcome, LogicalOperation, OperationAttempt, RoundExchange};
pub use request::{LEGACY_REQUEST_KEY, OperationRequest, ResumeRequest};
pub use trace_context::TraceContext;

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}

    /// The coordinator moves connections, rounds and their futures across tasks.
    #[test]
    fn handles_and_futures_are_send() {
        send_sync::<McpConnection>();
        send_sync::<InputRound>();
        send_sync::<OperationProgress>();
        send_sync::<LogicalOperation>();
        send_sync::<ConnectOptions>();
        fn futures(connection: &McpConnection, round: InputRound) {
            send(&connection.start(OperationRequest::resource("x://y")));
            send(&connection.resume(ResumeRequest::new(
                OperationRequest::resource("x://y"),
                m3_types::ResponseMap::new(),
            )));
            send(&connection.list_tools());
            send(&round.withdrawn());
            send(&round.respond(m3_types::ResponseMap::new()));
        }
        let _ = futures;
    }
}
