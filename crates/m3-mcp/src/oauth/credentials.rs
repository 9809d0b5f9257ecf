//! rmcp's [`CredentialStore`] over an [`OAuthTokenStore`]: the credentials of one
//! server and client, as JSON text under their [`OAuthKey`].
//!
//! The text is rmcp's [`StoredCredentials`] (the client id, the tokens, the granted
//! scopes and the issuer that minted them) with m3's [`Registration`] beside it: the
//! dynamically registered client's secret, its redirect URI and the issuer it was
//! registered with. rmcp keeps only the client id, so without this a confidential
//! client restored from the store could no longer refresh its token; the store seals
//! the whole text, the secret with the tokens.

use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use super::context::{OAuthKey, OAuthTokenStore};

/// A client m3 registered itself (RFC 7591) with one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Registration {
    /// The client id the authorization server issued.
    pub(super) client_id: String,
    /// The client secret it issued, if any (a confidential client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) client_secret: Option<String>,
    /// The redirect URI registered (the loopback listener's).
    pub(super) redirect_uri: String,
    /// The scopes registered; an authorization server may refuse others for this client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) scopes: Vec<String>,
    /// The authorization server's issuer it was registered with; another issuer (the
    /// protected resource moved to a new authorization server) needs a new registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) issuer: Option<String>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("redirect_uri", &self.redirect_uri)
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// The stored text: rmcp's credentials and, for a dynamically registered client, its
/// registration.
#[derive(Serialize, Deserialize)]
struct Envelope {
    #[serde(flatten)]
    credentials: StoredCredentials,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    m3_registration: Option<Registration>,
}

/// The registration of the binding's current client, shared by the authorizer (which
/// registers) and the credential store (which keeps it beside the tokens).
pub(super) type RegistrationSlot = Arc<Mutex<Option<Registration>>>;

/// The credentials of one key in a caller's token store.
#[derive(Debug, Clone)]
pub(super) struct KeyedCredentials {
    pub(super) store: Arc<dyn OAuthTokenStore>,
    pub(super) key: OAuthKey,
    pub(super) registration: RegistrationSlot,
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

impl KeyedCredentials {
    /// The scopes granted with the stored token (none when there is none): a manager
    /// restored from the store does not know them.
    pub(super) async fn granted_scopes(&self) -> Vec<String> {
        match self.load().await {
            Ok(Some(credentials)) => credentials.granted_scopes,
            _ => Vec::new(),
        }
    }

    fn set_registration(&self, registration: Option<Registration>) {
        if let Ok(mut slot) = self.registration.lock() {
            *slot = registration;
        }
    }

    /// The registration to keep with `credentials`: the current one when it is the
    /// client those credentials belong to.
    fn registration_for(&self, credentials: &StoredCredentials) -> Option<Registration> {
        let slot = self.registration.lock().ok()?;
        slot.clone()
            .filter(|registration| registration.client_id == credentials.client_id)
    }
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
        let Some(envelope) = text.and_then(|text| serde_json::from_str::<Envelope>(&text).ok())
        else {
            return Ok(None);
        };
        let registration = envelope
            .m3_registration
            .filter(|registration| registration.client_id == envelope.credentials.client_id);
        self.set_registration(registration);
        Ok(Some(envelope.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let envelope = Envelope {
            m3_registration: self.registration_for(&credentials),
            credentials,
        };
        let text = serde_json::to_string(&envelope).map_err(|_| {
            AuthError::CredentialStoreError("OAuth credentials cannot be encoded".to_owned())
        })?;
        self.store
            .save(&self.key, text)
            .await
            .map_err(|error| store_error(&self.key, &error))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.set_registration(None);
        self.store
            .clear(&self.key)
            .await
            .map_err(|error| store_error(&self.key, &error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::MemoryTokenStore;

    fn keyed(store: Arc<MemoryTokenStore>) -> KeyedCredentials {
        KeyedCredentials {
            store,
            key: OAuthKey::new("http://127.0.0.1:1/mcp", "dynamic"),
            registration: RegistrationSlot::default(),
        }
    }

    fn registration(client_id: &str) -> Registration {
        Registration {
            client_id: client_id.to_owned(),
            client_secret: Some("s3cret".to_owned()),
            redirect_uri: "http://127.0.0.1:4000/callback".to_owned(),
            scopes: vec!["a".to_owned()],
            issuer: Some("http://as.example".to_owned()),
        }
    }

    #[tokio::test]
    async fn the_registration_is_kept_with_its_clients_tokens_and_restored() {
        let store = Arc::new(MemoryTokenStore::default());
        let writer = keyed(Arc::clone(&store));
        *writer.registration.lock().unwrap() = Some(registration("c1"));
        let credentials = StoredCredentials::new("c1".to_owned(), None, vec!["a".to_owned()], None)
            .with_issuer(Some("http://as.example".to_owned()));
        writer.save(credentials).await.unwrap();

        let reader = keyed(store);
        let loaded = reader.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "c1");
        assert_eq!(loaded.issuer.as_deref(), Some("http://as.example"));
        assert_eq!(
            *reader.registration.lock().unwrap(),
            Some(registration("c1"))
        );
        assert!(!format!("{:?}", registration("c1")).contains("s3cret"));
    }

    #[tokio::test]
    async fn another_clients_registration_is_not_kept() {
        let store = Arc::new(MemoryTokenStore::default());
        let writer = keyed(Arc::clone(&store));
        *writer.registration.lock().unwrap() = Some(registration("old"));
        writer
            .save(StoredCredentials::new("new".to_owned(), None, vec![], None))
            .await
            .unwrap();
        let reader = keyed(store);
        reader.load().await.unwrap().unwrap();
        assert_eq!(*reader.registration.lock().unwrap(), None);
        reader.clear().await.unwrap();
        assert!(reader.load().await.unwrap().is_none());
    }
}
