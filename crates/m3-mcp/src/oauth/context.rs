//! The types a caller gives a connection for OAuth: where tokens are kept
//! ([`OAuthTokenStore`]) and who is shown an authorization URL ([`AuthorizationPrompt`]),
//! together an [`OAuthContext`].

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use m3_types::Result;

/// Where one client's tokens for one server are kept: the server's URL and the client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct OAuthKey {
    /// The MCP endpoint URL.
    pub server_url: String,
    /// The configured client id, or `"dynamic"` for a client registered on the fly (the
    /// registered id is inside the stored credentials).
    pub client: String,
}

impl OAuthKey {
    /// The key of `client` at `server_url`.
    pub fn new(server_url: impl Into<String>, client: impl Into<String>) -> Self {
        Self {
            server_url: server_url.into(),
            client: client.into(),
        }
    }
}

/// Persistence for OAuth credentials, implemented by higher layers with their store.
///
/// The value is an opaque JSON text holding the tokens: implementations keep it secret
/// (encrypted at rest), never log it, and return exactly what was saved.
pub trait OAuthTokenStore: Send + Sync + fmt::Debug {
    /// The credentials saved under `key`, if any.
    fn load<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<Option<String>>>;
    /// Save `credentials` under `key`, replacing what was there.
    fn save<'a>(&'a self, key: &'a OAuthKey, credentials: String) -> BoxFuture<'a, Result<()>>;
    /// Forget the credentials under `key`.
    fn clear<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<()>>;
}

/// Credentials kept in this process only (the default).
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    entries: Mutex<std::collections::BTreeMap<OAuthKey, String>>,
}

impl OAuthTokenStore for MemoryTokenStore {
    fn load<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<Option<String>>> {
        let found = self
            .entries
            .lock()
            .ok()
            .and_then(|entries| entries.get(key).cloned());
        Box::pin(async move { Ok(found) })
    }

    fn save<'a>(&'a self, key: &'a OAuthKey, credentials: String) -> BoxFuture<'a, Result<()>> {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(key.clone(), credentials);
        }
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, key: &'a OAuthKey) -> BoxFuture<'a, Result<()>> {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
        Box::pin(async { Ok(()) })
    }
}

/// A person's authorization to ask for: shown like a URL-mode round.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthorizationNotice {
    /// The server binding's name.
    pub server: String,
    /// The MCP endpoint.
    pub server_url: String,
    /// The authorization server's URL to open in a browser (it carries the PKCE
    /// challenge and `state`, never a secret).
    pub url: String,
    /// The loopback address waiting for the redirect.
    pub redirect_uri: String,
}

/// Shows a person the authorization URL of the authorization code grant.
pub trait AuthorizationPrompt: Send + Sync + fmt::Debug {
    /// Show `notice`; the client then waits for the redirect on `notice.redirect_uri`.
    fn show(&self, notice: &AuthorizationNotice);

    /// The wait for `notice`'s redirect ended: `completed` when it came, `false` when
    /// nobody authorized in time. A place still showing the URL stops (default: nothing).
    fn finished(&self, notice: &AuthorizationNotice, completed: bool) {
        let _ = (notice, completed);
    }
}

/// What a connection needs for OAuth: where tokens are kept, who is shown an
/// authorization URL, and how long a person has to authorize.
#[derive(Debug, Clone)]
#[must_use]
pub struct OAuthContext {
    pub(crate) store: Arc<dyn OAuthTokenStore>,
    pub(crate) prompt: Option<Arc<dyn AuthorizationPrompt>>,
    pub(crate) wait: Duration,
}

impl Default for OAuthContext {
    fn default() -> Self {
        Self::new()
    }
}

impl OAuthContext {
    /// Tokens in memory, nobody to show a URL to (the authorization code grant then
    /// fails with `authorization_failed`), 5 minutes to authorize.
    pub fn new() -> Self {
        Self {
            store: Arc::new(MemoryTokenStore::default()),
            prompt: None,
            wait: Duration::from_secs(300),
        }
    }

    /// Keep tokens in `store`.
    pub fn with_store(mut self, store: Arc<dyn OAuthTokenStore>) -> Self {
        self.store = store;
        self
    }

    /// Who is shown authorization URLs, if anybody.
    pub fn prompt(&self) -> Option<Arc<dyn AuthorizationPrompt>> {
        self.prompt.clone()
    }

    /// Show authorization URLs through `prompt`.
    pub fn with_prompt(mut self, prompt: Arc<dyn AuthorizationPrompt>) -> Self {
        self.prompt = Some(prompt);
        self
    }

    /// How long the loopback listener waits for the redirect (default 5 minutes).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
}
