//! [`SqlitePolicyRows`]: policies on SQLite, one row per policy in `m3rs_policies` (see
//! [`policies::rows`](crate::policies::rows)). The table is made on first use, so a store
//! that never has policies never gains it.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Result};
use sqlx::SqlitePool;

use super::error::storage;
use crate::policies::PolicyRows;

/// The table, made if missing: names are unique; `seq` keeps the order policies were added.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS m3rs_policies (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    record_json TEXT NOT NULL
)";

/// Policy rows in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqlitePolicyRows {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
}

impl SqlitePolicyRows {
    /// The rows on `pool`, their table made if missing.
    ///
    /// # Errors
    /// `storage_error` if the table cannot be made.
    pub(crate) async fn open(pool: SqlitePool, clock: Arc<dyn Clock>) -> Result<Self> {
        sqlx::query(TABLE)
            .execute(&pool)
            .await
            .map_err(|e| storage("cannot create the policy table", e))?;
        Ok(Self { pool, clock })
    }
}

fn failed(e: sqlx::Error) -> m3_types::Error {
    storage("cannot access the policies", e)
}

#[async_trait]
impl PolicyRows for SqlitePolicyRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_policy(&self, name: &str, text: &str) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO m3rs_policies (name, record_json) VALUES (?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }

    async fn all_policies(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_policies ORDER BY seq")
            .fetch_all(&self.pool)
            .await
            .map_err(failed)
    }

    async fn delete_policy(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_policies WHERE name = ?")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }
}
