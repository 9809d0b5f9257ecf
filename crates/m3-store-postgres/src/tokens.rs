//! [`PgTokenRows`]: API tokens on PostgreSQL, one row per token in `m3rs_tokens`
//! (migration `0009_tokens.sql`); [`RowTokenStore`](m3_store::tokens::RowTokenStore) makes
//! every decision.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::tokens::TokenRows;
use m3_types::{Clock, Result};
use sqlx::PgPool;

use super::error::db;

/// Token rows in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub(crate) struct PgTokenRows {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl PgTokenRows {
    pub(crate) fn new(pool: PgPool, clock: Arc<dyn Clock>) -> Self {
        Self { pool, clock }
    }
}

#[async_trait]
impl TokenRows for PgTokenRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_token(&self, id: &str, name: &str, digest: &str, text: &str) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO m3rs_tokens (id, name, digest, record_json) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(digest)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(db("cannot add the token"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn token_by_digest(&self, digest: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_tokens WHERE digest = $1")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("cannot read the API tokens"))
    }

    async fn all_tokens(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_tokens ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(db("cannot read the API tokens"))
    }

    async fn delete_token(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_tokens WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db("cannot revoke the token"))?;
        Ok(done.rows_affected() == 1)
    }
}
