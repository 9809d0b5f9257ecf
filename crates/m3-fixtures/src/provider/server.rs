//! The HTTP side: one axum handler that routes, records and answers every request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::record::{RecordedRequest, Recorder};
use super::script::ProviderScript;
use super::wire;

/// Request bodies up to this size are accepted (Codex resends the whole history).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// What every handler call shares.
#[derive(Debug)]
pub(crate) struct Shared {
    script: ProviderScript,
    pub(crate) recorder: Recorder,
    responses: AtomicU64,
}

impl Shared {
    pub(crate) fn new(script: ProviderScript, record: Option<PathBuf>) -> Self {
        Shared {
            script,
            recorder: Recorder::new(record),
            responses: AtomicU64::new(0),
        }
    }
}

/// Serves until `cancel` fires, then lets connections in flight finish.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let router = Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared);
    let outcome = axum::serve(listener, router)
        .with_graceful_shutdown(cancel.cancelled_owned())
        .await;
    if let Err(error) = outcome {
        tracing::warn!(%error, "example provider stopped with an error");
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let body = body_value(&body);
    let (status, refused, response) = answer(&shared, &method, &path, &headers, &body);
    tracing::debug!(%method, %path, status = status.as_u16(), "example provider request");
    shared
        .recorder
        .record(RecordedRequest {
            method: method.as_str().to_owned(),
            path,
            headers: header_map(&headers),
            body,
            status: status.as_u16(),
            refused,
        })
        .await;
    response
}

/// Routes one request: `(status, refused, response)`.
fn answer(
    shared: &Shared,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &Value,
) -> (StatusCode, bool, Response) {
    if headers.contains_key(header::AUTHORIZATION) {
        let status = StatusCode::UNAUTHORIZED;
        let body = wire::error_body(
            "unauthorized",
            "the m3 example provider refuses requests with an authorization header",
        );
        return (status, true, json_response(status, &body));
    }
    match (method, path) {
        (&Method::POST, "/v1/responses" | "/responses") => responses(shared, body),
        (&Method::GET, "/v1/models" | "/models") => {
            let status = StatusCode::OK;
            let list = wire::model_list(&shared.script.model);
            (status, false, json_response(status, &list))
        }
        _ => {
            let status = StatusCode::NOT_FOUND;
            let body = wire::error_body("not_found", &format!("no route for {method} {path}"));
            (status, false, json_response(status, &body))
        }
    }
}

fn responses(shared: &Shared, body: &Value) -> (StatusCode, bool, Response) {
    if !body.is_object() {
        let status = StatusCode::BAD_REQUEST;
        let error = wire::error_body("invalid_body", "the request body is not a JSON object");
        return (status, false, json_response(status, &error));
    }
    let outputs = wire::function_call_outputs(body);
    let item = wire::output_item(&shared.script, outputs);
    let number = shared
        .responses
        .fetch_add(1, Ordering::Relaxed)
        .saturating_add(1);
    let sse = wire::sse_reply(&format!("resp_{number}"), &shared.script.model, body, item);
    let response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        sse,
    )
        .into_response();
    (StatusCode::OK, false, response)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The body as JSON, `null` when empty, else a JSON string of its lossy UTF-8 text.
fn body_value(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// Header names are already lower-case in `http`; repeated values are joined with ", ".
fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        map.entry(name.as_str().to_owned())
            .and_modify(|existing| {
                existing.push_str(", ");
                existing.push_str(&value);
            })
            .or_insert(value);
    }
    map
}
