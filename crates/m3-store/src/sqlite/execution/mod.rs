//! [`SqliteExecutionStore`]: the SQLite backend of [`ExecutionStore`](crate::ExecutionStore).
//! See `docs/execution-store.md` for the tables and the guarantees.
//!
//! Every mutation is one `BEGIN IMMEDIATE` transaction with a guarded `UPDATE`/`INSERT`
//! whose affected-row count is checked; each decision is a call of
//! [`crate::execution::rules`].

mod claim;
mod lifecycle;
mod probe;
mod renew;
mod rows;
mod schema;
mod store;
mod writes;

pub use schema::{EXECUTION_EVENTS_TABLE, EXECUTION_SCHEMA_TABLE, EXECUTIONS_TABLE};
pub use store::SqliteExecutionStore;
