//! [`PgOAuthRows`]: sealed OAuth credentials on PostgreSQL, one row per server URL and
//! client in `m3rs_oauth_credentials` (migration `0011_oauth_tokens.sql`); sealing and
//! opening are [`m3_store::oauth`]'s.

use async_trait::async_trait;
use m3_store::oauth::OAuthCredentialRows;
use m3_types::Result;
use sqlx::PgPool;

use super::error::db;

/// Sealed credential rows in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub(crate) struct PgOAuthRows {
    pool: PgPool,
}

impl PgOAuthRows {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl OAuthCredentialRows for PgOAuthRows {
    async fn sealed_credentials(&self, server_url: &str, client: &str) -> Result<Option<String>> {
        sqlx::query_scalar(
            "SELECT sealed FROM m3rs_oauth_credentials WHERE server_url = $1 AND client = $2",
        )
        .bind(server_url)
        .bind(client)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("cannot read the OAuth credentials"))
    }

    async fn put_credentials(&self, server_url: &str, client: &str, sealed: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_oauth_credentials (server_url, client, sealed) VALUES ($1, $2, $3) \
             ON CONFLICT (server_url, client) DO UPDATE SET sealed = excluded.sealed",
        )
        .bind(server_url)
        .bind(client)
        .bind(sealed)
        .execute(&self.pool)
        .await
        .map_err(db("cannot save the OAuth credentials"))?;
        Ok(())
    }

    async fn delete_credentials(&self, server_url: &str, client: &str) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM m3rs_oauth_credentials WHERE server_url = $1 AND client = $2")
                .bind(server_url)
                .bind(client)
                .execute(&self.pool)
                .await
                .map_err(db("cannot remove the OAuth credentials"))?;
        Ok(done.rows_affected() == 1)
    }
}
