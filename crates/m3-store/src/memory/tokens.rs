//! [`MemoryTokenRows`]: the memory backend's token rows (see
//! [`tokens::rows`](crate::tokens::rows)), shared by the clones of one store.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::{Clock, Result};

use crate::tokens::TokenRows;

/// One token's row.
#[derive(Debug, Clone)]
struct Row {
    id: String,
    name: String,
    digest: String,
    text: String,
}

/// Token rows in memory, oldest first.
#[derive(Debug, Clone)]
pub(crate) struct MemoryTokenRows {
    clock: Arc<dyn Clock>,
    rows: Arc<Mutex<Vec<Row>>>,
}

impl MemoryTokenRows {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            rows: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Row>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl TokenRows for MemoryTokenRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_token(&self, id: &str, name: &str, digest: &str, text: &str) -> Result<bool> {
        let mut rows = self.lock();
        if rows
            .iter()
            .any(|row| row.name == name || row.digest == digest)
        {
            return Ok(false);
        }
        rows.push(Row {
            id: id.to_owned(),
            name: name.to_owned(),
            digest: digest.to_owned(),
            text: text.to_owned(),
        });
        Ok(true)
    }

    async fn token_by_digest(&self, digest: &str) -> Result<Option<String>> {
        Ok(self
            .lock()
            .iter()
            .find(|row| row.digest == digest)
            .map(|row| row.text.clone()))
    }

    async fn all_tokens(&self) -> Result<Vec<String>> {
        Ok(self.lock().iter().map(|row| row.text.clone()).collect())
    }

    async fn delete_token(&self, id: &str) -> Result<bool> {
        let mut rows = self.lock();
        let before = rows.len();
        rows.retain(|row| row.id != id);
        Ok(rows.len() != before)
    }
}
