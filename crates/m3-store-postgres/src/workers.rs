//! [`PgWorkerRows`]: the worker registry on PostgreSQL, one row per worker in
//! `m3rs_workers` (migration `0012_workers.sql`);
//! [`RowWorkerRegistry`](m3_store::workers::RowWorkerRegistry) makes every decision.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::workers::WorkerRows;
use m3_types::{Clock, Result};
use sqlx::PgPool;

use super::error::db;

/// Worker rows in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub(crate) struct PgWorkerRows {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl PgWorkerRows {
    pub(crate) fn new(pool: PgPool, clock: Arc<dyn Clock>) -> Self {
        Self { pool, clock }
    }
}

#[async_trait]
impl WorkerRows for PgWorkerRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn put_worker(&self, worker_id: &str, text: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_workers (worker_id, record_json) VALUES ($1, $2) \
             ON CONFLICT (worker_id) DO UPDATE SET record_json = excluded.record_json",
        )
        .bind(worker_id)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(db("cannot register the worker"))?;
        Ok(())
    }

    async fn update_worker(&self, worker_id: &str, text: &str) -> Result<bool> {
        let done = sqlx::query("UPDATE m3rs_workers SET record_json = $1 WHERE worker_id = $2")
            .bind(text)
            .bind(worker_id)
            .execute(&self.pool)
            .await
            .map_err(db("cannot renew the worker's heartbeat"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn worker(&self, worker_id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_workers WHERE worker_id = $1")
            .bind(worker_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("cannot read the worker registry"))
    }

    async fn all_workers(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_workers ORDER BY seq")
            .fetch_all(&self.pool)
            .await
            .map_err(db("cannot read the worker registry"))
    }

    async fn delete_worker(&self, worker_id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_workers WHERE worker_id = $1")
            .bind(worker_id)
            .execute(&self.pool)
            .await
            .map_err(db("cannot retire the worker"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_worker_if_unchanged(&self, worker_id: &str, text: &str) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM m3rs_workers WHERE worker_id = $1 AND record_json = $2")
                .bind(worker_id)
                .bind(text)
                .execute(&self.pool)
                .await
                .map_err(db("cannot prune the worker registry"))?;
        Ok(done.rows_affected() == 1)
    }
}
