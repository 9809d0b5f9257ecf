//! `GET /api/v1/events`: the change feed as Server-Sent Events.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::StreamExt;
use m3_kit::{ChangeRecord, Cursor};
use serde::Deserialize;

use super::follow::{PAGE, follow, latest_cursor};
use crate::error::ApiResult;
use crate::state::Shared;

/// `?after=CURSOR`: where a client without `Last-Event-ID` (or a page rendered at a cursor)
/// resumes.
#[derive(Debug, Deserialize)]
pub(crate) struct ResumeQuery {
    after: Option<String>,
}

/// The stream, resumed after `Last-Event-ID` (or `?after=`); without either, from now on.
/// A malformed or future cursor is refused (422, `invalid_argument`), one behind what
/// retention removed is 410 (`cursor_expired`), before any event is sent.
pub(crate) async fn stream(
    State(state): State<Shared>,
    headers: HeaderMap,
    query: Result<Query<ResumeQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let header = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let asked = header.or_else(|| query.ok().and_then(|Query(query)| query.after));
    let after = match asked {
        Some(text) => text.trim().parse::<Cursor>()?,
        None => latest_cursor(&state.kit).await?,
    };
    // The first read happens here, so a bad cursor is an HTTP error, not a dead stream.
    let first = state.kit.read_changes(after, PAGE).await?;
    let events = follow(state.kit.clone(), first.records, after, state.event_poll)
        .map(|record| Ok::<_, Infallible>(to_event(&record)))
        .take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn to_event(record: &ChangeRecord) -> Event {
    let data = serde_json::to_string(record).unwrap_or_else(|_| "{}".to_owned());
    Event::default()
        .id(record.cursor.to_string())
        .event(record.kind.as_str())
        .data(data)
}
