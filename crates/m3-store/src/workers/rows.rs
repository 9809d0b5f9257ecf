//! The backend toolkit for the worker registry: a backend that keeps one row per worker,
//! found by its id ([`WorkerRows`]), gets the whole [`WorkerRegistry`] from
//! [`RowWorkerRegistry`], with every decision made by [`super::rules`]. Each row is written
//! only by its own worker (announce, heartbeat, retire) or removed by a prune, so rows need
//! no compare-and-set.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use m3_types::{Clock, Result};

use super::contract::WorkerRegistry;
use super::record::{NewWorker, WorkerEntry, WorkerState};
use super::rules;

/// What a backend does for the registry: keep rows of (worker id, text, announce order).
/// Nothing here decides.
#[async_trait]
pub trait WorkerRows: std::fmt::Debug + Send + Sync + 'static {
    /// The store's clock (announcements and heartbeats).
    fn clock(&self) -> Arc<dyn Clock>;

    /// Adds the row of `worker_id`, or replaces its text when there is one.
    async fn put_worker(&self, worker_id: &str, text: &str) -> Result<()>;

    /// Replaces the text of an existing row; `false` (and nothing written) when there is
    /// none.
    async fn update_worker(&self, worker_id: &str, text: &str) -> Result<bool>;

    /// The text of the row of `worker_id`.
    async fn worker(&self, worker_id: &str) -> Result<Option<String>>;

    /// Every row's text, in the order the rows were first added.
    async fn all_workers(&self) -> Result<Vec<String>>;

    /// Removes the row of `worker_id`; whether there was one.
    async fn delete_worker(&self, worker_id: &str) -> Result<bool>;

    /// Removes the row of `worker_id` only while its text is still `text` (a heartbeat
    /// since then keeps it); whether it was removed.
    async fn delete_worker_if_unchanged(&self, worker_id: &str, text: &str) -> Result<bool>;
}

/// The [`WorkerRegistry`] over any [`WorkerRows`].
#[derive(Debug, Clone)]
pub struct RowWorkerRegistry<R> {
    rows: R,
}

impl<R: WorkerRows> RowWorkerRegistry<R> {
    /// The registry over `rows`.
    pub fn new(rows: R) -> Self {
        Self { rows }
    }

    fn now(&self) -> time::OffsetDateTime {
        crate::store_now(self.rows.clock().as_ref())
    }
}

#[async_trait]
impl<R: WorkerRows> WorkerRegistry for RowWorkerRegistry<R> {
    async fn announce(&self, new: NewWorker) -> Result<WorkerEntry> {
        let entry = rules::make(&new, self.now())?;
        self.rows
            .put_worker(&entry.worker_id, &rules::encode(&entry)?)
            .await?;
        Ok(entry)
    }

    async fn heartbeat(&self, worker_id: &str, state: WorkerState) -> Result<Option<WorkerEntry>> {
        let Some(text) = self.rows.worker(worker_id).await? else {
            return Ok(None);
        };
        let entry = rules::beat(rules::decode(&text)?, state, self.now());
        let written = self
            .rows
            .update_worker(worker_id, &rules::encode(&entry)?)
            .await?;
        Ok(written.then_some(entry))
    }

    async fn retire(&self, worker_id: &str) -> Result<bool> {
        self.rows.delete_worker(worker_id).await
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        self.rows
            .all_workers()
            .await?
            .iter()
            .map(|text| rules::decode(text))
            .collect()
    }

    async fn prune_workers(&self, silent_for: Duration) -> Result<Vec<String>> {
        let now = self.now();
        let mut pruned = Vec::new();
        for text in self.rows.all_workers().await? {
            let entry = rules::decode(&text)?;
            // Only the text read as silent is removed: a heartbeat in between wins.
            if rules::is_silent(&entry, now, silent_for)
                && self
                    .rows
                    .delete_worker_if_unchanged(&entry.worker_id, &text)
                    .await?
            {
                pruned.push(entry.worker_id);
            }
        }
        Ok(pruned)
    }
}
