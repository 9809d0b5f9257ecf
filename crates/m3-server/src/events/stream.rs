//! `GET /api/v1/events`: the hub's facts as Server-Sent Events.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::Fact;
use super::hub::Subscription;
use crate::error::ApiResult;
use crate::state::Shared;

/// `?after=ID`: where a page rendered with a cursor resumes.
#[derive(Debug, Deserialize)]
pub(crate) struct ResumeQuery {
    after: Option<String>,
}

/// The stream, resumed after `Last-Event-ID` (or `?after=ID`, for a page that
/// starts from the cursor it was rendered with).
pub(crate) async fn stream(
    State(state): State<Shared>,
    headers: HeaderMap,
    query: Result<Query<ResumeQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let header = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    // A query that does not read (a repeated `after`) resumes from the start,
    // as an absent one does.
    let after = header.or_else(|| query.ok().and_then(|Query(query)| query.after));
    let (epoch, subscription) = state.hub.subscribe(after.as_deref()).await?;
    let events = events(epoch, subscription).take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn events(
    epoch: String,
    subscription: Subscription,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    let Subscription { replay, live } = subscription;
    let replayed = stream::iter(replay);
    // A subscriber that fell behind is disconnected: it resumes exactly from
    // its last id instead of silently missing facts.
    let live = stream::unfold(live, |mut live| async move {
        match live.recv().await {
            Ok(fact) => Some((fact, live)),
            Err(RecvError::Lagged(_) | RecvError::Closed) => None,
        }
    });
    replayed
        .chain(live)
        .map(move |fact| Ok(to_event(&epoch, &fact)))
}

fn to_event(epoch: &str, fact: &Fact) -> Event {
    Event::default()
        .id(fact.id(epoch))
        .event(fact.kind)
        .data(fact.data.to_string())
}
