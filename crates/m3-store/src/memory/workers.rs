//! [`MemoryWorkerRows`]: the memory backend's worker registry rows (see
//! [`workers::rows`](crate::workers::rows)), shared by the clones of one store.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::{Clock, Result};

use crate::workers::WorkerRows;

/// Worker rows in memory, `(worker id, text)` in announce order.
#[derive(Debug, Clone)]
pub(crate) struct MemoryWorkerRows {
    clock: Arc<dyn Clock>,
    rows: Arc<Mutex<Vec<(String, String)>>>,
}

impl MemoryWorkerRows {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            rows: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(String, String)>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl WorkerRows for MemoryWorkerRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn put_worker(&self, worker_id: &str, text: &str) -> Result<()> {
        let mut rows = self.lock();
        match rows.iter_mut().find(|(id, _)| id == worker_id) {
            Some((_, kept)) => text.clone_into(kept),
            None => rows.push((worker_id.to_owned(), text.to_owned())),
        }
        Ok(())
    }

    async fn update_worker(&self, worker_id: &str, text: &str) -> Result<bool> {
        Ok(
            match self.lock().iter_mut().find(|(id, _)| id == worker_id) {
                Some((_, kept)) => {
                    text.clone_into(kept);
                    true
                }
                None => false,
            },
        )
    }

    async fn worker(&self, worker_id: &str) -> Result<Option<String>> {
        Ok(self
            .lock()
            .iter()
            .find(|(id, _)| id == worker_id)
            .map(|(_, text)| text.clone()))
    }

    async fn all_workers(&self) -> Result<Vec<String>> {
        Ok(self.lock().iter().map(|(_, text)| text.clone()).collect())
    }

    async fn delete_worker(&self, worker_id: &str) -> Result<bool> {
        let mut rows = self.lock();
        let before = rows.len();
        rows.retain(|(id, _)| id != worker_id);
        Ok(rows.len() != before)
    }

    async fn delete_worker_if_unchanged(&self, worker_id: &str, text: &str) -> Result<bool> {
        let mut rows = self.lock();
        let before = rows.len();
        rows.retain(|(id, kept)| id != worker_id || kept != text);
        Ok(rows.len() != before)
    }
}
