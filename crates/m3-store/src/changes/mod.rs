//! The change feed: every committed state change of a round or an execution, as a
//! [`ChangeRecord`](m3_types::ChangeRecord) at a store-wide [`Cursor`](m3_types::Cursor).
//!
//! A backend appends the record in the same transaction as the change (SQLite with triggers;
//! PostgreSQL in the statement that writes a round, and with triggers for executions), serves [`ExecutionStore::read_changes`] in cursor
//! order and [`ExecutionStore::prune_changes`] for retention; [`rules`] holds the checks
//! every backend makes the same way, and [`follow`] turns reads plus the store's change
//! signal into a live stream. The guarantees: `docs/changes.md`.
//!
//! [`ExecutionStore::read_changes`]: crate::ExecutionStore::read_changes
//! [`ExecutionStore::prune_changes`]: crate::ExecutionStore::prune_changes

mod follow;
mod request;
pub mod rules;

pub use follow::follow;
pub use request::{ChangePage, FeedBounds, MAX_CHANGE_PAGE, PruneChanges, Pruned};
