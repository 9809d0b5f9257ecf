//! The backend toolkit for OAuth credentials: a backend keeps rows of (server URL, client,
//! sealed text) ([`OAuthCredentialRows`]) and [`SealedOAuthCredentials`] seals and opens
//! them with the application's key ([`super::rules`]).

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::Result;

use super::rules::{self, CredentialKey};

/// What a backend does for OAuth credentials: keep one sealed text per (server URL,
/// client). Nothing here decides, and nothing here is ever in the clear.
#[async_trait]
pub trait OAuthCredentialRows: std::fmt::Debug + Send + Sync + 'static {
    /// The sealed text under (`server_url`, `client`).
    async fn sealed_credentials(&self, server_url: &str, client: &str) -> Result<Option<String>>;

    /// Keeps `sealed` under (`server_url`, `client`), replacing what was there.
    async fn put_credentials(&self, server_url: &str, client: &str, sealed: &str) -> Result<()>;

    /// Removes the row under (`server_url`, `client`); whether there was one.
    async fn delete_credentials(&self, server_url: &str, client: &str) -> Result<bool>;
}

/// The credentials of any [`OAuthCredentialRows`], sealed with a [`CredentialKey`] (and
/// opened with it or with the previous key during a rotation).
#[derive(Debug, Clone)]
pub struct SealedOAuthCredentials {
    rows: Arc<dyn OAuthCredentialRows>,
    key: CredentialKey,
    previous: Option<CredentialKey>,
}

impl SealedOAuthCredentials {
    /// The credentials in `rows`, sealed with `key`.
    pub fn new(rows: Arc<dyn OAuthCredentialRows>, key: CredentialKey) -> Self {
        Self {
            rows,
            key,
            previous: None,
        }
    }

    /// Also opens credentials sealed with `previous` (a rotation: each is sealed again
    /// with the current key when it is next loaded).
    #[must_use]
    pub fn with_previous_key(mut self, previous: CredentialKey) -> Self {
        self.previous = Some(previous);
        self
    }

    /// The credentials under (`server_url`, `client`), in the clear; `None` when there are
    /// none or they were sealed with a key this store does not hold (then the server's
    /// challenge starts a new authorization).
    ///
    /// # Errors
    /// `storage_error` from the rows.
    pub async fn load(&self, server_url: &str, client: &str) -> Result<Option<String>> {
        let Some(sealed) = self.rows.sealed_credentials(server_url, client).await? else {
            return Ok(None);
        };
        let aad = rules::binding(server_url, client);
        if let Some(text) = rules::open(&self.key, &sealed, &aad) {
            return Ok(Some(text));
        }
        let Some(text) = self
            .previous
            .as_ref()
            .and_then(|previous| rules::open(previous, &sealed, &aad))
        else {
            tracing::info!(
                server_url,
                client,
                "stored OAuth credentials were sealed with another key; not used"
            );
            return Ok(None);
        };
        self.save(server_url, client, &text).await?;
        Ok(Some(text))
    }

    /// Seals `credentials` and keeps them under (`server_url`, `client`).
    ///
    /// # Errors
    /// `storage_error` from the rows or the random source.
    pub async fn save(&self, server_url: &str, client: &str, credentials: &str) -> Result<()> {
        let aad = rules::binding(server_url, client);
        let sealed = rules::seal(&self.key, credentials, &aad)?;
        self.rows.put_credentials(server_url, client, &sealed).await
    }

    /// Forgets the credentials under (`server_url`, `client`).
    ///
    /// # Errors
    /// `storage_error` from the rows.
    pub async fn clear(&self, server_url: &str, client: &str) -> Result<()> {
        self.rows
            .delete_credentials(server_url, client)
            .await
            .map(|_| ())
    }
}
