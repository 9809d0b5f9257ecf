//! [`AuthorizedClient`]: an HTTP client (the connection's `ObservedClient`) with OAuth.
//! Each request carries the binding's access token once there is one (refreshed by
//! rmcp's manager when it is about to expire). A request the server refuses is
//! recovered at most once per cause, then retried:
//! - `401` to a request that carried a token: one refresh; when that does not help, the
//!   binding authorizes again from the new challenge (the protected resource may name
//!   another authorization server now, which then gets a new registration);
//! - `403 insufficient_scope`: one step-up, authorizing again with the union of the
//!   granted scopes and the ones the challenge names.
//!
//! A refusal that remains, or a recovery that fails, becomes the connection's fault (a
//! refusal with the server's challenge, so a `401` before any token lets the connection
//! authorize and connect again).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

use crate::fault::{ConnectionFault, FaultSender};
use crate::oauth::{SharedAuthorizer, SharedManager};

type HttpError = StreamableHttpError<reqwest::Error>;

/// Reports an authorization failure as the connection's fault.
pub(crate) type Report = Arc<dyn Fn(&HttpError) + Send + Sync>;

/// See the module docs.
#[derive(Clone)]
pub(crate) struct AuthorizedClient<C> {
    inner: C,
    authorizer: Option<SharedAuthorizer>,
    server: Arc<str>,
    report: Report,
    faults: FaultSender,
}

impl<C: std::fmt::Debug> std::fmt::Debug for AuthorizedClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedClient")
            .field("inner", &self.inner)
            .field("oauth", &self.authorizer.is_some())
            .finish_non_exhaustive()
    }
}

impl<C: StreamableHttpClient<Error = reqwest::Error>> AuthorizedClient<C> {
    pub(super) fn new(
        inner: C,
        authorizer: Option<SharedAuthorizer>,
        server: Arc<str>,
        report: Report,
        faults: FaultSender,
    ) -> Self {
        Self {
            inner,
            authorizer,
            server,
            report,
            faults,
        }
    }

    /// The manager tokens come from, once the binding has one.
    async fn manager(&self) -> Option<SharedManager> {
        self.authorizer.as_ref()?.lock().await.manager()
    }

    /// The access token to send, if there is one (`explicit` wins: rmcp's own).
    async fn token(&self, explicit: Option<String>) -> Result<Option<String>, HttpError> {
        if explicit.is_some() {
            return Ok(explicit);
        }
        let Some(manager) = self.manager().await else {
            return Ok(None);
        };
        let token = manager.lock().await.get_access_token().await;
        match token {
            Ok(token) => Ok(Some(token)),
            // No token (yet, or any more): the request goes out without one, and the
            // server's challenge starts authorization.
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(error) => Err(StreamableHttpError::Auth(error)),
        }
    }

    /// A fresh token after the server refused `sent`, when a refresh gives one.
    async fn refreshed(&self, sent: &str) -> Option<String> {
        let manager = self.manager().await?;
        let manager = manager.lock().await;
        // A successful refresh is saved in the store, where the manager reads it back.
        let fresh = match manager.refresh_token().await {
            Ok(_) => manager.get_access_token().await,
            Err(error) => Err(error),
        };
        match fresh {
            Ok(token) => (token != sent).then_some(token),
            Err(error) => {
                tracing::info!(server = %self.server, %error, "OAuth token refresh after a 401 failed");
                None
            }
        }
    }

    /// Authorize the binding again after the server refused `sent` with `error` (a new
    /// authorization for a `401`, a step-up for a `403`); the new token. A failure is
    /// recorded as the connection's fault.
    async fn reauthorized(&self, sent: &str, error: &HttpError) -> Option<String> {
        let authorizer = self.authorizer.as_ref()?;
        let challenge = error.auth_challenge()?;
        let mut authorizer = authorizer.lock().await;
        // Another request may have authorized again while this one waited for the lock.
        let current = match authorizer.manager() {
            Some(manager) => manager.lock().await.get_access_token().await.ok(),
            None => None,
        };
        if let Some(token) = current.filter(|token| token != sent) {
            return Some(token);
        }
        let outcome = match error {
            StreamableHttpError::InsufficientScope(_) => authorizer.step_up(challenge).await,
            _ => authorizer.authorize(challenge).await,
        };
        if let Err(failure) = outcome {
            tracing::info!(server = %authorizer.server(), error = %failure.message(), "OAuth authorization during the connection failed");
            self.faults.raise(ConnectionFault::from_error(&failure));
            return None;
        }
        let manager = authorizer.manager()?;
        manager.lock().await.get_access_token().await.ok()
    }

    /// The token to send again after the server refused `sent` with `error`, and
    /// whether it came from a refresh (`refreshed`: one was tried already).
    async fn recovery(
        &self,
        error: Option<&HttpError>,
        sent: Option<&String>,
        refreshed: bool,
    ) -> Option<(String, bool)> {
        let (Some(error), Some(sent)) = (error, sent) else {
            return None;
        };
        match error {
            StreamableHttpError::AuthRequired(_) if !refreshed => {
                match self.refreshed(sent).await {
                    Some(fresh) => Some((fresh, true)),
                    None => self.reauthorized(sent, error).await.map(|t| (t, false)),
                }
            }
            StreamableHttpError::AuthRequired(_) | StreamableHttpError::InsufficientScope(_) => {
                self.reauthorized(sent, error).await.map(|t| (t, false))
            }
            _ => None,
        }
    }

    /// Report an authorization failure of a request as the connection's fault.
    fn report(&self, message: &ClientJsonRpcMessage, error: &HttpError) {
        if error.auth_challenge().is_some() && matches!(message, ClientJsonRpcMessage::Request(_)) {
            (self.report)(error);
        }
    }
}

impl<C> StreamableHttpClient for AuthorizedClient<C>
where
    C: StreamableHttpClient<Error = reqwest::Error> + Send + Sync,
{
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let token = self.token(auth_header).await?;
        let send = |token: Option<String>| {
            self.inner.post_message(
                Arc::clone(&uri),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        };
        let mut result = send(token.clone()).await;
        // At most a refresh and one authorization for a `401`, one step-up for a `403`.
        let (mut sent, mut refreshed, mut authorized) = (token, false, false);
        while !authorized {
            let error = result.as_ref().err();
            let Some((fresh, was_refresh)) = self.recovery(error, sent.as_ref(), refreshed).await
            else {
                break;
            };
            refreshed |= was_refresh;
            authorized = !was_refresh;
            result = send(Some(fresh.clone())).await;
            sent = Some(fresh);
        }
        if let Err(error) = &result {
            self.report(&message, error);
        }
        result
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let token = self.token(auth_header).await?;
        self.inner
            .delete_session(uri, session_id, token, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let token = self.token(auth_header).await?;
        self.inner
            .get_stream(uri, session_id, last_event_id, token, custom_headers)
            .await
    }
}
