//! [`AuthorizedClient`]: an HTTP client (the connection's `ObservedClient`) with OAuth. Each request carries the
//! binding's access token once there is one (refreshed by rmcp's manager when it is
//! about to expire); a `401` to a request that carried a token is answered by one
//! refresh and one retry. A `401` or `403` that remains becomes the connection's fault,
//! with the server's challenge, so the connection can authorize and connect again.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthError, AuthorizationManager};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;
use tokio::sync::Mutex;

type HttpError = StreamableHttpError<reqwest::Error>;

/// Reports an authorization failure as the connection's fault.
pub(crate) type Report = Arc<dyn Fn(&HttpError) + Send + Sync>;

/// The manager a binding's connections share.
pub(crate) type SharedManager = Arc<Mutex<AuthorizationManager>>;

/// See the module docs.
#[derive(Clone)]
pub(crate) struct AuthorizedClient<C> {
    inner: C,
    manager: Option<SharedManager>,
    server: Arc<str>,
    report: Report,
}

impl<C: std::fmt::Debug> std::fmt::Debug for AuthorizedClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedClient")
            .field("inner", &self.inner)
            .field("authorized", &self.manager.is_some())
            .finish_non_exhaustive()
    }
}

impl<C: StreamableHttpClient<Error = reqwest::Error>> AuthorizedClient<C> {
    pub(super) fn new(
        inner: C,
        manager: Option<SharedManager>,
        server: Arc<str>,
        report: Report,
    ) -> Self {
        Self {
            inner,
            manager,
            server,
            report,
        }
    }

    /// The access token to send, if there is one (`explicit` wins: rmcp's own).
    async fn token(&self, explicit: Option<String>) -> Result<Option<String>, HttpError> {
        let Some(manager) = &self.manager else {
            return Ok(explicit);
        };
        if explicit.is_some() {
            return Ok(explicit);
        }
        match manager.lock().await.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            // No token (yet, or any more): the request goes out without one, and the
            // server's challenge starts authorization.
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(error) => Err(StreamableHttpError::Auth(error)),
        }
    }

    /// A fresh token after the server refused `sent`, when a refresh gives one.
    async fn refreshed(&self, sent: Option<&String>) -> Option<String> {
        let (manager, sent) = (self.manager.as_ref()?, sent?);
        let manager = manager.lock().await;
        // A successful refresh is saved in the store, where the manager reads it back.
        let fresh = match manager.refresh_token().await {
            Ok(_) => manager.get_access_token().await,
            Err(error) => Err(error),
        };
        match fresh {
            Ok(token) => (token != *sent).then_some(token),
            Err(error) => {
                tracing::info!(server = %self.server, %error, "OAuth token refresh after a 401 failed");
                None
            }
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
        if matches!(result, Err(StreamableHttpError::AuthRequired(_)))
            && let Some(fresh) = self.refreshed(token.as_ref()).await
        {
            result = send(Some(fresh)).await;
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
