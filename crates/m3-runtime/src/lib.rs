//! The m3-rs runtime: harnesses, the managed-input coordinator and the execution worker.
//!
//! `m3-runtime` drives agent executions against real MCP servers and pauses them on
//! elicitation requests through an `m3-store` backend. It knows nothing about the
//! kit facade or the command line.
//!
//! # Concepts
//!
//! - The MCP client is the `m3-mcp` crate: stdio servers and Streamable HTTP endpoints in
//!   both protocol eras. An operation that may need input returns either its result or an
//!   [`InputRound`](m3_mcp::InputRound) to answer, the same way in both eras; every wire
//!   attempt is recorded in a [`LogicalOperation`](m3_mcp::LogicalOperation).
//! - [`AgentSelection`] / [`Script`]: which harness runs an execution; the
//!   documented `{"harness": ..., ...}` JSON of M3.
//! - [`harness`]: the [`Harness`](harness::Harness) trait and the built-in
//!   [`ScriptedHarness`](harness::ScriptedHarness); an
//!   [`AgentSession`](harness::AgentSession) is the agent's view of its servers.
//! - [`ExecutionSpec`]: what an execution runs, persisted as its spec JSON.
//! - [`Worker`]: runs an execution under a lease with heartbeat, cancel polling
//!   and timeout, and writes its [`ExecutionResult`](m3_types::ExecutionResult)
//!   with an [`ExecutionTrace`].
//! - The managed-input coordinator (private, one per managed execution) persists
//!   rounds and waits for responses; [`ResponseNotifier`] wakes it in-process and a
//!   [`RoundPendingHook`] hears of each pending round. Every lease a worker holds
//!   (execution and round leases) is renewed in batches by one private `lease` module.
//! - [`relay`]: the MCP relay (`m3 mcp-relay`) a harness such as Codex launches in place
//!   of each stdio server, and the [`RelayObserver`](relay::RelayObserver) it reports
//!   every frame to, so the worker sees the MCP wire of a harness-owned connection.
//! - [`recover`]: terminalizes executions whose worker disappeared.
//! - [`metrics`]: the process's Prometheus metrics, recorded by the worker, the lease
//!   keeper and recovery, and by `m3-kit` and `m3-server` above.
//!
//! # Stability
//!
//! [`harness`] and [`relay`] are plumbing for `m3-kit` and the `m3` binary
//! (the relay subcommand, the example server's tests), public so that those crates
//! can reach them. Like `sqlx-core`, they are exempt from semver: anything in them may
//! change in any release. Applications use `m3-kit`. Public types of this crate are
//! `#[non_exhaustive]` unless an `#[expect(clippy::exhaustive_*)]` says why not.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod coordinator;
pub mod harness;
mod lease;
pub mod metrics;
mod oauth_tokens;
mod recovery;
pub mod relay;
mod selection;
mod spec;
mod store_retry;
mod telemetry;
mod trace;
mod transfer;
mod worker;

pub use coordinator::{
    DEFAULT_REMIND_AT, RECOVERY_UNAVAILABLE, ResponseNotifier, RoundPendingHook,
};
/// OAuth for HTTP servers: the token store and authorization prompt a worker is given
/// ([`Worker::with_oauth`]).
pub use m3_mcp::oauth;
pub use oauth_tokens::StoreOAuthTokens;
pub use recovery::{RecoveredExecution, RecoveryReport, recover};
pub use selection::{
    AgentSelection, CodexMcpProtocol, CodexProvider, CodexSelection, Script, ScriptStep,
    ScriptedSelection,
};
pub use spec::{
    DEFAULT_EXECUTION_TIMEOUT, DEFAULT_LEASE, DEFAULT_RENEW_EVERY, DEFAULT_ROUND_LIMIT,
    ElicitationPlan, ExecutionSpec, PermissionPolicy,
};
pub use telemetry::{execution_trace_id, execution_trace_id_hex};
pub use trace::ExecutionTrace;
pub use transfer::{TRANSFERABLE_PARAMETER, survives_worker_restart};
pub use worker::{
    DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT, DEFAULT_IDLE_POLL, DEFAULT_WORKER_HEARTBEAT,
    DRAINED_REASON, DrainReport, EVENT_EXECUTION_CHECKPOINT, FILES_PER_EXECUTION, PoolEvent,
    PoolOptions, QUEUE_AGE_EXCEEDED, SweepOptions, Worker, WorkerPool, raise_open_files_limit,
    spawn_sweep, sweep_once,
};

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
