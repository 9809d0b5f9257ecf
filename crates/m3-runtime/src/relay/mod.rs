//! The MCP relay: how M3 sees the MCP wire of a harness that is itself the MCP client.
//!
//! Plumbing for `m3-kit` and the `m3` binary, exempt from semver (see the crate's
//! [stability note](crate#stability)): applications use `m3-kit`.
//!
//! A harness such as Codex launches its stdio MCP servers itself. To see (and police)
//! that traffic, M3 rewrites the server command to
//! `m3 mcp-relay --handoff FILE -- <server command> <args...>`. The relay
//! ([`run_relay`]) starts the real server with exactly the environment written in the
//! handoff file, forwards newline-delimited JSON in both directions unchanged, and
//! reports every frame to a [`RelayObserver`] listening on a Unix socket in the
//! session's private directory.
//!
//! - [`RelayObserver`]: one per harness session; binds `dir/relay.sock`, writes one
//!   handoff file per server binding ([`RelayObserver::handoff`]) and yields
//!   [`RelayEvent`]s from every relay that authenticated with its token.
//! - [`run_relay`]: the relay process body behind `m3 mcp-relay`.
//! - [`RelayObserver::http_relay`]: for a Streamable HTTP binding, an in-process
//!   loopback HTTP relay ([`HttpRelay`]) the harness is pointed at instead of the real
//!   URL; it forwards requests and responses (event streams included) unchanged and
//!   reports every JSON-RPC message to the same observer.
//! - Observation never changes the traffic: when the socket is missing, slow or gone,
//!   frames still flow and the observer sees [`RelayEvent::Incomplete`] (or nothing).
//! - `allowed_tools` in the handoff is enforced by the relay: a client-to-server
//!   `tools/call` naming another tool is not forwarded; the client gets JSON-RPC error
//!   [`POLICY_DENIED_CODE`] and the observer a [`RelayEvent::PolicyDenied`].

mod event;
mod handoff;
mod http;
mod local;
mod observer;
mod policy;
mod report;
mod run;
mod wire;

pub use event::{Direction, MAX_FRAME_BYTES, Observation, RelayEvent};
pub use http::HttpRelay;
pub use observer::RelayObserver;
pub use policy::{POLICY_DENIED_CODE, POLICY_DENIED_MESSAGE};
pub use run::run_relay;
