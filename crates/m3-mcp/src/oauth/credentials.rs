//! rmcp's [`CredentialStore`] over an [`OAuthTokenStore`]: the credentials of one
//! server and client, as JSON text under their [`OAuthKey`].

use std::sync::Arc;

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use super::context::{OAuthKey, OAuthTokenStore};

/// The credentials of one key in a caller's token store.
#[derive(Debug, Clone)]
pub(super) struct KeyedCredentials {
    pub(super) store: Arc<dyn OAuthTokenStore>,
    pub(super) key: OAuthKey,
}

/// A store failure as rmcp's credential-store error (names the key, never a value).
fn store_error(key: &OAuthKey, error: &m3_types::Error) -> AuthError {
    AuthError::CredentialStoreError(format!(
        "OAuth credentials of '{}' for {}: {}",
        key.client,
        key.server_url,
        error.message()
    ))
}

#[async_trait::async_trait]
impl CredentialStore for KeyedCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = self
            .store
            .load(&self.key)
            .await
            .map_err(|error| store_error(&self.key, &error))?;
        // Unreadable credentials (another version's shape) are as good as none: the
        // server's challenge then starts a new authorization.
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials).map_err(|_| {
            AuthError::CredentialStoreError("OAuth credentials cannot be encoded".to_owned())
        })?;
        self.store
            .save(&self.key, text)
            .await
            .map_err(|error| store_error(&self.key, &error))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store
            .clear(&self.key)
            .await
            .map_err(|error| store_error(&self.key, &error))
    }
}
