//! The connection loop of [`serve()`] and [`serve_with()`]: HTTP/1 with a header
//! read timeout (which also ends idle keep-alive connections), a request body
//! timeout, a connection limit that fits the process's file limit, and a
//! shutdown that lets in-flight requests finish and then closes the rest
//! after a grace period.
//!
//! `axum::serve` has none of these knobs, so a silent client could hold a
//! connection forever; the loop here is hyper's own HTTP/1 connection with its
//! timer, one task per connection, a semaphore on accept.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use m3_types::Result;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::RequestBodyTimeout;

/// How long a client may take to send a request's headers, counted from the
/// connection's start or the end of its previous response (so it is also the
/// idle keep-alive timeout).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request body may take to arrive once its headers are in.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections served at once, before the file limit lowers it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How long a shutdown waits for open connections before closing them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// File descriptors kept free of connections: the store's files and
/// connections, stdio, the runtime's own descriptors.
const RESERVED_FILES: u64 = 64;

/// Timeouts and limits of [`serve_with`]; [`Default`] is the `DEFAULT_*`
/// constants.
///
/// ```
/// use std::time::Duration;
/// let options = m3_server::ServeOptions::default()
///     .header_read_timeout(Duration::from_secs(5))
///     .max_connections(256);
/// assert!(options.connection_limit() <= 256);
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ServeOptions {
    header_read_timeout: Duration,
    body_read_timeout: Duration,
    max_connections: usize,
    shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl ServeOptions {
    /// The time allowed for a request's headers, and for the next request
    /// on an idle connection (default [`DEFAULT_HEADER_READ_TIMEOUT`]; at
    /// least 10 ms).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout.max(Duration::from_millis(10));
        self
    }

    /// The time allowed for a request body (default
    /// [`DEFAULT_BODY_READ_TIMEOUT`]; at least 10 ms). A late body is a 400.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout.max(Duration::from_millis(10));
        self
    }

    /// The most connections open at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`]; at least 1); see
    /// [`connection_limit`](Self::connection_limit).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How long a shutdown waits for open connections (in-flight requests
    /// and event streams) before closing them (default
    /// [`DEFAULT_SHUTDOWN_GRACE`]).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The connection limit in force: [`max_connections`](Self::max_connections),
    /// lowered to three quarters of the process's soft file limit minus
    /// what the store needs (at least 64 descriptors stay free), so that a
    /// crowd of clients can never starve the store of files. Further
    /// clients wait in the listen queue until a connection closes.
    pub fn connection_limit(&self) -> usize {
        let Some(files) = soft_file_limit() else {
            return self.max_connections;
        };
        let reserve = RESERVED_FILES.max(files / 4);
        let room = usize::try_from(files.saturating_sub(reserve)).unwrap_or(usize::MAX);
        self.max_connections.min(room).max(1)
    }
}

#[cfg(unix)]
fn soft_file_limit() -> Option<u64> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _hard)| soft)
}

#[cfg(not(unix))]
fn soft_file_limit() -> Option<u64> {
    None
}

/// Serves `router` on `listener` with [`ServeOptions::default`] until
/// `shutdown` completes (see [`serve_with()`]).
///
/// # Errors
/// None today; the `Result` leaves room for listener failures that cannot be
/// retried.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    serve_with(listener, router, shutdown, ServeOptions::default()).await
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish, closes idle connections, and
/// after [`ServeOptions::shutdown_grace`] closes whatever is still open (a
/// client stuck mid-request, an event stream nobody ended).
///
/// # Errors
/// None today (a failed accept is logged and retried).
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(options.connection_limit()));
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener, &slots) => accepted,
        };
        while connections.try_join_next().is_some() {}
        let Some((stream, permit)) = accepted else {
            continue;
        };
        // Each request learns its peer (the guard counts failed authentications per
        // address).
        let peer = stream.peer_addr().ok();
        let router = match peer {
            Some(peer) => router
                .clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
            None => router.clone(),
        };
        let connection = serve_connection(stream, router, &options, stop.clone());
        connections.spawn(async move {
            connection.await;
            drop(permit);
        });
    }
    drop(listener);
    stop.cancel();
    let drained = tokio::time::timeout(options.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            open = connections.len(),
            "closing the connections still open after the shutdown grace"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// The next connection, once a slot is free; `None` after a failed accept.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(TcpStream, OwnedSemaphorePermit)> {
    let permit = Arc::clone(slots).acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((stream, _peer)) => Some((stream, permit)),
        Err(error) => {
            accept_failed(&error).await;
            None
        }
    }
}

/// A failed accept: a client that gave up is nothing; anything else (out of
/// files) is logged and the loop pauses briefly instead of spinning.
async fn accept_failed(error: &io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::warn!(%error, "cannot accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// One connection until it ends; on `stop` it finishes its in-flight request
/// and closes.
fn serve_connection(
    stream: TcpStream,
    router: Router,
    options: &ServeOptions,
    stop: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let service =
        TowerToHyperService::new(RequestBodyTimeout::new(router, options.body_read_timeout));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    async move {
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let mut connection = std::pin::pin!(connection);
        let ended = tokio::select! {
            ended = connection.as_mut() => ended,
            () = stop.cancelled() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}
