//! [`SqliteWorkerRows`]: the worker registry on SQLite, one row per worker in `m3rs_workers`
//! (see [`workers::rows`](crate::workers::rows)). The table is made on first use.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Result};
use sqlx::SqlitePool;

use super::error::storage;
use crate::workers::WorkerRows;

/// The table, made if missing; `rowid` keeps the announce order.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS m3rs_workers (
    worker_id TEXT PRIMARY KEY,
    record_json TEXT NOT NULL
)";

/// Worker rows in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteWorkerRows {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
}

impl SqliteWorkerRows {
    /// The rows on `pool`, their table made if missing.
    ///
    /// # Errors
    /// `storage_error` if the table cannot be made.
    pub(crate) async fn open(pool: SqlitePool, clock: Arc<dyn Clock>) -> Result<Self> {
        sqlx::query(TABLE)
            .execute(&pool)
            .await
            .map_err(|e| storage("cannot create the worker table", e))?;
        Ok(Self { pool, clock })
    }
}

fn failed(e: sqlx::Error) -> m3_types::Error {
    storage("cannot access the worker registry", e)
}

#[async_trait]
impl WorkerRows for SqliteWorkerRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn put_worker(&self, worker_id: &str, text: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_workers (worker_id, record_json) VALUES (?, ?) \
             ON CONFLICT (worker_id) DO UPDATE SET record_json = excluded.record_json",
        )
        .bind(worker_id)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(())
    }

    async fn update_worker(&self, worker_id: &str, text: &str) -> Result<bool> {
        let done = sqlx::query("UPDATE m3rs_workers SET record_json = ? WHERE worker_id = ?")
            .bind(text)
            .bind(worker_id)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn worker(&self, worker_id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_workers WHERE worker_id = ?")
            .bind(worker_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed)
    }

    async fn all_workers(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_workers ORDER BY rowid")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)
    }

    async fn delete_worker(&self, worker_id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_workers WHERE worker_id = ?")
            .bind(worker_id)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_worker_if_unchanged(&self, worker_id: &str, text: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_workers WHERE worker_id = ? AND record_json = ?")
            .bind(worker_id)
            .bind(text)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }
}
