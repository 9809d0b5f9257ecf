//! Serving a fixture over a byte stream (stdio or an in-process pipe).

use std::{
    borrow::Cow,
    collections::HashSet,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use rmcp::{
    ErrorData, RoleServer, Service, ServiceExt,
    model::{ClientRequest, DiscoverRequestMethod, ProtocolVersion, ServerConfig},
    service::{NotificationContext, RequestContext, ServerInitializeError, ServiceRole},
};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadBuf},
    sync::mpsc,
};
use tokio_util::sync::CancellationToken;

use crate::{
    error::FixtureError,
    options::{Era, ShippingOptions},
    shipping::{ShippingHandler, Wire},
};

/// How a served connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServeOutcome {
    /// The client closed the connection (or never chose an era before closing).
    Closed,
    /// [`Fault::CrashMidCall`](crate::Fault::CrashMidCall) ended the server during a
    /// `tools/call`; the output was closed without a response. A process should now exit with
    /// [`CRASH_EXIT_CODE`](crate::CRASH_EXIT_CODE).
    Crashed,
}

/// The service rmcp runs: the handler plus the era rule for `server/discover`.
#[derive(Debug, Clone)]
pub(crate) struct EraService {
    handler: ShippingHandler,
}

impl EraService {
    pub(crate) fn new(handler: ShippingHandler) -> Self {
        Self { handler }
    }
}

impl Service<RoleServer> for EraService {
    async fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> Result<<RoleServer as ServiceRole>::Resp, ErrorData> {
        if self.handler.options().era == Era::Legacy
            && matches!(request, ClientRequest::DiscoverRequest(_))
        {
            // A server of the handshake era does not know server/discover.
            return Err(ErrorData::method_not_found::<DiscoverRequestMethod>());
        }
        Service::handle_request(&self.handler, request, context).await
    }

    async fn handle_notification(
        &self,
        notification: <RoleServer as ServiceRole>::PeerNot,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Service::handle_notification(&self.handler, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.handler)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.handler.options().era.supported_versions()
    }
}

/// Serves the `shipping` server on `reader`/`writer` (newline-delimited JSON-RPC, as on stdio)
/// until the client closes the connection or a crash fault fires.
///
/// Use it in-process with the two halves of [`tokio::io::duplex`] (the client takes the other
/// ends), or with a process's stdin/stdout (see [`serve_stdio`]). The era and the fault come
/// from `options`.
///
/// # Errors
/// - [`FixtureError::InvalidArgument`] (`invalid_argument`): `options.state_key` is shorter
///   than 32 bytes.
/// - [`FixtureError::Transport`] (`transport_error`): the first message was not a request, the
///   handshake was refused (for example `initialize` on a 2026-07-28-only server), or the
///   output failed.
pub async fn serve_shipping<R, W>(
    options: ShippingOptions,
    reader: R,
    writer: W,
) -> Result<ServeOutcome, FixtureError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (raw_tx, raw_rx) = mpsc::unbounded_channel();
    let crash = CancellationToken::new();
    let closed = CancellationToken::new();
    let silenced = Arc::new(Mutex::new(HashSet::new()));
    let handler = ShippingHandler::new(
        options,
        Wire {
            raw: raw_tx,
            crash: crash.clone(),
            closed: closed.clone(),
            silenced: silenced.clone(),
        },
    )?;
    let reader = EofReader {
        inner: reader,
        closed,
    };
    let (rmcp_out, forwarder_in) = tokio::io::duplex(64 * 1024);
    let forwarder = tokio::spawn(forward(
        forwarder_in,
        writer,
        raw_rx,
        crash.clone(),
        silenced,
    ));
    let service = EraService { handler };
    let running = match service.serve((reader, rmcp_out)).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_)) => {
            finish(forwarder).await?;
            return Ok(ServeOutcome::Closed);
        }
        Err(error) => {
            finish(forwarder).await?;
            return Err(FixtureError::Transport(error.to_string()));
        }
    };
    let outcome = tokio::select! {
        quit = running.waiting() => {
            if let Err(error) = quit {
                tracing::warn!(%error, "the service task failed");
            }
            ServeOutcome::Closed
        }
        () = crash.cancelled() => ServeOutcome::Crashed,
    };
    finish(forwarder).await?;
    Ok(outcome)
}

async fn finish(
    forwarder: tokio::task::JoinHandle<std::io::Result<()>>,
) -> Result<(), FixtureError> {
    match forwarder.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(FixtureError::Transport(error.to_string())),
        Err(error) => Err(FixtureError::Transport(error.to_string())),
    }
}

/// Cancels `closed` when the input ends (or fails), so hanging fault handlers stop at once
/// instead of holding rmcp's shutdown drain.
struct EofReader<R> {
    inner: R,
    closed: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.closed.cancel();
            }
            Poll::Ready(Err(_)) => self.closed.cancel(),
            _ => {}
        }
        poll
    }
}

/// Copies rmcp's output to `out` line by line, interleaving raw lines from faults at line
/// boundaries; stops (dropping `out`) at once when a crash fires.
async fn forward<W>(
    from_rmcp: DuplexStream,
    mut out: W,
    mut raw: mpsc::UnboundedReceiver<Vec<u8>>,
    crash: CancellationToken,
    silenced: Arc<Mutex<HashSet<String>>>,
) -> std::io::Result<()>
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut lines = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    let mut raw_open = true;
    loop {
        tokio::select! {
            biased;
            () = crash.cancelled() => return Ok(()),
            read = lines.read_until(b'\n', &mut line) => {
                let n = read?;
                if n == 0 || line.last() == Some(&b'\n') {
                    if !is_silenced(&line, &silenced) {
                        out.write_all(&line).await?;
                        out.flush().await?;
                    }
                    line.clear();
                }
                if n == 0 {
                    out.shutdown().await?;
                    return Ok(());
                }
            }
            bytes = raw.recv(), if raw_open => match bytes {
                Some(bytes) => {
                    out.write_all(&bytes).await?;
                    out.flush().await?;
                }
                None => raw_open = false,
            },
        }
    }
}

/// True when `line` is a response to a silenced request id.
fn is_silenced(line: &[u8], silenced: &Mutex<HashSet<String>>) -> bool {
    let Ok(silenced) = silenced.lock() else {
        return false;
    };
    if silenced.is_empty() || line.len() > 64 * 1024 {
        return false;
    }
    let Ok(frame) = serde_json::from_slice::<serde_json::Value>(line) else {
        return false;
    };
    let is_response = frame.get("result").is_some() || frame.get("error").is_some();
    is_response
        && frame
            .get("id")
            .is_some_and(|id| silenced.contains(&id.to_string()))
}

/// Serves the `shipping` server on this process's stdin and stdout.
///
/// # Errors
/// As [`serve_shipping`].
pub async fn serve_stdio(options: ShippingOptions) -> Result<ServeOutcome, FixtureError> {
    serve_shipping(options, tokio::io::stdin(), tokio::io::stdout()).await
}

/// The names [`serve_named_stdio`] knows.
pub const SERVER_NAMES: &[&str] = &["shipping"];

/// Serves the fixture called `name` on stdin/stdout (what `m3 example-server NAME` runs).
///
/// # Errors
/// [`FixtureError::InvalidArgument`] (`invalid_argument`) for an unknown name; otherwise as
/// [`serve_shipping`].
pub async fn serve_named_stdio(
    name: &str,
    options: ShippingOptions,
) -> Result<ServeOutcome, FixtureError> {
    match name {
        "shipping" => serve_stdio(options).await,
        other => Err(FixtureError::InvalidArgument(format!(
            "unknown example server '{other}' (known: {})",
            SERVER_NAMES.join(", ")
        ))),
    }
}
