//! Durable storage for managed elicitation rounds and executions.
//!
//! `m3-store` holds the `ManagedInputStore` and `ExecutionStore` contracts, their
//! SQLite backends and the backend conformance suite. It knows nothing about MCP,
//! harnesses or workers.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

mod execution;
mod sqlite_pool;

pub use execution::{
    AcquireLease, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_STATE_CHANGED,
    EXECUTION_EVENTS_TABLE, EXECUTION_SCHEMA_TABLE, EXECUTIONS_TABLE, ExecutionEvent,
    ExecutionLease, ExecutionRecord, ExecutionStore, FinishExecution, ExecutionLeaseRef, ListExecutions,
    NewExecution, SqliteExecutionStore, TerminalizeExpired, Terminalized,
};
pub use sqlite_pool::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, SqliteStoreOptions, SqliteSynchronous,
};
