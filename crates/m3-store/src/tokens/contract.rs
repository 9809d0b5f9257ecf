//! [`TokenStore`]: the contract every backend's tokens meet.

use async_trait::async_trait;
use m3_types::Result;

use super::record::{ApiToken, NewToken, TokenCheck, TokenSecret};

/// The store's API tokens
/// ([`ExecutionStore::token_store`](crate::ExecutionStore::token_store)).
#[async_trait]
pub trait TokenStore: std::fmt::Debug + Send + Sync + 'static {
    /// Makes a token and returns it with its secret (shown once; the store keeps only its
    /// digest).
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_token`) for a bad name or a zero lifetime, or a
    /// name another token has (reason `token_name_taken`); nothing is made then.
    async fn create_token(&self, new: NewToken) -> Result<(ApiToken, TokenSecret)>;

    /// Every token, oldest first (never a secret).
    async fn list_tokens(&self) -> Result<Vec<ApiToken>>;

    /// Revokes the token with this id or name: it stops working for every process on the
    /// store at once, and is gone from the list.
    ///
    /// # Errors
    /// `not_found` when no token has that id or name.
    async fn revoke_token(&self, id_or_name: &str) -> Result<ApiToken>;

    /// What the credential `secret` is, at the store's time now.
    async fn authenticate(&self, secret: &str) -> Result<TokenCheck>;
}
