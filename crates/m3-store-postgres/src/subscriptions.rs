//! [`PgRows`]: webhook subscriptions on PostgreSQL, one text row per subscription in
//! `m3rs_subscriptions` and the answer-link key in `m3rs_link_key` (migration
//! `0007_subscriptions.sql`); [`RowSubscriptionStore`](m3_store::subscriptions::RowSubscriptionStore)
//! makes every decision.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::subscriptions::{LinkKey, SubscriptionRows};
use m3_types::{Clock, Cursor, Error, Result};
use sqlx::PgPool;
use time::OffsetDateTime;

use super::error::db;
use super::feed;

/// Subscription rows in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub(crate) struct PgRows {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl PgRows {
    pub(crate) fn new(pool: PgPool, clock: Arc<dyn Clock>) -> Self {
        Self { pool, clock }
    }
}

#[async_trait]
impl SubscriptionRows for PgRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn newest_cursor(&self) -> Result<Cursor> {
        feed::newest(&self.pool).await
    }

    async fn load(&self, id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_subscriptions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("cannot read the webhook subscription"))
    }

    async fn load_all(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_subscriptions ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(db("cannot list the webhook subscriptions"))
    }

    async fn insert(&self, id: &str, text: &str) -> Result<()> {
        sqlx::query("INSERT INTO m3rs_subscriptions (id, record_json) VALUES ($1, $2)")
            .bind(id)
            .bind(text)
            .execute(&self.pool)
            .await
            .map_err(db("cannot add the webhook subscription"))?;
        Ok(())
    }

    async fn replace(&self, id: &str, previous: &str, next: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE m3rs_subscriptions SET record_json = $1 WHERE id = $2 AND record_json = $3",
        )
        .bind(next)
        .bind(id)
        .bind(previous)
        .execute(&self.pool)
        .await
        .map_err(db("cannot write the webhook subscription"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_subscriptions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db("cannot remove the webhook subscription"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn load_link_key(&self) -> Result<Option<LinkKey>> {
        let row: Option<(String, OffsetDateTime)> =
            sqlx::query_as("SELECT key, created_at FROM m3rs_link_key WHERE id = 1")
                .fetch_optional(&self.pool)
                .await
                .map_err(db("cannot read the answer-link key"))?;
        row.map(|(key, created_at)| LinkKey::from_stored(&key, created_at))
            .transpose()
    }

    async fn insert_link_key(&self, key: &LinkKey) -> Result<LinkKey> {
        sqlx::query(
            "INSERT INTO m3rs_link_key (id, key, created_at) VALUES (1, $1, $2)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(key.to_stored())
        .bind(key.created_at)
        .execute(&self.pool)
        .await
        .map_err(db("cannot keep the answer-link key"))?;
        self.load_link_key()
            .await?
            .ok_or_else(|| Error::storage("the answer-link key vanished right after it was kept"))
    }

    async fn replace_link_key(&self, key: &LinkKey) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_link_key (id, key, created_at) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET key = excluded.key, created_at = excluded.created_at",
        )
        .bind(key.to_stored())
        .bind(key.created_at)
        .execute(&self.pool)
        .await
        .map_err(db("cannot rotate the answer-link key"))?;
        Ok(())
    }
}
