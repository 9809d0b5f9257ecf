//! The m3-rs facade: submit agent executions against MCP servers and answer
//! their elicitation rounds, async ([`AsyncMcpTestKit`]) or blocking
//! ([`McpTestKit`]).
//!
//! `m3-kit` wires `m3-runtime` (harnesses, coordinator, worker) to an
//! `m3-store` execution store. It knows nothing about the command line.
//!
//! # Quick start (blocking)
//!
//! ```no_run
//! use std::time::Duration;
//! use m3_kit::{AgentSelection, McpTestKit, Script, SubmitOptions};
//! use m3_types::{ElicitationResponse, HumanInput, ResponseMap, StdioServer};
//!
//! # fn main() -> m3_types::Result<()> {
//! let shipping = StdioServer::new("shipping", "m3").with_args(["example-server", "shipping"]);
//! let kit = McpTestKit::builder().database("executions.sqlite").build()?;
//! let mut args = serde_json::Map::new();
//! args.insert("weight_kg".into(), 2.into());
//! let agent = kit.agents([AgentSelection::scripted(Script::call("shipping:book_shipment", args))])?.remove(0);
//! let handle = agent.submit(
//!     "Ask for the delivery address, then book the shipment.",
//!     SubmitOptions::new().server(shipping).tools(["shipping:book_shipment"]).human_input(HumanInput::Managed),
//! )?;
//! if let Some(pending) = handle.wait_for_pending(Duration::from_secs(120))? {
//!     let mut address = serde_json::Map::new();
//!     address.insert("street".into(), "1 Main Street".into());
//!     address.insert("city".into(), "Pune".into());
//!     let responses = ResponseMap::from([("shipping_address".to_owned(), ElicitationResponse::accept(address))]);
//!     handle.respond_elicitation(&pending.round_id, responses, &format!("address-{}", pending.round_id))?;
//! }
//! let result = handle.result(Some(Duration::from_secs(120)))?;
//! println!("{:?}", result.outcome());
//! # Ok(()) }
//! ```
//!
//! # Concepts
//!
//! - [`AsyncMcpTestKit`] / [`McpTestKit`]: a store, an environment for server
//!   processes, background workers. Opening one runs recovery.
//! - [`AsyncAgent`] / [`Agent`]: one [`AgentSelection`]; `submit(prompt,
//!   SubmitOptions)` returns a handle.
//! - [`AsyncExecutionHandle`] / [`ExecutionHandle`]: `pending_elicitation`,
//!   `respond_elicitation`, `snapshot`, `result`, `cancel`, `events`, `rounds`.
//!   [`AsyncMcpTestKit::attach`] gives a handle on an execution run by another
//!   process.
//!
//! # Feature flags
//!
//! None.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod agent;
mod answer;
mod blocking;
mod bulk;
mod command_path;
mod context;
mod handle;
mod history;
mod inbox;
mod kit;
pub mod metrics;
pub mod notify;
mod options;
mod plan_export;
mod policy_admin;
mod shared;
mod store_backends;

pub use agent::AsyncAgent;
pub use answer::RoundAnswer;
pub use blocking::{Agent, Changes, ExecutionHandle, McpTestKit, McpTestKitBuilder};
pub use bulk::{ANSWER_EACH_MAX, BulkOutcome, RoundOutcome, check_answer_count, each_round_key};
pub use context::PendingRound;
pub use handle::{AsyncExecutionHandle, RoundDetails, RoundDiagnostics};
pub use history::{HISTORY_PAGE_MAX, HistoryEntry, HistoryPage, HistoryQuery, HistoryStatus};
pub use inbox::InboxPage;
pub use kit::{AsyncMcpTestKit, AsyncMcpTestKitBuilder, ExecutionSummary};
/// OAuth for HTTP servers ([`AsyncMcpTestKitBuilder::oauth`]).
pub use m3_runtime::oauth;
pub use m3_runtime::{
    AgentSelection, CodexMcpProtocol, CodexProvider, CodexSelection, DEFAULT_CONCURRENCY,
    DEFAULT_WORKER_HEARTBEAT, DrainReport, ElicitationPlan, ExecutionTrace, PermissionPolicy,
    PoolEvent, PoolOptions, RecoveryReport, Script, ScriptStep, SweepOptions, WorkerPool,
};
pub use m3_store::oauth::CredentialKey;
pub use m3_store::policies;
pub use m3_store::signal::{
    Change, ChangeKind, ChangeSubscription, SIGNAL_ENV, Topic, Wake, signal_enabled_by_env,
};
pub use m3_store::store_now;
pub use m3_store::subscriptions;
pub use m3_store::tokens;
pub use m3_store::workers;
pub use m3_store::{
    ChangePage, ExecutionEvent, ExecutionLease, ListExecutions, PENDING_PAGE_MAX, PendingQuery,
    PendingSort, PruneChanges, Pruned, StoreUrl,
};
/// The m3-types values a kit program names (servers, policies, requests, responses, states,
/// errors), re-exported so one `use m3_kit::...` line suffices.
pub use m3_types::{
    Actor, ActorSurface, ChangeRecord, ChangeRecordKind, Cursor, ElicitationAction,
    ElicitationRequest, ElicitationResponse, Error, ExecutionOutcome, ExecutionResult,
    ExecutionState, ExecutionStatus, HttpServer, HumanInput, OAuthGrant, OAuthSettings,
    OperationKind, PendingElicitationRound, ResponseMap, Result, RoundContext, StdioServer,
};
pub use options::{HumanInputValue, SubmitOptions};
pub use store_backends::{open_store, register_store_backends};

/// The repository's README and guides, compiled and run as doctests (`cargo test --doc`), so
/// the code people paste from them keeps working. Only built for doctests: the files live
/// outside this crate's package.
#[cfg(doctest)]
mod documentation {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/guide.md")]
    struct Guide;
    #[doc = include_str!("../../../docs/cli.md")]
    struct Cli;
    #[doc = include_str!("../../../docs/execution-store.md")]
    struct ExecutionStore;
    #[doc = include_str!("../../../docs/fixtures.md")]
    struct Fixtures;
    #[doc = include_str!("../../../docs/harnesses.md")]
    struct Harnesses;
    #[doc = include_str!("../../../docs/protocol.md")]
    struct Protocol;
    #[doc = include_str!("../../../docs/types.md")]
    struct Types;
    #[doc = include_str!("../../../docs/performance.md")]
    struct Performance;
    #[doc = include_str!("../../../docs/decisions.md")]
    struct Decisions;
    #[doc = include_str!("../../../docs/workers.md")]
    struct Workers;
    #[doc = include_str!("../../../docs/notifications.md")]
    struct Notifications;
    #[doc = include_str!("../../../docs/identity.md")]
    struct Identity;
    #[doc = include_str!("../../../docs/operations.md")]
    struct Operations;
    #[doc = include_str!("../../../docs/plans.md")]
    struct Plans;
    #[doc = include_str!("../../../docs/oauth.md")]
    struct OAuth;
    #[doc = include_str!("../../../docs/policies.md")]
    struct Policies;
}

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
