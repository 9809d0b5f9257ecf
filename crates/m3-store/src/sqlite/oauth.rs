//! [`SqliteOAuthRows`]: sealed OAuth credentials on SQLite, one row per server URL and
//! client in `m3rs_oauth_credentials` (see [`oauth`](crate::oauth)). The table is made on
//! first use, so a store that never keeps credentials never gains it.

use async_trait::async_trait;
use m3_types::Result;
use sqlx::SqlitePool;

use super::error::storage;
use crate::oauth::OAuthCredentialRows;

/// The table, made if missing.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS m3rs_oauth_credentials (
    server_url TEXT NOT NULL,
    client TEXT NOT NULL,
    sealed TEXT NOT NULL,
    PRIMARY KEY (server_url, client)
)";

/// Sealed credential rows in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteOAuthRows {
    pool: SqlitePool,
}

impl SqliteOAuthRows {
    /// The rows on `pool`, their table made if missing.
    ///
    /// # Errors
    /// `storage_error` if the table cannot be made.
    pub(crate) async fn open(pool: SqlitePool) -> Result<Self> {
        sqlx::query(TABLE)
            .execute(&pool)
            .await
            .map_err(|e| storage("cannot create the OAuth credential table", e))?;
        Ok(Self { pool })
    }
}

fn failed(e: sqlx::Error) -> m3_types::Error {
    storage("cannot access the OAuth credentials", e)
}

#[async_trait]
impl OAuthCredentialRows for SqliteOAuthRows {
    async fn sealed_credentials(&self, server_url: &str, client: &str) -> Result<Option<String>> {
        sqlx::query_scalar(
            "SELECT sealed FROM m3rs_oauth_credentials WHERE server_url = ? AND client = ?",
        )
        .bind(server_url)
        .bind(client)
        .fetch_optional(&self.pool)
        .await
        .map_err(failed)
    }

    async fn put_credentials(&self, server_url: &str, client: &str, sealed: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO m3rs_oauth_credentials (server_url, client, sealed) VALUES (?, ?, ?) \
             ON CONFLICT (server_url, client) DO UPDATE SET sealed = excluded.sealed",
        )
        .bind(server_url)
        .bind(client)
        .bind(sealed)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(())
    }

    async fn delete_credentials(&self, server_url: &str, client: &str) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM m3rs_oauth_credentials WHERE server_url = ? AND client = ?")
                .bind(server_url)
                .bind(client)
                .execute(&self.pool)
                .await
                .map_err(failed)?;
        Ok(done.rows_affected() == 1)
    }
}
