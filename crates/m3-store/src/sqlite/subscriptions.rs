//! [`SqliteRows`]: webhook subscriptions on SQLite, one text row per subscription in
//! `m3rs_subscriptions` and the answer-link key in `m3rs_link_key` (see
//! [`subscriptions::rows`](crate::subscriptions::rows)). The tables are made on first use,
//! so a store that never notifies never gains them.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Result};
use sqlx::SqlitePool;

use super::error::storage;
use crate::subscriptions::{LinkKey, SubscriptionRows};

/// The tables, made if missing.
const TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS m3rs_subscriptions (
        id TEXT PRIMARY KEY,
        record_json TEXT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS m3rs_link_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        key TEXT NOT NULL,
        created_at TEXT NOT NULL
    )",
];

/// Subscription rows in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteRows {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
}

impl SqliteRows {
    /// The rows on `pool`, their tables made if missing.
    ///
    /// # Errors
    /// `storage_error` if the tables cannot be made.
    pub(crate) async fn open(pool: SqlitePool, clock: Arc<dyn Clock>) -> Result<Self> {
        for statement in TABLES {
            sqlx::query(statement)
                .execute(&pool)
                .await
                .map_err(|e| storage("cannot create the subscription tables", e))?;
        }
        Ok(Self { pool, clock })
    }
}

fn failed(e: sqlx::Error) -> m3_types::Error {
    storage("cannot access the webhook subscriptions", e)
}

#[async_trait]
impl SubscriptionRows for SqliteRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn newest_cursor(&self) -> Result<Cursor> {
        let newest: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'm3rs_changes'")
                .fetch_optional(&self.pool)
                .await
                .map_err(failed)?;
        Cursor::from_i64(newest.unwrap_or(0))
    }

    async fn load(&self, id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_subscriptions WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed)
    }

    async fn load_all(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_subscriptions ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)
    }

    async fn insert(&self, id: &str, text: &str) -> Result<()> {
        sqlx::query("INSERT INTO m3rs_subscriptions (id, record_json) VALUES (?, ?)")
            .bind(id)
            .bind(text)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(())
    }

    async fn replace(&self, id: &str, previous: &str, next: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE m3rs_subscriptions SET record_json = ? WHERE id = ? AND record_json = ?",
        )
        .bind(next)
        .bind(id)
        .bind(previous)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_subscriptions WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn load_link_key(&self) -> Result<Option<LinkKey>> {
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT key, created_at FROM m3rs_link_key WHERE id = 1")
                .fetch_optional(&self.pool)
                .await
                .map_err(failed)?;
        row.map(|(key, created_at)| {
            LinkKey::from_stored(&key, m3_types::timestamp::parse(&created_at)?)
        })
        .transpose()
    }

    async fn insert_link_key(&self, key: &LinkKey) -> Result<LinkKey> {
        sqlx::query(
            "INSERT INTO m3rs_link_key (id, key, created_at) VALUES (1, ?, ?)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(key.to_stored())
        .bind(m3_types::timestamp::format(key.created_at))
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        self.load_link_key().await?.ok_or_else(|| {
            m3_types::Error::storage("the answer-link key vanished right after it was kept")
        })
    }

    async fn replace_link_key(&self, key: &LinkKey) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_link_key (id, key, created_at) VALUES (1, ?, ?)
             ON CONFLICT (id) DO UPDATE SET key = excluded.key, created_at = excluded.created_at",
        )
        .bind(key.to_stored())
        .bind(m3_types::timestamp::format(key.created_at))
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(())
    }
}
