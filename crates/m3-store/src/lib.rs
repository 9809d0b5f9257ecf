//! Durable storage for managed elicitation rounds and executions.
//!
//! `m3-store` holds the `ManagedInputStore` and `ExecutionStore` contracts, their
//! SQLite backends and the backend conformance suite. It knows nothing about MCP,
//! harnesses or workers.
//!
//! # Quick start
//!
//! ```no_run
//! # async fn demo(pending: m3_types::PendingElicitationRound) -> m3_types::Result<()> {
//! use std::time::Duration;
//! use m3_store::{CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundRef, SqliteManagedInputStore};
//! use m3_types::ElicitationResponse;
//!
//! let store = SqliteManagedInputStore::open("executions.sqlite").await?;
//! let record = store
//!     .create_round(CreateRound::new(pending, "worker-1", Duration::from_secs(30)))
//!     .await?;
//! let round = RoundRef::of(&record);
//! let lease = LeaseRef::of(&record.lease);
//! let mut content = serde_json::Map::new();
//! content.insert("city".into(), "Pune".into());
//! let submission = ResponseSubmission::single(
//!     "shipping_address",
//!     ElicitationResponse::accept(content),
//!     "address-1",
//! );
//! let accepted = store.submit_responses(&round, &lease, submission).await?;
//! assert_eq!(accepted.status.as_str(), "response_validated");
//! # Ok(()) }
//! ```
//!
//! # Concepts
//!
//! - [`ManagedInputStore`] (module [`managed_input`]) is the contract: twelve operations over
//!   one row per elicitation round, with a six-state status machine and a compare-and-set
//!   lease. Request values ([`CreateRound`], [`RoundRef`], [`LeaseRef`], [`ClaimRound`],
//!   [`ResponseSubmission`], [`RoundFailure`]) keep argument lists short;
//!   [`ManagedInputStoreExt`] adds conveniences.
//! - [`sqlite`] is the SQLite backend, [`SqliteManagedInputStore`], on-disk compatible with
//!   the Python original (sf-m3 0.3.1).
//! - [`signal`] is the change signal: [`ExecutionStore::change_signal`] tells waiters that
//!   something changed (a response committed, an execution queued or finished) instead of
//!   making them poll; the row stays the truth and every wait keeps a slow fallback poll.
//! - `conformance` (feature `conformance`) is the contract as a test suite that any backend
//!   runs from its own tests.
//! - [`open()`] opens a store by URL; [`open::register`] lets a backend crate serve its own
//!   URL schemes there (the PostgreSQL backend, crate `m3-store-postgres`, registers
//!   `postgres://`).
//!
//! # The backend toolkit
//!
//! What the shipped backends are built from is public, so a backend in another crate
//! (`m3-store-postgres`, or yours: `docs/custom-backend.md`) stands where they do:
//!
//! - the shared rules, [`managed_input::rules`] and [`execution::rules`] (every decision
//!   of the contract; a backend only reads and writes rows), and [`RoundChange`];
//! - [`round_cache::RecentRounds`], the bounded cache of the rounds a store object last
//!   read or wrote;
//! - the change signal: [`signal::ChangeHub`] (in-process fan-out),
//!   `signal::datagram::DatagramSignal` (Unix only: a datagram to the other processes
//!   waiting on one file), [`signal::Announce`] (announce after a successful commit) and
//!   [`signal::ChangeProbe`];
//! - [`open::Opener`] and [`open::register`], for opening by URL;
//! - the conformance suites (feature `conformance`).
//!
//! # Feature flags
//!
//! - `sqlite` (default): the SQLite backend.
//! - `conformance`: exposes `m3_store::conformance` (not semver-stable).
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]
#![deny(unused_must_use)]

mod batch;
pub mod changes;
mod clock;
mod combined;
pub mod managed_input;
pub mod memory;
pub mod oauth;
pub mod open;
pub mod policies;
pub mod round_cache;
pub mod signal;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod subscriptions;
pub mod tokens;
pub mod workers;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use changes::{ChangePage, PruneChanges, Pruned};
pub use clock::{store_now, truncate_to_stored_precision};
pub use combined::CombinedStore;
pub use managed_input::{
    ClaimRound, CreateRound, DEFAULT_ROUND_LIMIT, LeaseRef, ManagedInputStore,
    ManagedInputStoreExt, PENDING_PAGE_MAX, PendingPage, PendingQuery, PendingSort,
    RenewRoundLeases, ResponseSubmission, RoundChange, RoundFailure, RoundOp, RoundRef, RoundScan,
    UnreadableRound,
};
pub use open::{StoreUrl, open};
#[cfg(feature = "sqlite")]
pub use sqlite::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, SqliteExecutionStore, SqliteManagedInputStore,
    SqliteStoreOptions, SqliteSynchronous,
};

/// `docs/custom-backend.md`, compiled as doctests so its example stays correct.
#[cfg(all(doctest, feature = "conformance"))]
#[doc = include_str!("../../../docs/custom-backend.md")]
pub struct CustomBackendGuide;

pub mod execution;

pub use execution::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, EVENT_ELICITATION_REQUEST,
    EVENT_ELICITATION_RESPONSE, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED,
    EVENT_EXECUTION_HANDED_OVER, EVENT_EXECUTION_STATE_CHANGED, EVENT_OAUTH_AUTHORIZATION_FINISHED,
    EVENT_OAUTH_AUTHORIZATION_REQUIRED, ExecutionChange, ExecutionEvent, ExecutionLease,
    ExecutionLeaseRef, ExecutionRecord, ExecutionStore, FinishExecution, ListExecutions,
    NewExecution, RenewLeases, TerminalizeExpired, Terminalized,
};

/// `docs/changes.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/changes.md")]
struct ChangesGuide;

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
