//! The JSON API of HTTP.md (`/api/v1`) and `/healthz`: each handler is one
//! call of the public kit API.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use m3_kit::{
    HistoryQuery, HistoryStatus, ListExecutions, PENDING_PAGE_MAX, PendingQuery, PendingSort,
    RoundAnswer, RoundDetails, RoundOutcome, check_answer_count,
};
use m3_types::{ActorSurface, Cursor, ElicitationResponse, ExecutionStatus, ResponseMap};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery};
use crate::principal::Principal;
use crate::state::Shared;

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
        .route("/api/v1/rounds/responses", post(respond_each))
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

/// `?lifecycle=&limit=` of the execution list (an empty value is no filter).
#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    lifecycle: String,
    #[serde(default)]
    limit: String,
}

impl ListQuery {
    fn to_list(&self) -> ApiResult<ListExecutions> {
        let mut list = ListExecutions::new();
        if !self.lifecycle.is_empty() {
            let value = &self.lifecycle;
            let lifecycle: ExecutionStatus = value
                .parse()
                .map_err(|_| ApiError::bad_request(format!("unknown lifecycle '{value}'")))?;
            list = list.with_lifecycle(lifecycle);
        }
        if !self.limit.is_empty() {
            let value = &self.limit;
            let limit: u32 = value
                .parse()
                .map_err(|_| ApiError::bad_request(format!("limit '{value}' is not a count")))?;
            list = list.with_limit(limit);
        }
        Ok(list)
    }
}

async fn executions(
    State(state): State<Shared>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<Value>> {
    let summaries = state.kit.executions_where(query.to_list()?).await?;
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

/// `?status=` of `/api/v1/rounds`: `pending` (the default) lists the inbox; `answered`,
/// `resolved` or `failed` pages through the answer history, newest first, filtered by
/// `server=` and `principal=`, `before=` the previous page's `next`, `limit=` per page.
#[derive(Debug, Default, Deserialize)]
struct RoundsQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    principal: String,
    #[serde(default)]
    before: String,
    #[serde(default)]
    limit: String,
    #[serde(default)]
    offset: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    q: String,
}

impl RoundsQuery {
    /// Whether a pending listing asks for a page (any of `server`, `operation`, `q`,
    /// `sort`, `offset`, `limit`); without them it is the whole inbox as an array.
    fn pages_pending(&self) -> bool {
        [
            &self.server,
            &self.operation,
            &self.q,
            &self.sort,
            &self.offset,
            &self.limit,
        ]
        .iter()
        .any(|value| !value.is_empty())
    }

    fn pending(&self) -> ApiResult<PendingQuery> {
        let count = |name: &str, value: &str, default: usize| -> ApiResult<usize> {
            if value.is_empty() {
                return Ok(default);
            }
            value
                .parse()
                .map_err(|_| ApiError::bad_request(format!("{name} '{value}' is not a count")))
        };
        let offset = count("offset", &self.offset, 0)?;
        let limit = count("limit", &self.limit, PENDING_PAGE_MAX)?;
        let mut query = PendingQuery::new()
            .sort(PendingSort::parse(&self.sort)?)
            .page(offset, limit);
        if !self.server.is_empty() {
            query = query.server(self.server.clone());
        }
        if !self.operation.is_empty() {
            query = query.operation(self.operation.clone());
        }
        if !self.q.is_empty() {
            query = query.text(self.q.clone());
        }
        Ok(query)
    }

    fn history(&self) -> ApiResult<HistoryQuery> {
        let mut query = HistoryQuery::new().status(HistoryStatus::parse(&self.status)?);
        if !self.server.is_empty() {
            query = query.server(self.server.clone());
        }
        if !self.principal.is_empty() {
            query = query.principal(self.principal.clone());
        }
        if !self.before.is_empty() {
            query = query.before(self.before.parse::<Cursor>()?);
        }
        if !self.limit.is_empty() {
            let limit = self.limit.parse().map_err(|_| {
                ApiError::bad_request(format!("limit '{}' is not a count", self.limit))
            })?;
            query = query.limit(limit);
        }
        Ok(query)
    }
}

async fn inbox(
    State(state): State<Shared>,
    ApiQuery(query): ApiQuery<RoundsQuery>,
) -> ApiResult<Json<Value>> {
    if (query.status.is_empty() || query.status == "pending") && query.pages_pending() {
        let pending = query.pending()?;
        let page = state.kit.pending_page(&pending).await?;
        let end = pending.offset.saturating_add(page.rounds.len());
        let next = (end < page.total).then_some(end);
        return Ok(Json(json!({
            "rounds": to_json(&page.rounds)?,
            "total": page.total,
            "next_offset": next,
        })));
    }
    if query.status.is_empty() || query.status == "pending" {
        return Ok(Json(to_json(
            &state.kit.pending_rounds_in_context().await?,
        )?));
    }
    let page = state.kit.history(&query.history()?).await?;
    let mut rounds = Vec::with_capacity(page.entries.len());
    for entry in &page.entries {
        let mut round = round_json(&entry.details)?;
        round["cursor"] = json!(entry.cursor);
        round["decided_at"] = json!(m3_types::timestamp::format(entry.at));
        round["decision"] = json!(entry.kind.as_str());
        rounds.push(round);
    }
    Ok(Json(json!({"rounds": rounds, "next": page.next})))
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
fn round_json(details: &RoundDetails) -> ApiResult<Value> {
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

/// `{"responses": {KEY: ElicitationResponse}, "idempotency_key": "...",
/// "accept_defaults": false}`.
///
/// Each response is read on its own, so a malformed one is the store's
/// `managed_input_invalid` (422, naming its request key), not a 400. With
/// `accept_defaults`, fields an accepted form answer leaves out take the schema's defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Submission {
    responses: Map<String, Value>,
    idempotency_key: String,
    #[serde(default)]
    accept_defaults: bool,
}

impl Submission {
    fn responses(self) -> ApiResult<(ResponseMap, String)> {
        let mut responses = ResponseMap::new();
        for (request_key, raw) in self.responses {
            let response: ElicitationResponse = serde_json::from_value(raw).map_err(|e| {
                ApiError::from(
                    m3_types::Error::managed_input_validation(format!("invalid response: {e}"))
                        .with_detail("request_key", request_key.as_str()),
                )
            })?;
            responses.insert(request_key, response);
        }
        Ok((responses, self.idempotency_key))
    }
}

async fn respond(
    State(state): State<Shared>,
    Extension(principal): Extension<Principal>,
    Path((execution_id, round_id)): Path<(String, String)>,
    ApiJson(submission): ApiJson<Submission>,
) -> ApiResult<Json<Value>> {
    let accept_defaults = submission.accept_defaults;
    let (responses, key) = submission.responses()?;
    // One read of the round and its write: the reply is the committed round.
    let answer = RoundAnswer::new(execution_id, round_id, responses, key)
        .accept_defaults(accept_defaults)
        .actor(principal.actor(ActorSurface::Api));
    let details = state.kit.answer(answer).await?;
    let mut body = round_json(&details)?;
    if let Value::Object(map) = &mut body {
        // Whether this call wrote nothing because the same answer was already stored.
        map.insert("replayed".to_owned(), Value::Bool(details.replayed));
    }
    Ok(Json(body))
}

/// `{"answers": [{"execution_id", "round_id", "responses", "idempotency_key",
/// "accept_defaults"}]}`: the single round's body per item, plus the round's ids.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkSubmission {
    answers: Vec<BulkItem>,
}

/// One round of a bulk answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkItem {
    execution_id: String,
    round_id: String,
    responses: Map<String, Value>,
    idempotency_key: String,
    #[serde(default)]
    accept_defaults: bool,
}

/// Answers each listed round on its own (one refused answer does not stop the others):
/// 200 with one result per item, in order, and the counts; 422 `invalid_argument` for a
/// list over [`ANSWER_EACH_MAX`] (nothing answered).
async fn respond_each(
    State(state): State<Shared>,
    Extension(principal): Extension<Principal>,
    ApiJson(bulk): ApiJson<BulkSubmission>,
) -> ApiResult<Json<Value>> {
    check_answer_count(bulk.answers.len())?;
    let actor = principal.actor(ActorSurface::Api);
    // An item whose responses do not read is its own failure; the others are answered.
    let mut results: Vec<Option<Value>> = Vec::with_capacity(bulk.answers.len());
    let mut answers = Vec::new();
    for item in bulk.answers {
        let (execution_id, round_id) = (item.execution_id, item.round_id);
        let accept_defaults = item.accept_defaults;
        let key = item.idempotency_key.clone();
        let submission = Submission {
            responses: item.responses,
            idempotency_key: item.idempotency_key,
            accept_defaults,
        };
        match submission.responses() {
            Ok((responses, key)) => {
                answers.push(
                    RoundAnswer::new(execution_id, round_id, responses, key)
                        .accept_defaults(accept_defaults)
                        .actor(actor.clone()),
                );
                results.push(None);
            }
            Err(error) => {
                results.push(Some(failed_item(&execution_id, &round_id, &key, error)));
            }
        }
    }
    let outcome = state.kit.answer_each(answers).await?;
    let (answered, replayed) = (outcome.answered(), outcome.replayed());
    let mut committed = outcome.rounds.into_iter();
    let mut rounds = Vec::with_capacity(results.len());
    for result in results {
        let item = match (result, committed.next()) {
            (Some(failed), _) => failed,
            (None, Some(outcome)) => item_json(outcome)?,
            (None, None) => {
                return Err(ApiError::from(m3_types::Error::protocol(
                    "the bulk answer returned fewer outcomes than answers",
                )));
            }
        };
        rounds.push(item);
    }
    let failed = rounds.len() - answered;
    Ok(Json(json!({
        "rounds": rounds,
        "answered": answered,
        "replayed": replayed,
        "failed": failed,
    })))
}

/// One round's result: `outcome` `committed` or `replayed` with the round as the single
/// endpoint answers it, or `failed` with the error object; `status` is the HTTP status
/// the single endpoint would have answered.
fn item_json(outcome: RoundOutcome) -> ApiResult<Value> {
    let replayed = outcome.is_replayed();
    match outcome.result {
        Ok(details) => Ok(json!({
            "execution_id": outcome.execution_id,
            "round_id": outcome.round_id,
            "idempotency_key": outcome.idempotency_key,
            "outcome": if replayed { "replayed" } else { "committed" },
            "status": 200,
            "round": round_json(&details)?,
        })),
        Err(error) => Ok(failed_item(
            &outcome.execution_id,
            &outcome.round_id,
            &outcome.idempotency_key,
            ApiError::from(error),
        )),
    }
}

fn failed_item(execution_id: &str, round_id: &str, key: &str, error: ApiError) -> Value {
    json!({
        "execution_id": execution_id,
        "round_id": round_id,
        "idempotency_key": key,
        "outcome": "failed",
        "status": error.status.as_u16(),
        "error": {"code": error.code, "message": error.message, "details": error.details},
    })
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
fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> ApiResult<Value> {
    serde_json::to_value(value).map_err(|e| {
        ApiError::from(m3_types::Error::protocol("cannot serialize the answer").with_source(e))
    })
}
