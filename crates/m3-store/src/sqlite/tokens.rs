//! [`SqliteTokenRows`]: API tokens on SQLite, one row per token in `m3rs_tokens` (see
//! [`tokens::rows`](crate::tokens::rows)). The table is made on first use, so a store
//! that never has tokens never gains it.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Result};
use sqlx::SqlitePool;

use super::error::storage;
use crate::tokens::TokenRows;

/// The table, made if missing: names and digests are unique.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS m3rs_tokens (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL UNIQUE,
    record_json TEXT NOT NULL
)";

/// Token rows in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteTokenRows {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
}

impl SqliteTokenRows {
    /// The rows on `pool`, their table made if missing.
    ///
    /// # Errors
    /// `storage_error` if the table cannot be made.
    pub(crate) async fn open(pool: SqlitePool, clock: Arc<dyn Clock>) -> Result<Self> {
        sqlx::query(TABLE)
            .execute(&pool)
            .await
            .map_err(|e| storage("cannot create the token table", e))?;
        Ok(Self { pool, clock })
    }
}

fn failed(e: sqlx::Error) -> m3_types::Error {
    storage("cannot access the API tokens", e)
}

#[async_trait]
impl TokenRows for SqliteTokenRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_token(&self, id: &str, name: &str, digest: &str, text: &str) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO m3rs_tokens (id, name, digest, record_json) VALUES (?, ?, ?, ?) \
             ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(digest)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn token_by_digest(&self, digest: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_tokens WHERE digest = ?")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed)
    }

    async fn all_tokens(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_tokens ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)
    }

    async fn delete_token(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_tokens WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }
}
