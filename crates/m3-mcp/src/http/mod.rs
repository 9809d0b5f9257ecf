//! The Streamable HTTP side of [`McpConnection`](super::McpConnection): trust
//! checks on the resolved addresses, the reqwest client (rustls, pinned
//! addresses, no redirects, no proxies), and `ObservedClient`, the rmcp
//! [`StreamableHttpClient`] that wraps rmcp's own reqwest implementation so
//! that every failure becomes a typed connection fault and every JSON-RPC
//! message the server sends is seen raw (for `RawMessages`) before rmcp
//! decodes it: SSE events as they pass, and the plain JSON answer of a
//! `tools/call`, which `post` sends itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use m3_types::{Error, HttpServer, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::fault::{ConnectionFault, FaultSender};
use super::options::ConnectOptions;
use super::raw::RawMessages;
use crate::oauth::SharedAuthorizer;

mod authorized;
mod post;

pub(crate) use authorized::AuthorizedClient;

type HttpError = StreamableHttpError<reqwest::Error>;

/// A checked endpoint: its URL, the addresses it resolved to (all allowed by
/// the trust level), and the resolved header values to redact.
#[derive(Debug)]
#[non_exhaustive]
pub struct Endpoint {
    /// The endpoint URL.
    pub url: url::Url,
    addresses: Vec<SocketAddr>,
    /// The headers to send, `${NAME}` references resolved.
    pub headers: Vec<(String, String)>,
    /// The resolved header values, to redact wherever they appear.
    pub secrets: Vec<String>,
}

/// Validate `server`, resolve its host and check every address against its
/// trust level, and resolve its `${NAME}` headers from our environment.
///
/// # Errors
/// `invalid_argument` for a bad binding, a refused address or an unset
/// variable; `transport_error` when the host does not resolve.
pub async fn resolve(server: &HttpServer) -> Result<Endpoint> {
    server.validate()?;
    let url = server.endpoint()?;
    let host = url
        .host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
        .unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|error| {
            Error::transport(format!(
                "MCP server '{}': host '{host}' does not resolve: {error}",
                server.name
            ))
            .with_detail("server", server.name.clone())
            .with_detail("host", host.clone())
        })?
        .collect();
    if addresses.is_empty() {
        return Err(Error::transport(format!(
            "MCP server '{}': host '{host}' resolved to no address",
            server.name
        ))
        .with_detail("server", server.name.clone()));
    }
    for address in &addresses {
        server.check_address(&host, address.ip())?;
    }
    let resolved = server.resolve_headers(&|name| std::env::var(name).ok())?;
    Ok(Endpoint {
        url,
        addresses,
        headers: resolved.headers,
        secrets: resolved.secrets,
    })
}

/// The rmcp transport for `endpoint`, reporting failures into `faults`, its requests
/// authorized by `oauth` once it has a token (and authorized again through it when the
/// server refuses one).
pub(crate) fn transport(
    server: &str,
    endpoint: &Endpoint,
    options: &ConnectOptions,
    raw: Arc<RawMessages>,
    faults: FaultSender,
    oauth: Option<SharedAuthorizer>,
) -> Result<StreamableHttpClientTransport<AuthorizedClient<ObservedClient>>> {
    let client = client(server, endpoint, options.connect_timeout)?;
    let custom_headers: HashMap<HeaderName, HeaderValue> = header_map(server, endpoint)?
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let max = options.max_frame_bytes;
    let config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
        .custom_headers(custom_headers)
        .max_sse_event_size(max)
        .max_json_response_size(max)
        .reinit_on_expired_session(false);
    let server: Arc<str> = Arc::from(server);
    let client = ObservedClient {
        inner: client,
        server: Arc::clone(&server),
        raw,
        faults: faults.clone(),
        max_bytes: max,
    };
    let observer = client.clone();
    let raise = faults.clone();
    let report: authorized::Report = Arc::new(move |error| raise.raise(observer.fault_for(error)));
    let client = AuthorizedClient::new(client, oauth, server, report, faults);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// The binding's resolved headers as sensitive header values (kept out of
/// debug output). Also used by the HTTP relay.
///
/// # Errors
/// `invalid_argument` for a header name or value HTTP does not allow.
pub fn header_map(server: &str, endpoint: &Endpoint) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (name, value) in &endpoint.headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            Error::model_validation(format!("MCP server '{server}': bad header name '{name}'"))
        })?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            Error::model_validation(format!(
                "MCP server '{server}': header '{name}' has a value that is not valid in HTTP"
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The reqwest client for `endpoint`: rustls (ring), its checked addresses pinned,
/// no redirects followed, no proxies. Also used by the HTTP relay.
///
/// # Errors
/// `transport_error` when the client cannot be built.
pub fn client(
    server: &str,
    endpoint: &Endpoint,
    connect_timeout: Duration,
) -> Result<reqwest::Client> {
    // reqwest is built without a bundled crypto provider (no aws-lc-rs); rustls
    // then uses the process default, which we make ring (a no-op when set).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let host = endpoint.url.host_str().unwrap_or_default().to_owned();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(connect_timeout)
        .resolve_to_addrs(
            host.trim_start_matches('[').trim_end_matches(']'),
            &endpoint.addresses,
        )
        .build()
        .map_err(|error| {
            Error::transport(format!(
                "cannot build the HTTP client for '{server}': {error}"
            ))
        })
}

/// rmcp's reqwest client, observed: see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct ObservedClient {
    inner: reqwest::Client,
    server: Arc<str>,
    raw: Arc<RawMessages>,
    faults: FaultSender,
    max_bytes: usize,
}

/// The HTTP status a failure names, if any (`HTTP 307 ...` texts included).
fn status_of(error: &HttpError) -> Option<u16> {
    match error {
        StreamableHttpError::HttpStatus(status) => Some(status.status),
        StreamableHttpError::Client(error) => error.status().map(|s| s.as_u16()),
        StreamableHttpError::UnexpectedServerResponse(text) => text
            .strip_prefix("HTTP ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok()),
        StreamableHttpError::SessionExpired => Some(404),
        _ => None,
    }
}

impl ObservedClient {
    /// The bounds of every answer: the connection's frame bound.
    fn limits(&self) -> StreamableHttpResponseLimits {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = self.max_bytes;
        limits.max_json_response_size = self.max_bytes;
        limits
    }

    /// The connection fault for a failed POST.
    fn fault_for(&self, error: &HttpError) -> ConnectionFault {
        let server = &self.server;
        let status = status_of(error);
        let mut fault = match (error, status) {
            (StreamableHttpError::AuthRequired(_), _) => ConnectionFault::transport(format!(
                "MCP server '{server}' answered HTTP 401: it asks for OAuth authorization"
            ))
            .with_detail("http_status", 401),
            (StreamableHttpError::InsufficientScope(_), _) => ConnectionFault::transport(format!(
                "MCP server '{server}' answered HTTP 403: the token's scope is insufficient"
            ))
            .with_detail("http_status", 403)
            .with_detail("reason", m3_types::Reason::InsufficientScope.as_str()),
            (StreamableHttpError::ResponseBodyTooLarge { max_size }, _) => {
                ConnectionFault::protocol(format!(
                    "MCP server '{server}' answered with a body larger than {max_size} bytes"
                ))
                .with_detail("max_frame_bytes", self.max_bytes as u64)
            }
            (StreamableHttpError::Deserialize(e), _) => ConnectionFault::protocol(format!(
                "MCP server '{server}' answered with a body that is not JSON-RPC ({e})"
            )),
            (StreamableHttpError::UnexpectedContentType(kind), _) => {
                ConnectionFault::protocol(format!(
                    "MCP server '{server}' answered with content type {kind:?}, neither JSON nor an event stream"
                ))
            }
            (_, Some(code @ 300..=399)) => ConnectionFault::transport(format!(
                "MCP server '{server}' answered HTTP {code} (a redirect); redirects are not followed"
            )),
            (_, Some(code)) => {
                ConnectionFault::transport(format!("MCP server '{server}' answered HTTP {code}"))
            }
            (StreamableHttpError::UnexpectedServerResponse(text), None) => {
                ConnectionFault::protocol(format!(
                    "MCP server '{server}' answered with a malformed body: {text}"
                ))
            }
            (other, None) => ConnectionFault::transport(format!(
                "HTTP exchange with MCP server '{server}' failed: {}",
                error_chain(other)
            )),
        };
        if let Some(code) = status {
            fault = fault.with_detail("http_status", code);
        }
        if let Some(challenge) = error.auth_challenge() {
            // The challenge names metadata URLs and scopes, never a credential.
            fault = fault.with_detail(crate::oauth::CHALLENGE_DETAIL, challenge.to_owned());
        }
        fault
    }

    /// Observe every event of `stream` raw; a broken stream is a transport fault.
    fn observed(
        &self,
        stream: BoxStream<'static, std::result::Result<Sse, SseError>>,
    ) -> BoxStream<'static, std::result::Result<Sse, SseError>> {
        let raw = Arc::clone(&self.raw);
        let faults = self.faults.clone();
        let server = Arc::clone(&self.server);
        stream
            .inspect(move |event| match event {
                Ok(event) => {
                    if let Some(data) = &event.data
                        && let Ok(message) = serde_json::from_str::<serde_json::Value>(data)
                    {
                        raw.observe(&message);
                    }
                }
                Err(error) => faults.raise(stream_fault(&server, error)),
            })
            .boxed()
    }

    fn observe_post(
        &self,
        message: &ClientJsonRpcMessage,
        response: std::result::Result<StreamableHttpPostResponse, HttpError>,
    ) -> std::result::Result<StreamableHttpPostResponse, HttpError> {
        match response {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => Ok(
                StreamableHttpPostResponse::Sse(self.observed(stream), session),
            ),
            Ok(other) => Ok(other),
            Err(error) => {
                // A POST awaiting no answer (a notification) failing is not fatal; an
                // authorization failure is reported by `AuthorizedClient`, which may
                // still recover from it with a refreshed token.
                let authorization = error.auth_challenge().is_some();
                if matches!(message, ClientJsonRpcMessage::Request(_)) && !authorization {
                    self.faults.raise(self.fault_for(&error));
                }
                Err(error)
            }
        }
    }
}

/// The fault for an event stream that ended in `error`: too large an event is a
/// protocol fault, anything else a broken transport.
fn stream_fault(server: &str, error: &SseError) -> ConnectionFault {
    if let SseError::Body(body) = error
        && let Some(post::EventBodyError::TooLarge(max)) = body.downcast_ref()
    {
        return ConnectionFault::protocol(format!(
            "MCP server '{server}' sent an event larger than {max} bytes"
        ))
        .with_detail("max_frame_bytes", *max as u64);
    }
    ConnectionFault::transport(format!(
        "the event stream from MCP server '{server}' broke off: {}",
        error_chain(error)
    ))
}

/// `error` and its sources, joined (reqwest's own text omits the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl StreamableHttpClient for ObservedClient {
    type Error = reqwest::Error;

    // Only the required methods are ours: the bounds are the connection's own
    // (`limits`, the same the transport is configured with), so rmcp's default
    // `_with_` variants, which forward here, lose nothing.
    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<StreamableHttpPostResponse, HttpError> {
        if !post::is_ours(&message) {
            let response = self
                .inner
                .post_message_with_response_limits(
                    uri,
                    message.clone(),
                    session_id,
                    auth_header,
                    custom_headers,
                    self.limits(),
                )
                .await;
            return self.observe_post(&message, response);
        }
        let post = post::Post {
            uri: &uri,
            message: &message,
            session_id: session_id.as_deref(),
            auth_header,
            headers: custom_headers,
            limits: self.limits(),
        };
        let response = post::send(&self.inner, post, &self.raw).await;
        self.observe_post(&message, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<(), HttpError> {
        let deleting = self
            .inner
            .delete_session(uri, session_id, auth_header, custom_headers);
        match tokio::time::timeout(Duration::from_secs(5), deleting).await {
            Ok(result) => result,
            Err(_) => Err(StreamableHttpError::ControlRequestTimeout),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> std::result::Result<BoxStream<'static, std::result::Result<Sse, SseError>>, HttpError>
    {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                self.max_bytes,
            )
            .await?;
        Ok(self.observed(stream))
    }
}
