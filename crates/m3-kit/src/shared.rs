//! The state a kit shares with its agents and handles (one `Arc` behind every clone).

use std::sync::Arc;

use m3_runtime::{ResponseNotifier, WorkerPool};
use m3_store::ExecutionStore;
use tokio_util::sync::CancellationToken;

/// Shared state of a kit, its agents and handles.
#[derive(Debug)]
pub(crate) struct KitInner {
    pub(crate) store: Arc<dyn ExecutionStore>,
    pub(crate) persistent: bool,
    pub(crate) notifier: Arc<ResponseNotifier>,
    /// The embedded worker (`None`: the kit only queues).
    pub(crate) pool: Option<WorkerPool>,
    /// Stops the recovery sweep of a kit without an embedded worker.
    pub(crate) sweep_stop: CancellationToken,
    /// Who answers when a call names nobody (the builder's actor, else the process's user).
    pub(crate) actor: m3_types::Actor,
}

impl KitInner {
    /// The local cancellation token of an execution this kit runs.
    pub(crate) fn local_token(&self, execution_id: &str) -> Option<CancellationToken> {
        self.pool.as_ref()?.local_token(execution_id)
    }

    /// Hands a queued execution to the embedded worker, if the kit has one (otherwise it
    /// waits for any `m3 worker` on the store).
    pub(crate) fn spawn_worker(&self, execution_id: &str) {
        if let Some(pool) = &self.pool {
            pool.submit(execution_id);
        }
    }
}
