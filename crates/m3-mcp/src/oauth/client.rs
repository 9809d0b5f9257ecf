//! Which OAuth client the authorization code grant uses, and where its redirect comes
//! back: a configured client, a client ID metadata document, the client m3 registered
//! earlier with the same authorization server, or a new dynamic registration.
//!
//! A registered client is reused only with the authorization server it was registered
//! with (SEP-2352: when the protected resource names another one, m3 registers again
//! and never presents the old client there), only on its registered redirect URI, and
//! only for scopes it was registered for (an authorization server may refuse others to
//! it, so a step-up to a new scope registers again).

use m3_types::{Error, OAuthSettings, Reason, Result};
use rmcp::transport::auth::{AuthorizationManager, AuthorizationMetadata};

use super::callback::CallbackListener;
use super::credentials::Registration;

/// The client name sent with dynamic client registration.
pub(super) const CLIENT_NAME: &str = "m3";

/// The client of one authorization: its id and secret to present (`None`: rmcp picks
/// the client ID metadata document URL), and the listener its redirect comes to.
#[derive(Debug)]
pub(super) struct ClientChoice {
    pub(super) listener: CallbackListener,
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
}

/// `current` with the scopes of `required` added; `None` when `required` adds none.
pub(super) fn scope_union(current: &[String], required: &str) -> Option<Vec<String>> {
    let mut scopes: Vec<String> = Vec::new();
    for scope in current {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    let before = scopes.len();
    for scope in required.split_whitespace() {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    (scopes.len() > before).then_some(scopes)
}

/// Whether the authorization server takes a client ID metadata document URL as the
/// client id (SEP-991).
fn supports_metadata_documents(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// The loopback port a registered redirect URI names.
fn redirect_port(registration: &Registration) -> Option<u16> {
    url::Url::parse(&registration.redirect_uri).ok()?.port()
}

/// Choose the client for an authorization with `metadata`'s server, registering one
/// when needed; `registered` is the client m3 registered before, if any. Also the
/// registration to keep beside the tokens (the reused or the new one; `None` for a
/// client m3 did not register).
///
/// # Errors
/// `transport_error` (reason `authorization_failed`) when the listener cannot be bound
/// or the registration fails.
pub(super) async fn choose_client(
    server: &str,
    manager: &mut AuthorizationManager,
    metadata: &AuthorizationMetadata,
    settings: &OAuthSettings,
    secret: Option<String>,
    registered: Option<Registration>,
    scopes: &[String],
) -> Result<(ClientChoice, Option<Registration>)> {
    let port = settings.callback_port.unwrap_or(0);
    if let Some(client_id) = &settings.client_id {
        let listener = CallbackListener::bind(server, port).await?;
        let choice = ClientChoice {
            listener,
            client_id: Some(client_id.clone()),
            client_secret: secret,
        };
        return Ok((choice, None));
    }
    if settings.client_metadata_url.is_some() && supports_metadata_documents(metadata) {
        let listener = CallbackListener::bind(server, port).await?;
        let choice = ClientChoice {
            listener,
            client_id: None,
            client_secret: None,
        };
        return Ok((choice, None));
    }
    let reusable = |r: &Registration| {
        r.issuer == metadata.issuer && scopes.iter().all(|scope| r.scopes.contains(scope))
    };
    if let Some(registration) = registered.filter(reusable)
        && let Some(port) = redirect_port(&registration)
        && let Ok(listener) = CallbackListener::bind(server, port).await
        && listener.redirect_uri() == registration.redirect_uri
    {
        tracing::info!(
            server,
            "reusing the OAuth client registered with this authorization server"
        );
        let choice = ClientChoice {
            listener,
            client_id: Some(registration.client_id.clone()),
            client_secret: registration.client_secret.clone(),
        };
        return Ok((choice, Some(registration)));
    }
    let listener = CallbackListener::bind(server, port).await?;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let config = manager
        .register_client(CLIENT_NAME, listener.redirect_uri(), &scope_refs)
        .await
        .map_err(|error| {
            Error::transport(format!(
                "MCP server '{server}': OAuth registration failed: {error}"
            ))
            .with_detail("server", server.to_owned())
            .with_detail("oauth_step", "registration")
            .with_reason(Reason::AuthorizationFailed)
        })?;
    tracing::info!(server, issuer = ?metadata.issuer, "registered an OAuth client with the authorization server");
    let registration = Registration {
        client_id: config.client_id.clone(),
        client_secret: config.client_secret.clone(),
        redirect_uri: listener.redirect_uri().to_owned(),
        scopes: scopes.to_vec(),
        issuer: metadata.issuer.clone(),
    };
    let choice = ClientChoice {
        listener,
        client_id: Some(config.client_id),
        client_secret: config.client_secret,
    };
    Ok((choice, Some(registration)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(scopes: &[&str]) -> Vec<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_union_adds_the_required_scopes_once_and_keeps_the_granted_ones_first() {
        assert_eq!(
            scope_union(&owned(&["mcp:basic"]), "mcp:write"),
            Some(owned(&["mcp:basic", "mcp:write"]))
        );
        assert_eq!(
            scope_union(&owned(&["a", "a"]), "b  a b"),
            Some(owned(&["a", "b"]))
        );
    }

    #[test]
    fn a_challenge_asking_for_nothing_new_is_no_step_up() {
        assert_eq!(scope_union(&owned(&["mcp:admin"]), "mcp:admin"), None);
        assert_eq!(scope_union(&owned(&["a", "b"]), ""), None);
    }
}
