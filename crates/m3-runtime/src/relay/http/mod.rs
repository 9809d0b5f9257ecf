//! The HTTP relay: the Streamable HTTP counterpart of `m3 mcp-relay`.
//!
//! A harness that is itself the MCP client (Codex) is given the URL of a loopback
//! endpoint served here, inside the worker, instead of the real server's. Every
//! request is forwarded to the real endpoint and every response back, bytes
//! unchanged (event streams chunk by chunk, `Mcp-Session-Id` and the other headers
//! as they came, hop-by-hop headers aside), while each JSON-RPC message is reported
//! to the session's [`RelayObserver`](super::RelayObserver) as the stdio relay
//! reports its lines. The tool selection is enforced the same way: a `tools/call`
//! outside it is answered with JSON-RPC error [`POLICY_DENIED_CODE`](super::POLICY_DENIED_CODE)
//! and never reaches the server.
//!
//! The binding's trust level, its resolved `${NAME}` headers, pinned addresses and the
//! no-redirect rule are those of M3's own HTTP client; the resolved header values are
//! added here and never shown to the harness. The endpoint's path carries a random
//! token, so another local process cannot use the relay by guessing its port.

mod observe;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use m3_types::{Error, HttpServer, Result};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

use super::local::LocalReporter;
use super::policy::{ToolPolicy, Verdict};
use super::{Direction, MAX_FRAME_BYTES, RelayEvent};
use m3_mcp::http::{client, header_map, resolve};
use observe::BodyWatch;

/// How long the relay waits to connect to the real server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that belong to one hop, never forwarded. `accept-encoding` is dropped
/// too: the relay must see the server's bytes uncompressed to observe them.
const HOP_BY_HOP: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "accept-encoding",
];

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// A running HTTP relay; dropping it stops listening and ends its connections.
#[derive(Debug)]
pub struct HttpRelay {
    url: String,
    secrets: Vec<String>,
    _accept: AbortOnDropHandle<()>,
}

impl HttpRelay {
    /// The loopback URL the harness is configured with (`http://127.0.0.1:PORT/TOKEN`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The resolved `${NAME}` header values the relay adds: the caller redacts them
    /// wherever it persists what crossed the relay.
    pub fn secret_values(&self) -> &[String] {
        &self.secrets
    }
}

/// What every request of one relay shares.
#[derive(Debug)]
struct Relay {
    path: String,
    upstream: url::Url,
    client: reqwest::Client,
    headers: HeaderMap,
    policy: ToolPolicy,
    reporter: LocalReporter,
}

/// Resolves and checks `server` as M3's client does, binds `127.0.0.1:0` and serves it.
pub(super) async fn start(
    connection_id: &str,
    server: &HttpServer,
    allowed_tools: Option<Vec<String>>,
    token: &str,
    events: mpsc::Sender<RelayEvent>,
) -> Result<HttpRelay> {
    let endpoint = resolve(server).await?;
    let client = client(&server.name, &endpoint, CONNECT_TIMEOUT)?;
    let headers = header_map(&server.name, &endpoint)?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.map_err(|error| {
        Error::transport(format!("cannot bind the HTTP relay: {error}")).with_source(error)
    })?;
    let address = listener.local_addr().map_err(|error| {
        Error::transport(format!("the HTTP relay has no address: {error}")).with_source(error)
    })?;
    let path = format!("/{token}");
    let relay = Arc::new(Relay {
        path: path.clone(),
        upstream: endpoint.url.clone(),
        client,
        headers,
        policy: ToolPolicy::new(allowed_tools),
        reporter: LocalReporter::new(connection_id, events),
    });
    tracing::debug!(server = %server.name, %address, "HTTP relay listening");
    let accept = tokio::spawn(accept_loop(listener, relay));
    Ok(HttpRelay {
        url: format!("http://{address}{path}"),
        secrets: endpoint.secrets,
        _accept: AbortOnDropHandle::new(accept),
    })
}

async fn accept_loop(listener: TcpListener, relay: Arc<Relay>) {
    // Connection tasks live in the set: aborting the loop aborts them too.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let relay = Arc::clone(&relay);
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            handle(Arc::clone(&relay), request)
                        });
                        let served = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(error) = served {
                            tracing::debug!(%error, "HTTP relay connection ended");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "HTTP relay accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn handle(
    relay: Arc<Relay>,
    request: Request<Incoming>,
) -> std::result::Result<Response<Body>, Infallible> {
    if request.uri().path() != relay.path {
        return Ok(plain(StatusCode::NOT_FOUND, "no such relay endpoint"));
    }
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_FRAME_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            relay.reporter.incomplete(&format!(
                "a client-to-server body longer than {MAX_FRAME_BYTES} bytes (or broken) was refused"
            ));
            return Ok(plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body too large",
            ));
        }
    };
    if parts.method == Method::POST
        && let Some(refused) = judge(&relay, &body)
    {
        return Ok(refused);
    }
    let mut headers = forwarded(&parts.headers);
    for (name, value) in &relay.headers {
        headers.insert(name.clone(), value.clone());
    }
    let sent = relay
        .client
        .request(parts.method, relay.upstream.clone())
        .headers(headers)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(response) => Ok(relayed(relay, response)),
        Err(error) => {
            tracing::warn!(%error, "HTTP relay cannot reach the MCP server");
            Ok(plain(
                StatusCode::BAD_GATEWAY,
                "the MCP server cannot be reached",
            ))
        }
    }
}

/// Observes a client-to-server body and applies the tool policy; `Some` is the
/// answer to a refused request (it is not forwarded).
fn judge(relay: &Relay, body: &[u8]) -> Option<Response<Body>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let Ok(parsed) = serde_json::from_slice::<serde_json::Value>(body) else {
        relay
            .reporter
            .incomplete("a client-to-server body is not JSON (forwarded unobserved)");
        return None;
    };
    match relay.policy.judge(&parsed) {
        Verdict::Forward => {
            relay.reporter.frame(Direction::ClientToServer, parsed);
            None
        }
        Verdict::Deny { refused, reply } => {
            for refusal in &refused {
                tracing::info!(tool = %refusal.tool, "HTTP relay refused a tools/call by policy");
                relay
                    .reporter
                    .policy_denied(&refusal.tool, refusal.id.as_ref());
            }
            Some(match reply {
                Some(reply) => json(reply),
                None => plain(StatusCode::ACCEPTED, ""),
            })
        }
    }
}

/// The headers of `from` that may cross the relay.
fn forwarded(from: &HeaderMap) -> HeaderMap {
    let mut headers = from.clone();
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::CONTENT_LENGTH);
    headers
}

/// The server's response, streamed back unchanged and observed on the way.
fn relayed(relay: Arc<Relay>, response: reqwest::Response) -> Response<Body> {
    let status = response.status();
    let mut headers = forwarded(response.headers());
    if let Some(length) = response.headers().get(header::CONTENT_LENGTH) {
        headers.insert(header::CONTENT_LENGTH, length.clone());
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok());
    let watch = BodyWatch::for_content_type(content_type);
    let stream = response.bytes_stream();
    let body = futures_util::stream::unfold(
        (stream, watch, relay, false),
        |(mut stream, mut watch, relay, ended)| async move {
            if ended {
                return None;
            }
            match stream.next().await {
                Some(Ok(chunk)) => {
                    watch.chunk(&chunk, &relay.reporter);
                    Some((Ok(Frame::data(chunk)), (stream, watch, relay, false)))
                }
                Some(Err(error)) => {
                    watch.end(false, &relay.reporter);
                    let error = std::io::Error::other(error);
                    Some((Err(error), (stream, watch, relay, true)))
                }
                None => {
                    watch.end(true, &relay.reporter);
                    None
                }
            }
        },
    );
    let mut out = Response::new(BodyExt::boxed_unsync(StreamBody::new(body)));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

fn json(body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from(body)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}
