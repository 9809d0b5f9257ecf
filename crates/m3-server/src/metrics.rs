//! Prometheus metrics over HTTP: `GET /metrics` in the server's router (behind the guard:
//! the `read` scope, or the server's metrics token), the middleware that counts and times
//! every request by route template, and [`serve_metrics`], the small listener of
//! `m3 worker --metrics`.

use std::future::Future;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use m3_kit::AsyncMcpTestKit;
use m3_kit::metrics::Metrics;
use m3_types::{Error, Result};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::error::ApiResult;
use crate::state::Shared;

/// The path of the exposition.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// The `/metrics` route of the server's router.
pub(crate) fn routes(state: Shared) -> Router {
    Router::new()
        .route(METRICS_PATH, get(scrape))
        .with_state(state)
}

async fn scrape(State(state): State<Shared>, headers: HeaderMap) -> ApiResult<Response> {
    Ok(exposition(&state.kit, &headers).await?)
}

/// The store gauges read now, and every metric of the process, in the format the
/// request's `Accept` asks for (OpenMetrics for Prometheus, else the classic text format).
async fn exposition(kit: &AsyncMcpTestKit, headers: &HeaderMap) -> Result<Response> {
    let accept = headers.get(ACCEPT).and_then(|value| value.to_str().ok());
    let (content_type, text) = m3_kit::metrics::scrape_for(kit, accept).await?;
    Ok(([(CONTENT_TYPE, content_type)], text).into_response())
}

/// Counts and times every request in `m3_http_requests_total` and
/// `m3_http_request_duration_seconds`, labelled with the matched route template (never the
/// raw path, which may carry ids or an answer link's token), `unmatched` otherwise; and
/// runs it in an `m3.http.request` span with the same route and its status.
pub(crate) async fn record(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let span = tracing::info_span!(
        "m3.http.request",
        http.route = %route,
        http.request.method = %method,
        http.response.status_code = tracing::field::Empty,
    );
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    Metrics::global().observe_http_request(
        &route,
        &method,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// Serves only `GET /metrics` over `kit` on `listener` (no credential: bind it to loopback
/// or a private network) until `shutdown` completes: the listener of `m3 worker --metrics`.
///
/// ```no_run
/// # async fn demo(kit: m3_kit::AsyncMcpTestKit) -> m3_types::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await.map_err(|e| m3_types::Error::transport(e.to_string()))?;
/// m3_server::serve_metrics(listener, kit, std::future::pending()).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// `transport_error` when the listener fails.
pub async fn serve_metrics(
    listener: TcpListener,
    kit: AsyncMcpTestKit,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let router = Router::new().route(
        METRICS_PATH,
        get(move |headers: HeaderMap| {
            let kit = kit.clone();
            async move {
                exposition(&kit, &headers)
                    .await
                    .map_err(crate::error::ApiError::from)
            }
        }),
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::transport(format!("the metrics listener failed: {e}")))
}
