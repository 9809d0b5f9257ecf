//! [`ServerBuilder`]: the kit and the options of one server, and the shared
//! state every handler reads.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use m3_kit::AsyncMcpTestKit;
use tokio_util::sync::CancellationToken;

use crate::events::EventHub;

/// Largest request body accepted by default (64 KiB): a round's answers are
/// small, and a bigger body is refused with 413 before it is parsed.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;

/// How often the event stream looks at the store by default, while nothing
/// signals changes.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Builds the [`Router`] of the API and the page over one kit.
///
/// Every option has a default: no token (any local caller may answer), a
/// [`DEFAULT_BODY_LIMIT`] body limit, a [`DEFAULT_POLL_INTERVAL`] event poll,
/// base path `""` (mounted at the root), and a shutdown token nobody cancels.
///
/// ```no_run
/// # async fn demo(kit: m3_kit::AsyncMcpTestKit) {
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// let m3 = m3_server::ServerBuilder::new(kit)
///     .token("s3cret")
///     .base_path("/m3")
///     .shutdown(shutdown.clone())
///     .build();
/// let app: axum::Router = axum::Router::new().nest("/m3", m3);
/// # let _ = app;
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerBuilder {
    kit: AsyncMcpTestKit,
    token: Option<String>,
    body_limit: usize,
    poll_interval: Duration,
    base_path: String,
    shutdown: CancellationToken,
}

impl ServerBuilder {
    /// A builder over `kit` (its store is what the server reads and answers).
    pub fn new(kit: AsyncMcpTestKit) -> Self {
        Self {
            kit,
            token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            base_path: String::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// Requires `token`: `Authorization: Bearer TOKEN` on the API, or the
    /// page's cookie (set by opening `/?token=TOKEN`). An empty token means none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.token = (!token.is_empty()).then_some(token);
        self
    }

    /// The largest request body in bytes (default [`DEFAULT_BODY_LIMIT`]).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How often the event stream polls the store (default
    /// [`DEFAULT_POLL_INTERVAL`]; at least 10 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The path the router is mounted under (default `""`), used for the
    /// page's links, assets and cookie path, e.g. `"/m3"` with
    /// `Router::nest("/m3", router)`.
    pub fn base_path(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        self.base_path = path.trim_end_matches('/').to_owned();
        self
    }

    /// A token whose cancellation ends every open event stream (so a graceful
    /// shutdown does not wait for them) and stops the store poll.
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// The router: the JSON API, the event stream, the page and its assets.
    pub fn build(self) -> Router {
        let state = Arc::new(AppState {
            hub: EventHub::new(self.kit.clone(), self.poll_interval, self.shutdown.clone()),
            kit: self.kit,
            token: self.token,
            body_limit: self.body_limit,
            base_path: self.base_path,
            shutdown: self.shutdown,
        });
        crate::api::routes(Arc::clone(&state))
            .merge(crate::page::routes(Arc::clone(&state)))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&state),
                crate::auth::guard,
            ))
            .layer(axum::extract::DefaultBodyLimit::max(state.body_limit))
    }
}

/// What every handler reads.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) kit: AsyncMcpTestKit,
    pub(crate) token: Option<String>,
    pub(crate) body_limit: usize,
    pub(crate) base_path: String,
    pub(crate) shutdown: CancellationToken,
    pub(crate) hub: EventHub,
}

/// The shared state as handlers take it.
pub(crate) type Shared = Arc<AppState>;
