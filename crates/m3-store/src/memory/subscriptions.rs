//! [`MemoryRows`]: the memory backend's subscription rows (see
//! [`subscriptions::rows`](crate::subscriptions::rows)), shared by the clones of one store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Result};

use super::feed::MemoryFeed;
use crate::subscriptions::{LinkKey, SubscriptionRows};

/// Subscription rows by id (ULIDs: oldest first) and the link key, in memory.
#[derive(Debug, Clone)]
pub(crate) struct MemoryRows {
    clock: Arc<dyn Clock>,
    feed: MemoryFeed,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    rows: BTreeMap<String, String>,
    link_key: Option<LinkKey>,
}

impl MemoryRows {
    pub(crate) fn new(clock: Arc<dyn Clock>, feed: MemoryFeed) -> Self {
        Self {
            clock,
            feed,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl SubscriptionRows for MemoryRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn newest_cursor(&self) -> Result<Cursor> {
        Ok(self.feed.newest())
    }

    async fn load(&self, id: &str) -> Result<Option<String>> {
        Ok(self.lock().rows.get(id).cloned())
    }

    async fn load_all(&self) -> Result<Vec<String>> {
        Ok(self.lock().rows.values().cloned().collect())
    }

    async fn insert(&self, id: &str, text: &str) -> Result<()> {
        self.lock().rows.insert(id.to_owned(), text.to_owned());
        Ok(())
    }

    async fn replace(&self, id: &str, previous: &str, next: &str) -> Result<bool> {
        let mut state = self.lock();
        match state.rows.get_mut(id) {
            Some(row) if row == previous => {
                next.clone_into(row);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete(&self, id: &str) -> Result<bool> {
        Ok(self.lock().rows.remove(id).is_some())
    }

    async fn load_link_key(&self) -> Result<Option<LinkKey>> {
        Ok(self.lock().link_key.clone())
    }

    async fn insert_link_key(&self, key: &LinkKey) -> Result<LinkKey> {
        Ok(self
            .lock()
            .link_key
            .get_or_insert_with(|| key.clone())
            .clone())
    }

    async fn replace_link_key(&self, key: &LinkKey) -> Result<()> {
        self.lock().link_key = Some(key.clone());
        Ok(())
    }
}
