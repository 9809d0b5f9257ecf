//! [`StoreOAuthTokens`]: the MCP client's OAuth token store over the store's sealed
//! credentials, so every worker on a store shares (and refreshes) the same tokens and none
//! is ever written in the clear.

use futures_util::future::BoxFuture;
use m3_mcp::oauth::{OAuthKey, OAuthTokenStore};
use m3_store::oauth::SealedOAuthCredentials;
use m3_types::Result;

/// The store's sealed OAuth credentials as the MCP client's token store.
#[derive(Debug, Clone)]
pub struct StoreOAuthTokens {
    sealed: SealedOAuthCredentials,
}

impl StoreOAuthTokens {
    /// Tokens kept in `sealed`.
    pub fn new(sealed: SealedOAuthCredentials) -> Self {
        Self { sealed }
    }
}

impl OAuthTokenStore for StoreOAuthTokens {
    fn load<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(self.sealed.load(&key.server_url, &key.client))
    }

    fn save<'a>(&'a self, key: &'a OAuthKey, credentials: String) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.sealed
                .save(&key.server_url, &key.client, &credentials)
                .await
        })
    }

    fn clear<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.sealed.clear(&key.server_url, &key.client))
    }
}
