//! The JSON API of HTTP.md (`/api/v1`) and `/healthz`: each handler is one
//! call of the public kit API.

use axum::Json;
use axum::Router;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use m3_kit::{ListExecutions, RoundDetails};
use m3_types::{ElicitationResponse, ExecutionStatus, ResponseMap};
use serde_json::{Map, Value, json};

use crate::config::Shared;
use crate::error::{ApiError, ApiResult};

/// The API routes.
pub(crate) fn routes(state: Shared) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/api/v1/executions", get(executions))
        .route("/api/v1/executions/{execution_id}", get(execution))
        .route("/api/v1/executions/{execution_id}/rounds", get(rounds))
        .route(
            "/api/v1/executions/{execution_id}/rounds/{round_id}",
            get(round),
        )
        .route(
            "/api/v1/executions/{execution_id}/rounds/{round_id}/responses",
            post(respond),
        )
        .route("/api/v1/executions/{execution_id}/cancel", post(cancel))
        .route("/api/v1/rounds", get(inbox))
        .route("/api/v1/events", get(crate::events::stream))
        .with_state(state)
}

async fn health(State(state): State<Shared>) -> ApiResult<Json<Value>> {
    state
        .kit
        .executions_where(ListExecutions::new().with_limit(1))
        .await?;
    Ok(Json(json!({"status": "ok"})))
}

/// `(name, value)` pairs of a query string.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

fn list_query(query: Option<&str>) -> ApiResult<ListExecutions> {
    let mut list = ListExecutions::new();
    for (name, value) in query_pairs(query) {
        match name.as_str() {
            "lifecycle" if !value.is_empty() => {
                let lifecycle: ExecutionStatus = value
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("unknown lifecycle '{value}'")))?;
                list = list.with_lifecycle(lifecycle);
            }
            "limit" if !value.is_empty() => {
                let limit: u32 = value.parse().map_err(|_| {
                    ApiError::bad_request(format!("limit '{value}' is not a count"))
                })?;
                list = list.with_limit(limit);
            }
            _ => {}
        }
    }
    Ok(list)
}

async fn executions(
    State(state): State<Shared>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let summaries = state
        .kit
        .executions_where(list_query(query.as_deref())?)
        .await?;
    let states: Vec<_> = summaries.iter().map(|s| &s.state).collect();
    Ok(Json(to_json(&states)?))
}

async fn execution(
    State(state): State<Shared>,
    Path(execution_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let snapshot = state.kit.attach(&execution_id).await?.snapshot().await?;
    Ok(Json(to_json(&snapshot)?))
}

async fn rounds(
    State(state): State<Shared>,
    Path(execution_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let rounds = state.kit.attach(&execution_id).await?.rounds().await?;
    Ok(Json(to_json(&rounds)?))
}

async fn inbox(State(state): State<Shared>, RawQuery(query): RawQuery) -> ApiResult<Json<Value>> {
    for (name, value) in query_pairs(query.as_deref()) {
        if name == "status" && value != "pending" {
            return Err(ApiError::bad_request(
                "the inbox lists pending rounds only (status=pending)",
            ));
        }
    }
    Ok(Json(to_json(&state.kit.pending_rounds().await?)?))
}

async fn round(
    State(state): State<Shared>,
    Path((execution_id, round_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let details = state
        .kit
        .attach(&execution_id)
        .await?
        .round(&round_id)
        .await?;
    Ok(Json(round_json(&details)?))
}

/// A round as the API shows it: the public round's fields plus `status`,
/// timestamps, failure and the redacted responses (never the raw ones).
pub(crate) fn round_json(details: &RoundDetails) -> ApiResult<Value> {
    let mut out = match to_json(&details.round)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if let Value::Object(diagnostics) = to_json(&details.diagnostics)? {
        for (key, value) in diagnostics {
            out.entry(key).or_insert(value);
        }
    }
    Ok(Value::Object(out))
}

async fn respond(
    State(state): State<Shared>,
    Path((execution_id, round_id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = body_bytes(body, state.body_limit)?;
    let (responses, key) = parse_submission(&body)?;
    let handle = state.kit.attach(&execution_id).await?;
    handle
        .respond_elicitation(&round_id, responses, &key)
        .await?;
    Ok(Json(round_json(&handle.round(&round_id).await?)?))
}

/// The body, or 413 when it is over the limit (400 for any other read error).
pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(limit)
        } else {
            ApiError::bad_request(format!("cannot read the request body: {rejection}"))
        }
    })
}

/// `{"responses": {KEY: ElicitationResponse}, "idempotency_key": "..."}`.
fn parse_submission(body: &[u8]) -> ApiResult<(ResponseMap, String)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| *k != "responses" && *k != "idempotency_key")
    {
        return Err(ApiError::bad_request(format!(
            "unknown body field '{unknown}'"
        )));
    }
    let Some(Value::String(key)) = fields.remove("idempotency_key") else {
        return Err(ApiError::bad_request("idempotency_key must be a string"));
    };
    let Some(Value::Object(raw)) = fields.remove("responses") else {
        return Err(ApiError::bad_request(
            "responses must be an object of request key to response",
        ));
    };
    let mut responses = ResponseMap::new();
    for (request_key, raw) in raw {
        let response: ElicitationResponse = serde_json::from_value(raw).map_err(|e| {
            ApiError::from(
                m3_types::Error::managed_input_validation(format!("invalid response: {e}"))
                    .with_detail("request_key", request_key.as_str()),
            )
        })?;
        responses.insert(request_key, response);
    }
    Ok((responses, key))
}

async fn cancel(
    State(state): State<Shared>,
    Path(execution_id): Path<String>,
) -> ApiResult<Response> {
    let handle = state.kit.attach(&execution_id).await?;
    let snapshot = handle.snapshot().await?;
    if snapshot.lifecycle != ExecutionStatus::Finished {
        // The durable flag first (seen by the worker in any process); the
        // wait for a local worker's outcome runs in the background.
        state
            .kit
            .store()
            .request_cancel(&execution_id, Some("cancelled through the HTTP API"))
            .await?;
        tokio::spawn(async move {
            if let Err(error) = handle.cancel().await {
                tracing::warn!(%error, "cancelling a local execution failed");
            }
        });
    }
    let body = json!({"execution_id": execution_id, "cancel_requested": true});
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Serializes a public value (a failure here is a bug, reported as 500).
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> ApiResult<Value> {
    serde_json::to_value(value).map_err(|e| {
        ApiError::from(m3_types::Error::protocol("cannot serialize the answer").with_source(e))
    })
}
