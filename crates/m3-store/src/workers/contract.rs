//! [`WorkerRegistry`]: the contract every backend's worker registry meets.

use std::time::Duration;

use async_trait::async_trait;
use m3_types::Result;

use super::record::{NewWorker, WorkerEntry, WorkerState};

/// The store's worker registry
/// ([`ExecutionStore::worker_registry`](crate::ExecutionStore::worker_registry)).
#[async_trait]
pub trait WorkerRegistry: std::fmt::Debug + Send + Sync + 'static {
    /// Registers a starting worker, `running`, its heartbeat now. Announcing an id again
    /// (a worker that lost its row to a prune while it was stalled) registers it afresh.
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_worker`) for a bad id or host; nothing is
    /// registered then.
    async fn announce(&self, new: NewWorker) -> Result<WorkerEntry>;

    /// Renews the heartbeat of `worker_id` and records its `state`; `None` when the worker
    /// is not registered (it was pruned as silent, or never announced): it should
    /// announce itself again.
    async fn heartbeat(&self, worker_id: &str, state: WorkerState) -> Result<Option<WorkerEntry>>;

    /// Removes a stopping worker's entry; whether there was one.
    async fn retire(&self, worker_id: &str) -> Result<bool>;

    /// Every registered worker, in the order they announced themselves.
    async fn workers(&self) -> Result<Vec<WorkerEntry>>;

    /// Forgets the workers whose last heartbeat is older than `silent_for` on the store's
    /// clock, and returns their ids.
    async fn prune_workers(&self, silent_for: Duration) -> Result<Vec<String>>;
}
