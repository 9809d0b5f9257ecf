//! `/executions/{execution_id}`: lifecycle, rounds with redacted responses,
//! and the event log (whose payloads are redacted by their writers).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use m3_kit::{ExecutionEvent, RoundDiagnostics};
use m3_types::{ExecutionState, timestamp};
use maud::{Markup, html};

use super::render::{self, answered_by, encode, error_page, html_response, json_text};
use crate::error::ApiError;
use crate::state::Shared;

pub(super) async fn page(
    State(state): State<Shared>,
    Path(execution_id): Path<String>,
) -> Response {
    let base = &state.base_path;
    let loaded = async {
        let handle = state.kit.attach(&execution_id).await?;
        let snapshot = handle.snapshot().await?;
        let rounds = handle.rounds().await?;
        let events = handle.events(None).await?;
        Ok::<_, m3_types::Error>((snapshot, rounds, events))
    };
    match loaded.await {
        Ok((snapshot, rounds, events)) => {
            let main = html! {
                (summary(&snapshot))
                (rounds_table(base, &execution_id, &rounds))
                (events_list(&events))
            };
            html_response(
                StatusCode::OK,
                render::layout(base, "m3 execution", None, main),
            )
        }
        Err(error) => error_page(base, &ApiError::from(error)),
    }
}

fn summary(state: &ExecutionState) -> Markup {
    html! {
        h1 { "Execution " code { (state.execution_id) } }
        dl class="summary" data-lifecycle=(state.lifecycle.as_str()) {
            dt { "lifecycle" } dd { (state.lifecycle.as_str()) }
            dt { "outcome" } dd { (state.outcome.map_or("-", |o| o.as_str())) }
            dt { "created" } dd { (timestamp::format(state.created_at)) }
            dt { "finished" } dd { (state.finished_at.map_or_else(|| "-".to_owned(), timestamp::format)) }
        }
    }
}

fn rounds_table(base: &str, execution_id: &str, rounds: &[RoundDiagnostics]) -> Markup {
    html! {
        h2 { "Rounds" }
        @if rounds.is_empty() { p { "No rounds." } }
        @for round in rounds {
            section class="round-summary" data-round-id=(round.round_id) data-round-status=(round.status.as_str()) {
                h3 {
                    "Round " (round.round_index) ": " (round.operation_kind.as_str()) " " (round.operation_name)
                    " · " a href={(base) "/executions/" (encode(execution_id)) "/rounds/" (encode(&round.round_id))} { (round.status.as_str()) }
                }
                p class="meta" {
                    "server " (round.server) " · asked " (timestamp::format(round.created_at))
                    @if let Some(code) = &round.failure_code { " · failed: " (code) }
                    @if let Some(message) = &round.failure_message { " (" (message) ")" }
                }
                @if let Some(actor) = &round.answered_by {
                    (answered_by(actor))
                }
                @if let Some(responses) = &round.redacted_responses {
                    p { "Responses (redacted):" }
                    (json_text(&serde_json::Value::Object(responses.clone())))
                }
            }
        }
    }
}

fn events_list(events: &[ExecutionEvent]) -> Markup {
    html! {
        h2 { "Events" }
        ol class="events" start="0" {
            @for event in events {
                li data-sequence=(event.sequence) {
                    strong { (event.kind) } " "
                    time { (timestamp::format(event.timestamp)) }
                    @if !event.payload.is_null() { (json_text(&event.payload)) }
                }
            }
        }
    }
}
