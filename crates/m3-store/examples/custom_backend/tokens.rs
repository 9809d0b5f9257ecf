//! API tokens of the directory store: one file, `tokens.json`, with every token's row (its
//! name, the digest of its secret and its text), read and written under the store's lock
//! like everything else. [`RowTokenStore`](m3_store::tokens::RowTokenStore) makes every
//! decision; this file only keeps rows.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::ExecutionStore;
use m3_store::tokens::TokenRows;
use m3_types::{Clock, Result};
use serde::{Deserialize, Serialize};

use crate::store::DirectoryStore;
use crate::tables::read_table;

/// The file, relative to the directory.
const TOKENS_FILE: &str = "tokens.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokensFile {
    /// The rows, oldest first.
    rows: Vec<TokenRow>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TokenRow {
    id: String,
    name: String,
    digest: String,
    text: String,
}

#[async_trait]
impl TokenRows for DirectoryStore {
    fn clock(&self) -> Arc<dyn Clock> {
        ExecutionStore::clock(self)
    }

    async fn insert_token(&self, id: &str, name: &str, digest: &str, text: &str) -> Result<bool> {
        let row = TokenRow {
            id: id.to_owned(),
            name: name.to_owned(),
            digest: digest.to_owned(),
            text: text.to_owned(),
        };
        self.change_table(TOKENS_FILE, move |file: &mut TokensFile| {
            if file
                .rows
                .iter()
                .any(|r| r.name == row.name || r.digest == row.digest)
            {
                return (false, false);
            }
            file.rows.push(row);
            (true, true)
        })
        .await
    }

    async fn token_by_digest(&self, digest: &str) -> Result<Option<String>> {
        let digest = digest.to_owned();
        self.read(move |locked, _| {
            Ok(read_table::<TokensFile>(locked, TOKENS_FILE)?
                .rows
                .into_iter()
                .find(|row| row.digest == digest)
                .map(|row| row.text))
        })
        .await
    }

    async fn all_tokens(&self) -> Result<Vec<String>> {
        self.read(|locked, _| {
            Ok(read_table::<TokensFile>(locked, TOKENS_FILE)?
                .rows
                .into_iter()
                .map(|row| row.text)
                .collect())
        })
        .await
    }

    async fn delete_token(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.change_table(TOKENS_FILE, move |file: &mut TokensFile| {
            let before = file.rows.len();
            file.rows.retain(|row| row.id != id);
            let removed = file.rows.len() != before;
            (removed, removed)
        })
        .await
    }
}
