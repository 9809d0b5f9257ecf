//! The webhook subscriptions in the JSON API (`/api/v1/webhooks`): what `m3 webhooks` does,
//! behind the same guard as the rest of the API (the token, when one is set).

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use m3_kit::subscriptions::{
    NewSubscription, Subscription, SubscriptionEdit, SubscriptionStore, WebhookFormat,
    WebhookSecret, rules,
};
use m3_types::ChangeRecordKind;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::Shared;

/// How long a rotated secret keeps signing by default (as `m3 webhooks rotate-secret`).
const DEFAULT_KEEP_PREVIOUS: Duration = Duration::from_secs(24 * 60 * 60);

/// The webhook routes.
pub(crate) fn routes(state: Shared) -> Router {
    Router::new()
        .route("/api/v1/webhooks", get(list).post(add))
        .route("/api/v1/webhooks/{id}", get(show).delete(remove))
        .route("/api/v1/webhooks/{id}/disable", post(disable))
        .route("/api/v1/webhooks/{id}/enable", post(enable))
        .route("/api/v1/webhooks/{id}/rotate-secret", post(rotate))
        .with_state(state)
}

async fn store(state: &Shared) -> ApiResult<std::sync::Arc<dyn SubscriptionStore>> {
    Ok(state.kit.store().subscription_store().await?)
}

/// The body of `POST /api/v1/webhooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    url: String,
    #[serde(default)]
    events: Option<Vec<ChangeRecordKind>>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    format: WebhookFormat,
    #[serde(default)]
    allow_loopback: bool,
}

async fn add(State(state): State<Shared>, ApiJson(body): ApiJson<AddBody>) -> ApiResult<Response> {
    let secret = WebhookSecret::generate()?;
    let mut new = NewSubscription::new(body.url, secret.clone())
        .with_description(body.description)
        .with_format(body.format)
        .allow_loopback(body.allow_loopback);
    if let Some(events) = body.events {
        new = new.with_events(events);
    }
    if let Some(server) = body.server {
        new = new.with_server(server);
    }
    let added = store(&state).await?.create_subscription(new).await?;
    let shown = json!({"subscription": added, "secret": secret.expose()});
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

async fn list(State(state): State<Shared>) -> ApiResult<Json<Value>> {
    let all = store(&state).await?.list_subscriptions().await?;
    Ok(Json(json!({"subscriptions": all})))
}

async fn show(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> ApiResult<Json<Subscription>> {
    let found = store(&state).await?.get_subscription(&id).await?;
    Ok(Json(
        found.ok_or_else(|| ApiError::from(rules::missing(&id)))?,
    ))
}

async fn remove(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if store(&state).await?.remove_subscription(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(rules::missing(&id).into())
    }
}

async fn disable(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> ApiResult<Json<Subscription>> {
    let edit = SubscriptionEdit::Disable {
        reason: "disabled".into(),
    };
    Ok(Json(
        store(&state).await?.edit_subscription(&id, edit).await?,
    ))
}

async fn enable(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> ApiResult<Json<Subscription>> {
    let edit = SubscriptionEdit::Enable;
    Ok(Json(
        store(&state).await?.edit_subscription(&id, edit).await?,
    ))
}

/// The body of `POST /api/v1/webhooks/{id}/rotate-secret` (optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RotateBody {
    /// Seconds the previous secret keeps signing (default 24 h).
    #[serde(default)]
    keep_previous_seconds: Option<u64>,
}

async fn rotate(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let body: RotateBody = if body.is_empty() {
        RotateBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not a rotation: {e}")))?
    };
    let keep = body
        .keep_previous_seconds
        .map_or(DEFAULT_KEEP_PREVIOUS, Duration::from_secs);
    let secret = WebhookSecret::generate()?;
    let now = m3_kit::store_now(state.kit.store().clock().as_ref());
    let edit = SubscriptionEdit::RotateSecret {
        secret: secret.clone(),
        keep_previous_until: now + keep,
    };
    let rotated = store(&state).await?.edit_subscription(&id, edit).await?;
    Ok(Json(
        json!({"subscription": rotated, "secret": secret.expose()}),
    ))
}
