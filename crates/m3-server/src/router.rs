//! [`ServerBuilder`]: the kit and the options of one server, and the router
//! it builds over the handlers of [`crate::api`], [`crate::page`] and
//! [`crate::events`] (which read [`crate::state`], never this module).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::uri::Scheme;
use m3_kit::AsyncMcpTestKit;
use tokio_util::sync::CancellationToken;

use crate::host::{AllowedHost, HostPolicy};
use crate::state::AppState;

/// Largest request body accepted by default: derived from the largest answer a stored
/// round allows ([`m3_types::limits::MAX_ANSWER_BODY_BYTES`], 3 MiB + 64 KiB: three times
/// [`MAX_ANSWER_BYTES`](m3_types::limits::MAX_ANSWER_BYTES) for form or verbose JSON
/// encoding, plus the envelope), so every answer the store would accept can be posted. A
/// bigger body is refused with 413 before it is parsed.
pub const DEFAULT_BODY_LIMIT: usize = m3_types::limits::MAX_ANSWER_BODY_BYTES;

/// How often the event stream looks at the store by default, while nothing
/// signals changes.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Builds the [`Router`] of the API and the page over one kit.
///
/// Every option has a default: no token (any local caller may answer, and
/// only requests whose `Host` is a loopback name are served), a
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
    metrics_token: Option<String>,
    body_limit: usize,
    poll_interval: Duration,
    base_path: String,
    shutdown: CancellationToken,
    allowed_hosts: Vec<AllowedHost>,
    origin_scheme: Scheme,
    proxy: Option<crate::proxy::TrustedProxy>,
}

impl ServerBuilder {
    /// A builder over `kit` (its store is what the server reads and answers).
    pub fn new(kit: AsyncMcpTestKit) -> Self {
        Self {
            kit,
            token: None,
            metrics_token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            base_path: String::new(),
            shutdown: CancellationToken::new(),
            allowed_hosts: Vec::new(),
            origin_scheme: Scheme::HTTP,
            proxy: None,
        }
    }

    /// Requires `token`: `Authorization: Bearer TOKEN` on the API, or the
    /// page's cookie (set by opening `/?token=TOKEN`). An empty token means none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.token = (!token.is_empty()).then_some(token);
        self
    }

    /// Also accepts `Authorization: Bearer TOKEN` on `GET /metrics` (and nowhere else), for
    /// a Prometheus that should not hold a token of the API. Without it, `/metrics` needs
    /// what every read needs: the `read` scope (any caller on loopback when the server has
    /// no token). An empty token means none.
    pub fn metrics_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.metrics_token = (!token.is_empty()).then_some(token);
        self
    }

    /// The largest request body in bytes (default [`DEFAULT_BODY_LIMIT`]).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How often an event stream re-reads the store's change feed when the store's change
    /// signal cannot wake it (a custom backend without one; default
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

    /// Also serves requests whose `Host` is `host` (besides `localhost`,
    /// `127.0.0.1` and `[::1]`, on any port). Without a token, every other
    /// `Host` is refused with 403 `forbidden_host` (DNS rebinding); with a
    /// token, `Host` is checked only once a host has been allowed this way.
    pub fn allowed_host(mut self, host: AllowedHost) -> Self {
        self.allowed_hosts.push(host);
        self
    }

    /// Believes `proxy`'s user header on connections from its addresses: the user it names
    /// is the request's principal, with the `answer` scope (read and answer; tokens and
    /// webhooks still need an `admin` token). From anywhere else the header is ignored.
    pub fn trust_proxy(mut self, proxy: crate::proxy::TrustedProxy) -> Self {
        self.proxy = Some(proxy);
        self
    }

    /// The scheme browsers use to reach the server (default `http`): a
    /// state-changing request's `Origin` must be `SCHEME://HOST`. Set
    /// [`Scheme::HTTPS`] when a TLS proxy terminates in front of it.
    pub fn origin_scheme(mut self, scheme: Scheme) -> Self {
        self.origin_scheme = scheme;
        self
    }

    /// The router: the JSON API, the event stream, the page and its assets, and
    /// `GET /metrics` (Prometheus).
    pub fn build(self) -> Router {
        let hosts = HostPolicy {
            enforced: self.token.is_none() || !self.allowed_hosts.is_empty(),
            allowed: self.allowed_hosts,
            scheme: self.origin_scheme,
        };
        let state = Arc::new(AppState {
            hosts,
            event_poll: self.poll_interval,
            kit: self.kit,
            token: self.token,
            metrics_token: self.metrics_token,
            body_limit: self.body_limit,
            base_path: self.base_path,
            shutdown: self.shutdown,
            failures: crate::throttle::FailureThrottle::default(),
            proxy: self.proxy,
        });
        crate::api::routes(Arc::clone(&state))
            .merge(crate::page::routes(Arc::clone(&state)))
            .merge(crate::webhooks::routes(Arc::clone(&state)))
            .merge(crate::metrics::routes(Arc::clone(&state)))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&state),
                crate::auth::guard,
            ))
            .layer(axum::extract::DefaultBodyLimit::max(state.body_limit))
            .layer(axum::middleware::from_fn(crate::metrics::record))
    }
}
