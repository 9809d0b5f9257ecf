//! One HTTP binding's authorization: the rmcp [`AuthorizationManager`] its connections
//! share, restored from the token store, and the grant run when the server challenges.

use std::sync::Arc;

use m3_types::{Error, HttpServer, OAuthGrant, OAuthSettings, Reason, Result};
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, ClientCredentialsConfig, OAuthClientConfig,
    WWWAuthenticateParams,
};
use tokio::sync::Mutex;

use super::client::{CLIENT_NAME, ClientChoice, choose_client, scope_union};
use super::context::{AuthorizationNotice, OAuthContext, OAuthKey};
use super::credentials::{KeyedCredentials, RegistrationSlot};

/// The detail carrying a `401`'s `WWW-Authenticate` challenge.
pub(crate) const CHALLENGE_DETAIL: &str = "www_authenticate";

/// The challenge of a connection error that is a server's `401` asking for OAuth.
pub(crate) fn challenge_of(error: &Error) -> Option<String> {
    let details = error.details();
    let unauthorized = details.get("http_status").and_then(|s| s.as_u64()) == Some(401);
    let challenge = details.get(CHALLENGE_DETAIL)?.as_str()?;
    unauthorized.then(|| challenge.to_owned())
}

/// The manager requests are authorized with. Its content is replaced in place when the
/// binding authorizes again, so every connection holding it uses the new token.
pub(crate) type SharedManager = Arc<Mutex<AuthorizationManager>>;

/// A binding's authorizer, shared by its connection attempts and their requests (which
/// authorize again through it when the server refuses a token).
pub(crate) type SharedAuthorizer = Arc<Mutex<Authorizer>>;

/// The authorization of one binding.
pub(crate) struct Authorizer {
    server: String,
    url: String,
    private_addresses: bool,
    settings: OAuthSettings,
    context: OAuthContext,
    manager: Option<SharedManager>,
    /// The client m3 registered itself, kept beside the tokens in the store.
    registration: RegistrationSlot,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // rmcp's manager has no `Debug`; say whether there is one.
        f.debug_struct("Authorizer")
            .field("server", &self.server)
            .field("url", &self.url)
            .field("settings", &self.settings)
            .field("authorized", &self.manager.is_some())
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// The authorization of `server` at `url`, with tokens in `context`'s store.
    pub(crate) fn new(server: &HttpServer, url: &url::Url, context: OAuthContext) -> Self {
        Self {
            server: server.name.clone(),
            url: url.to_string(),
            private_addresses: server.trust == m3_types::ServerTrust::TrustedPrivate,
            settings: server.oauth.clone().unwrap_or_default(),
            context,
            manager: None,
            registration: RegistrationSlot::default(),
        }
    }

    /// The binding's name.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The manager requests are authorized with, once there is one.
    pub(crate) fn manager(&self) -> Option<SharedManager> {
        self.manager.clone()
    }

    /// Use `manager` from now on: in place of the current one, so the connections
    /// sharing it send its token.
    async fn install(&mut self, manager: AuthorizationManager) {
        match &self.manager {
            Some(shared) => *shared.lock().await = manager,
            None => self.manager = Some(Arc::new(Mutex::new(manager))),
        }
    }

    fn key(&self) -> OAuthKey {
        let client = self.settings.client_id.as_deref().unwrap_or("dynamic");
        OAuthKey::new(self.url.clone(), client)
    }

    fn credentials(&self) -> KeyedCredentials {
        KeyedCredentials {
            store: Arc::clone(&self.context.store),
            key: self.key(),
            registration: Arc::clone(&self.registration),
        }
    }

    fn failed(&self, step: &str, error: &AuthError) -> Error {
        Error::transport(format!(
            "MCP server '{}': OAuth {step} failed: {error}",
            self.server
        ))
        .with_detail("server", self.server.clone())
        .with_detail("oauth_step", step.to_owned())
        .with_reason(Reason::AuthorizationFailed)
    }

    async fn fresh_manager(&self) -> Result<AuthorizationManager> {
        // rmcp's OAuth client is reqwest without a bundled crypto provider, like ours
        // (`http::client`): rustls then uses the process default, which we make ring. A
        // connection restoring stored tokens builds it before any other client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let manager = if self.private_addresses {
            AuthorizationManager::new_allowing_private_addresses(self.url.as_str()).await
        } else {
            AuthorizationManager::new(self.url.as_str()).await
        };
        let mut manager = manager.map_err(|error| self.failed("setup", &error))?;
        manager.set_credential_store(self.credentials());
        Ok(manager)
    }

    /// Use the stored credentials of this binding, if any (discovering the
    /// authorization server again, so they can be refreshed).
    ///
    /// # Errors
    /// `transport_error` (reason `authorization_failed`) when the store or discovery
    /// fails.
    pub(crate) async fn restore(&mut self) -> Result<()> {
        if self.context.store.load(&self.key()).await?.is_none() {
            return Ok(());
        }
        let mut manager = self.fresh_manager().await?;
        let restored = manager
            .initialize_from_store()
            .await
            .map_err(|error| self.failed("restore", &error))?;
        if restored {
            // rmcp restores the client id alone; a confidential client needs its secret
            // back to refresh.
            if let Some(config) = self.confidential_client()? {
                manager
                    .configure_client(config)
                    .map_err(|error| self.failed("restore", &error))?;
            }
            tracing::info!(server = %self.server, "OAuth credentials restored from the store");
            self.install(manager).await;
        }
        Ok(())
    }

    /// The restored client with its secret, when it has one: the client m3 registered
    /// (its secret kept with the tokens), else the configured client and its secret.
    fn confidential_client(&self) -> Result<Option<OAuthClientConfig>> {
        if let Some(registration) = self.current_registration() {
            let config = registration.client_secret.map(|secret| {
                OAuthClientConfig::new(registration.client_id, registration.redirect_uri)
                    .with_client_secret(secret)
            });
            return Ok(config);
        }
        let secret = self
            .settings
            .client_secret(&self.server, &|name| std::env::var(name).ok())?;
        Ok(match (&self.settings.client_id, secret) {
            (Some(client_id), Some(secret)) => Some(
                OAuthClientConfig::new(client_id.clone(), self.url.clone())
                    .with_client_secret(secret),
            ),
            _ => None,
        })
    }

    fn current_registration(&self) -> Option<super::credentials::Registration> {
        self.registration.lock().ok().and_then(|slot| slot.clone())
    }

    /// Authorize again after the server refused a token with `403 insufficient_scope`
    /// (step-up): the union of the scopes granted so far and the ones `required`.
    ///
    /// # Errors
    /// `transport_error` with reason `insufficient_scope` (and `http_status` 403) when the
    /// challenge asks for no scope beyond those already granted (authorizing again
    /// could not help); else as [`Authorizer::authorize`].
    pub(crate) async fn step_up(&mut self, challenge: &str) -> Result<()> {
        let base = url::Url::parse(&self.url)
            .map_err(|error| Error::transport(format!("MCP server '{}': {error}", self.server)))?;
        let required = WWWAuthenticateParams::parse(challenge, &base).scope;
        let required = required.as_deref();
        let mut current = self.settings.scopes.clone();
        if let Some(manager) = &self.manager {
            current.extend(manager.lock().await.get_current_scopes().await);
        }
        current.extend(self.credentials().granted_scopes().await);
        let Some(scopes) = required.and_then(|required| scope_union(&current, required)) else {
            return Err(Error::transport(format!(
                "MCP server '{}' answered HTTP 403: the token's scope is insufficient, and the \
                 scope it asks for ({}) is no more than was granted",
                self.server,
                required.unwrap_or("none named")
            ))
            .with_detail("server", self.server.clone())
            .with_detail("http_status", 403)
            .with_reason(Reason::InsufficientScope));
        };
        tracing::info!(server = %self.server, scopes = %scopes.join(" "), "MCP server asks for a larger OAuth scope; authorizing again");
        self.authorize_with(challenge, Some(scopes)).await
    }

    /// Answer the server's `challenge`: discovery, registration and the binding's grant.
    /// The tokens are saved in the store; the next connection uses them.
    ///
    /// # Errors
    /// `transport_error` (reason `authorization_failed`) naming the failed step;
    /// `timeout` when nobody completes the authorization in time.
    pub(crate) async fn authorize(&mut self, challenge: &str) -> Result<()> {
        self.authorize_with(challenge, None).await
    }

    /// [`Authorizer::authorize`] asking for `scopes` (else the binding's, the
    /// challenge's or the server's, in that order).
    async fn authorize_with(&mut self, challenge: &str, scopes: Option<Vec<String>>) -> Result<()> {
        tracing::info!(server = %self.server, grant = %self.settings.grant, "MCP server asks for OAuth authorization");
        let mut manager = self.fresh_manager().await?;
        let resolution = manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await
            .map_err(|error| self.failed("discovery", &error))?;
        let metadata = resolution.metadata;
        manager.set_metadata(metadata.clone());
        let secret = self
            .settings
            .client_secret(&self.server, &|name| std::env::var(name).ok())?;
        let scopes = match scopes {
            Some(scopes) => scopes,
            None if !self.settings.scopes.is_empty() => self.settings.scopes.clone(),
            None => Vec::new(),
        };
        let manager = match self.settings.grant {
            OAuthGrant::ClientCredentials => {
                self.client_credentials(manager, secret, scopes).await?
            }
            OAuthGrant::AuthorizationCode => {
                self.authorization_code(manager, &metadata, challenge, secret, scopes)
                    .await?
            }
        };
        self.install(manager).await;
        Ok(())
    }

    async fn client_credentials(
        &self,
        mut manager: AuthorizationManager,
        secret: Option<String>,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager> {
        let (Some(client_id), Some(client_secret)) = (self.settings.client_id.clone(), secret)
        else {
            return Err(Error::model_validation(format!(
                "MCP server '{}': client_credentials needs a client_id and a client secret",
                self.server
            ))
            .with_reason(Reason::AuthorizationFailed));
        };
        let config = ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret,
            scopes,
            resource: Some(self.url.clone()),
        };
        manager
            .validate_client_credentials_metadata(&config)
            .and_then(|()| manager.configure_client_credentials(&config))
            .map_err(|error| self.failed("client credentials", &error))?;
        manager
            .exchange_client_credentials(&config)
            .await
            .map_err(|error| self.failed("client credentials", &error))?;
        Ok(manager)
    }

    async fn authorization_code(
        &self,
        mut manager: AuthorizationManager,
        metadata: &AuthorizationMetadata,
        challenge: &str,
        secret: Option<String>,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager> {
        let Some(prompt) = self.context.prompt.clone() else {
            return Err(Error::transport(format!(
                "MCP server '{}' needs OAuth authorization by a person, and nobody is there to open \
                 the authorization URL; configure client credentials for a worker",
                self.server
            ))
            .with_detail("server", self.server.clone())
            .with_detail("http_status", 401)
            .with_reason(Reason::AuthorizationFailed));
        };
        let scopes = if scopes.is_empty() {
            manager.select_initial_scopes(&[]).await
        } else {
            scopes
        };
        let (client, registration) = choose_client(
            &self.server,
            &mut manager,
            metadata,
            &self.settings,
            secret,
            self.current_registration(),
            &scopes,
        )
        .await?;
        if let Ok(mut slot) = self.registration.lock() {
            *slot = registration;
        }
        let ClientChoice {
            listener,
            client_id,
            client_secret,
        } = client;
        let mut request = AuthorizationRequest::new(listener.redirect_uri())
            .with_client_name(CLIENT_NAME)
            .with_challenge(challenge)
            .with_initial_scope_selection();
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
        if let Some(url) = &self.settings.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        if let Some(client_id) = client_id {
            request = request.with_preregistered_client(client_id);
        }
        if let Some(secret) = client_secret {
            request = request.with_client_secret(secret);
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| self.failed("registration", &error))?;
        let notice = AuthorizationNotice {
            server: self.server.clone(),
            server_url: self.url.clone(),
            url: session.get_authorization_url().to_owned(),
            redirect_uri: listener.redirect_uri().to_owned(),
        };
        prompt.show(&notice);
        let redirect = listener.wait(&self.server, self.context.wait).await;
        prompt.finished(&notice, redirect.is_ok());
        let redirect = redirect?;
        let callback = AuthorizationCallback::from_redirect_url(&redirect)
            .map_err(|error| self.failed("authorization", &error))?;
        session
            .handle_callback_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|error| self.failed("token exchange", &error))?;
        tracing::info!(server = %self.server, "OAuth authorization completed");
        Ok(session.auth_manager)
    }
}
