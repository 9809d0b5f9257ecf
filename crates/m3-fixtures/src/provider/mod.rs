//! A deterministic local OpenAI Responses API provider for Codex (`m3 example-provider`).
//!
//! It listens on 127.0.0.1 and answers each `POST /v1/responses` (or `/responses`) with an
//! SSE stream whose single output item is the script step chosen by the number of
//! `function_call_output` items in the request's `input`: a namespaced `function_call`
//! (`name` = the bare tool, `namespace` = [`tool_namespace`] of the server) or an assistant
//! `message`. `GET /v1/models` (or `/models`) lists the script's model. Every request is
//! recorded; one carrying an `authorization` header is refused with 401.

mod record;
mod script;
mod server;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::FixtureError;

pub use record::RecordedRequest;
pub use script::{
    DEFAULT_PROVIDER_MODEL, ProviderScript, ProviderStep, SCRIPT_EXHAUSTED_TEXT, tool_namespace,
};

/// How to start an [`ExampleProvider`] beyond its script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// The port on 127.0.0.1 (0: an ephemeral port).
    pub port: u16,
    /// Append every recorded request as one JSON line to this file (created if missing).
    pub record: Option<PathBuf>,
}

impl ProviderOptions {
    /// Listens on `port` (0: ephemeral).
    #[must_use]
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Appends each recorded request to `path` as a JSON line.
    #[must_use]
    pub fn with_record(mut self, path: impl Into<PathBuf>) -> Self {
        self.record = Some(path.into());
        self
    }
}

/// A running provider on 127.0.0.1; it stops accepting when dropped (or [`stop`](Self::stop)ped).
#[derive(Debug)]
pub struct ExampleProvider {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl ExampleProvider {
    /// Starts serving `script` on an ephemeral port of 127.0.0.1, on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the script has no steps or no model; `transport_error` when
    /// the port cannot be bound.
    pub async fn start(script: ProviderScript) -> Result<ExampleProvider, FixtureError> {
        Self::start_with(script, ProviderOptions::default()).await
    }

    /// Starts serving `script` with `options` (port, record file).
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the script has no steps or no model; `transport_error` when
    /// the port cannot be bound.
    pub async fn start_with(
        script: ProviderScript,
        options: ProviderOptions,
    ) -> Result<ExampleProvider, FixtureError> {
        script.check()?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
            .await
            .map_err(|error| {
                FixtureError::Transport(format!(
                    "cannot listen on 127.0.0.1:{}: {error}",
                    options.port
                ))
            })?;
        let addr = listener.local_addr().map_err(|error| {
            FixtureError::Transport(format!("cannot read the listening address: {error}"))
        })?;
        let shared = Arc::new(server::Shared::new(script, options.record));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(server::serve(listener, shared.clone(), cancel.clone()));
        tracing::debug!(%addr, "example provider listening");
        Ok(ExampleProvider {
            addr,
            shared,
            cancel,
            task: Some(task),
        })
    }

    /// The base URL to configure in Codex: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order (refused ones included).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.recorder.snapshot()
    }

    /// Stops accepting, lets requests in flight finish, and waits for the server task.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "example provider task ended abnormally");
        }
    }
}

impl Drop for ExampleProvider {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
