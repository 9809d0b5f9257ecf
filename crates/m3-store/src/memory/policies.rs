//! [`MemoryPolicyRows`]: the memory backend's policy rows (see
//! [`policies::rows`](crate::policies::rows)), shared by the clones of one store.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::{Clock, Result};

use crate::policies::PolicyRows;

/// Policy rows in memory, oldest first: (name, text).
#[derive(Debug, Clone)]
pub(crate) struct MemoryPolicyRows {
    clock: Arc<dyn Clock>,
    rows: Arc<Mutex<Vec<(String, String)>>>,
}

impl MemoryPolicyRows {
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
impl PolicyRows for MemoryPolicyRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_policy(&self, name: &str, text: &str) -> Result<bool> {
        let mut rows = self.lock();
        if rows.iter().any(|(taken, _)| taken == name) {
            return Ok(false);
        }
        rows.push((name.to_owned(), text.to_owned()));
        Ok(true)
    }

    async fn all_policies(&self) -> Result<Vec<String>> {
        Ok(self.lock().iter().map(|(_, text)| text.clone()).collect())
    }

    async fn delete_policy(&self, name: &str) -> Result<bool> {
        let mut rows = self.lock();
        let before = rows.len();
        rows.retain(|(taken, _)| taken != name);
        Ok(rows.len() != before)
    }
}
