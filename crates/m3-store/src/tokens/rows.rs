//! The backend toolkit for tokens: a backend that keeps one row per token, found by name and
//! by the digest of its secret ([`TokenRows`]), gets the whole [`TokenStore`] from
//! [`RowTokenStore`], with every decision made by [`super::rules`].

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Error, Result};

use super::contract::TokenStore;
use super::record::{ApiToken, NewToken, TokenCheck, TokenSecret};
use super::rules;

/// What a backend does for tokens: keep rows of (id, name, digest, text). Names and digests
/// are unique. Nothing here decides.
#[async_trait]
pub trait TokenRows: std::fmt::Debug + Send + Sync + 'static {
    /// The store's clock (creation and expiry).
    fn clock(&self) -> Arc<dyn Clock>;

    /// Adds a token's row; `false` (and nothing added) when a row has the same name.
    async fn insert_token(&self, id: &str, name: &str, digest: &str, text: &str) -> Result<bool>;

    /// The text of the token whose secret has `digest`.
    async fn token_by_digest(&self, digest: &str) -> Result<Option<String>>;

    /// Every token's text, oldest first.
    async fn all_tokens(&self) -> Result<Vec<String>>;

    /// Removes the row of the token with this id; whether there was one.
    async fn delete_token(&self, id: &str) -> Result<bool>;
}

/// The [`TokenStore`] over any [`TokenRows`].
#[derive(Debug, Clone)]
pub struct RowTokenStore<R> {
    rows: R,
}

impl<R: TokenRows> RowTokenStore<R> {
    /// The store over `rows`.
    pub fn new(rows: R) -> Self {
        Self { rows }
    }

    fn now(&self) -> time::OffsetDateTime {
        crate::store_now(self.rows.clock().as_ref())
    }
}

#[async_trait]
impl<R: TokenRows> TokenStore for RowTokenStore<R> {
    async fn create_token(&self, new: NewToken) -> Result<(ApiToken, TokenSecret)> {
        let (token, secret) = rules::make(&new, self.now())?;
        let text = rules::encode(&token)?;
        let digest = rules::digest(secret.expose());
        if self
            .rows
            .insert_token(&token.id, &token.name, &digest, &text)
            .await?
        {
            Ok((token, secret))
        } else {
            Err(rules::name_taken(&token.name))
        }
    }

    async fn list_tokens(&self) -> Result<Vec<ApiToken>> {
        self.rows
            .all_tokens()
            .await?
            .iter()
            .map(|text| rules::decode(text))
            .collect()
    }

    async fn revoke_token(&self, id_or_name: &str) -> Result<ApiToken> {
        let tokens = self.list_tokens().await?;
        let found = tokens
            .into_iter()
            .find(|token| token.id == id_or_name || token.name == id_or_name);
        let missing = || {
            Error::not_found(format!("no token has the id or name '{id_or_name}'"))
                .with_detail("token", id_or_name)
        };
        let token = found.ok_or_else(missing)?;
        if self.rows.delete_token(&token.id).await? {
            Ok(token)
        } else {
            Err(missing())
        }
    }

    async fn authenticate(&self, secret: &str) -> Result<TokenCheck> {
        if !secret.starts_with(rules::SECRET_PREFIX) {
            return Ok(TokenCheck::Unknown);
        }
        let found = self.rows.token_by_digest(&rules::digest(secret)).await?;
        let token = found.as_deref().map(rules::decode).transpose()?;
        Ok(rules::check(token, self.now()))
    }
}
