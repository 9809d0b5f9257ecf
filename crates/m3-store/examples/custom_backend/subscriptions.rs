//! Webhook subscriptions of the directory store: one file, `subscriptions.json`, with every
//! subscription's text row and the answer-link key, read and written under the store's
//! lock like everything else. [`RowSubscriptionStore`](m3_store::subscriptions::RowSubscriptionStore)
//! makes every decision; this file only keeps rows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use m3_store::ExecutionStore;
use m3_store::subscriptions::{LinkKey, SubscriptionRows};
use m3_types::{Clock, Cursor, Error, Result};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::files::Locked;
use crate::store::DirectoryStore;

/// The file, relative to the directory.
const SUBSCRIPTIONS_FILE: &str = "subscriptions.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct SubscriptionsFile {
    /// Text rows by subscription id (ULIDs: oldest first).
    rows: BTreeMap<String, String>,
    link_key: Option<StoredKey>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredKey {
    key: String,
    #[serde(with = "m3_types::timestamp::serde")]
    created_at: OffsetDateTime,
}

fn path(locked: &Locked<'_>) -> PathBuf {
    locked.dir().root().join(SUBSCRIPTIONS_FILE)
}

fn read_file(locked: &Locked<'_>) -> Result<SubscriptionsFile> {
    let path = path(locked);
    Ok(locked
        .read_json(&path, |why| {
            Error::storage(format!("{} is damaged: {why}", path.display()))
        })?
        .unwrap_or_default())
}

fn key_of(stored: &StoredKey) -> Result<LinkKey> {
    LinkKey::from_stored(&stored.key, stored.created_at)
}

fn stored(key: &LinkKey) -> StoredKey {
    StoredKey {
        key: key.to_stored(),
        created_at: key.created_at,
    }
}

impl DirectoryStore {
    /// Applies `change` to the file under the exclusive lock; stages it if `change` says
    /// it changed something.
    async fn change_file<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut SubscriptionsFile) -> Result<(T, bool)> + Send + 'static,
    ) -> Result<T> {
        self.write(move |locked, _| {
            let mut file = read_file(locked)?;
            let (value, changed) = change(&mut file)?;
            if changed {
                let path = path(locked);
                locked.stage(&path, &file)?;
            }
            Ok(value)
        })
        .await
    }
}

#[async_trait]
impl SubscriptionRows for DirectoryStore {
    fn clock(&self) -> Arc<dyn Clock> {
        ExecutionStore::clock(self)
    }

    async fn newest_cursor(&self) -> Result<Cursor> {
        self.read(|locked, _| crate::feed::newest(locked)).await
    }

    async fn load(&self, id: &str) -> Result<Option<String>> {
        let id = id.to_owned();
        self.read(move |locked, _| Ok(read_file(locked)?.rows.remove(&id)))
            .await
    }

    async fn load_all(&self) -> Result<Vec<String>> {
        self.read(|locked, _| Ok(read_file(locked)?.rows.into_values().collect()))
            .await
    }

    async fn insert(&self, id: &str, text: &str) -> Result<()> {
        let (id, text) = (id.to_owned(), text.to_owned());
        self.change_file(move |file| {
            file.rows.insert(id, text);
            Ok(((), true))
        })
        .await
    }

    async fn replace(&self, id: &str, previous: &str, next: &str) -> Result<bool> {
        let (id, previous, next) = (id.to_owned(), previous.to_owned(), next.to_owned());
        self.change_file(move |file| match file.rows.get_mut(&id) {
            Some(row) if *row == previous => {
                *row = next;
                Ok((true, true))
            }
            _ => Ok((false, false)),
        })
        .await
    }

    async fn delete(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.change_file(move |file| {
            let removed = file.rows.remove(&id).is_some();
            Ok((removed, removed))
        })
        .await
    }

    async fn load_link_key(&self) -> Result<Option<LinkKey>> {
        self.read(|locked, _| read_file(locked)?.link_key.as_ref().map(key_of).transpose())
            .await
    }

    async fn insert_link_key(&self, key: &LinkKey) -> Result<LinkKey> {
        let key = key.clone();
        self.change_file(move |file| match &file.link_key {
            Some(kept) => Ok((key_of(kept)?, false)),
            None => {
                file.link_key = Some(stored(&key));
                Ok((key, true))
            }
        })
        .await
    }

    async fn replace_link_key(&self, key: &LinkKey) -> Result<()> {
        let key = stored(key);
        self.change_file(move |file| {
            file.link_key = Some(key);
            Ok(((), true))
        })
        .await
    }
}
