//! Serving a fixture over Streamable HTTP (rmcp's `StreamableHttpService` on axum).
//!
//! One handler serves every request and session, so a `requestState` sealed on
//! one request is accepted on the next. 2026-07-28 requests are served
//! statelessly (rounds are plain request/response); a legacy client gets an
//! `Mcp-Session-Id` session, and `elicitation/create` reaches it over the SSE
//! stream of its `tools/call`.

use std::{
    collections::HashSet,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio::{net::TcpListener, sync::mpsc};
use tokio_util::sync::CancellationToken;

use crate::{
    error::FixtureError,
    options::ShippingOptions,
    serve::{EraService, SERVER_NAMES},
    shipping::{ShippingHandler, Wire},
};

/// The path the endpoint is served at.
pub const HTTP_PATH: &str = "/mcp";

/// A running Streamable HTTP fixture: its URL, and a token that stops it.
#[derive(Debug)]
pub struct HttpFixture {
    url: String,
    address: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HttpFixture {
    /// The endpoint, `http://ADDRESS/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stop serving and wait for the server task.
    ///
    /// # Errors
    /// [`FixtureError::Transport`] when serving failed.
    pub async fn stop(self) -> Result<(), FixtureError> {
        self.stop.cancel();
        self.wait().await
    }

    /// Serve until the task ends (it ends only when stopped or failed).
    ///
    /// # Errors
    /// [`FixtureError::Transport`] when serving failed.
    pub async fn wait(self) -> Result<(), FixtureError> {
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(FixtureError::Transport(error.to_string())),
            Err(error) => Err(FixtureError::Transport(error.to_string())),
        }
    }
}

/// Serves the `shipping` server over Streamable HTTP on `address` (port 0: an
/// ephemeral port), in the era(s) of `options`, until stopped.
///
/// # Errors
/// - [`FixtureError::InvalidArgument`]: a fault is set (faults are stdio-only) or
///   `options.state_key` is shorter than 32 bytes.
/// - [`FixtureError::Transport`]: the address cannot be bound.
pub async fn serve_shipping_http(
    options: ShippingOptions,
    address: SocketAddr,
) -> Result<HttpFixture, FixtureError> {
    if options.fault.is_some() {
        return Err(FixtureError::InvalidArgument(
            "faults are served over stdio only; drop --fault or --http".to_owned(),
        ));
    }
    // Faults are refused above, so the raw-line and crash channels stay idle.
    let (raw, _unused) = mpsc::unbounded_channel();
    let handler = ShippingHandler::new(
        options,
        Wire {
            raw,
            crash: CancellationToken::new(),
            closed: CancellationToken::new(),
            silenced: Arc::new(Mutex::new(HashSet::new())),
        },
    )?;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| FixtureError::Transport(format!("cannot bind {address}: {error}")))?;
    let address = listener
        .local_addr()
        .map_err(|error| FixtureError::Transport(error.to_string()))?;
    let stop = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = stop.child_token();
    config.allowed_hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        address.ip().to_string(),
    ];
    let service = StreamableHttpService::new(
        move || Ok(EraService::new(handler.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(HTTP_PATH, service);
    let shutdown = stop.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    });
    let host = match address {
        SocketAddr::V4(v4) => v4.ip().to_string(),
        SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
    };
    Ok(HttpFixture {
        url: format!("http://{host}:{}{HTTP_PATH}", address.port()),
        address,
        stop,
        task,
    })
}

/// Serves the fixture called `name` over Streamable HTTP (what
/// `m3 example-server NAME --http ADDRESS` runs).
///
/// # Errors
/// [`FixtureError::InvalidArgument`] for an unknown name; otherwise as
/// [`serve_shipping_http`].
pub async fn serve_named_http(
    name: &str,
    options: ShippingOptions,
    address: SocketAddr,
) -> Result<HttpFixture, FixtureError> {
    match name {
        "shipping" => serve_shipping_http(options, address).await,
        other => Err(FixtureError::InvalidArgument(format!(
            "unknown example server '{other}' (known: {})",
            SERVER_NAMES.join(", ")
        ))),
    }
}
