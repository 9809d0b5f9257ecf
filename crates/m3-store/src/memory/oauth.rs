//! [`MemoryOAuthRows`]: the memory backend's sealed OAuth credentials (see
//! [`oauth`](crate::oauth)), shared by the clones of one store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::Result;

use crate::oauth::OAuthCredentialRows;

/// Sealed credentials in memory, by (server URL, client).
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryOAuthRows {
    rows: Arc<Mutex<BTreeMap<(String, String), String>>>,
}

impl MemoryOAuthRows {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), String>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(server_url: &str, client: &str) -> (String, String) {
    (server_url.to_owned(), client.to_owned())
}

#[async_trait]
impl OAuthCredentialRows for MemoryOAuthRows {
    async fn sealed_credentials(&self, server_url: &str, client: &str) -> Result<Option<String>> {
        Ok(self.lock().get(&key(server_url, client)).cloned())
    }

    async fn put_credentials(&self, server_url: &str, client: &str, sealed: &str) -> Result<()> {
        self.lock()
            .insert(key(server_url, client), sealed.to_owned());
        Ok(())
    }

    async fn delete_credentials(&self, server_url: &str, client: &str) -> Result<bool> {
        Ok(self.lock().remove(&key(server_url, client)).is_some())
    }
}
