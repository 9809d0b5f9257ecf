//! `/executions/{execution_id}`: the execution as people read it: its state, then one
//! timeline of its rounds (asked, answered by whom with which action, resolved or failed)
//! and its events (whose payloads are redacted by their writers), oldest first, with
//! links to the JSON API for the raw documents.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use m3_kit::{ExecutionEvent, RoundDiagnostics};
use m3_types::{ExecutionState, timestamp};
use maud::{Markup, html};
use serde_json::Value;
use time::OffsetDateTime;

use super::render::{self, answered_by, encode, error_page, html_response};
use crate::error::ApiError;
use crate::state::Shared;

/// The longest value text a timeline entry shows before it is cut.
const VALUE_TEXT_MAX: usize = 160;

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
                (summary(base, &snapshot, rounds.len(), events.len()))
                (super::authorization::section(&events, snapshot.lifecycle.is_terminal()))
                (timeline(base, &execution_id, &rounds, &events))
            };
            let title = format!("Execution {} · m3", short(&execution_id));
            html_response(StatusCode::OK, render::layout(base, &title, None, main))
        }
        Err(error) => error_page(base, &ApiError::from(error)),
    }
}

fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

fn summary(base: &str, state: &ExecutionState, rounds: usize, events: usize) -> Markup {
    let api = format!("{base}/api/v1/executions/{}", encode(&state.execution_id));
    html! {
        h1 { "Execution " code { (state.execution_id) } }
        dl class="summary" data-lifecycle=(state.lifecycle.as_str()) {
            dt { "Lifecycle" } dd { (state.lifecycle.as_str()) }
            dt { "Outcome" } dd { (state.outcome.map_or("-", |o| o.as_str())) }
            dt { "Created" } dd { (when(state.created_at)) }
            dt { "Finished" } dd { @match state.finished_at { Some(at) => (when(at)), None => "-" } }
            dt { "Tool calls" } dd { (state.tool_call_count) }
            dt { "Rounds" } dd { (rounds) }
            dt { "Events" } dd { (events) }
        }
        p class="meta" {
            "As JSON: " a href=(api) { "execution" } " · " a href={(api) "/rounds"} { "rounds" }
        }
    }
}

fn when(at: OffsetDateTime) -> Markup {
    let text = timestamp::format(at);
    html! { time datetime=(text) { (text) } }
}

/// One entry of the timeline, to be sorted by time.
enum Entry<'a> {
    Asked(&'a RoundDiagnostics),
    Decided(&'a RoundDiagnostics, OffsetDateTime),
    Event(&'a ExecutionEvent),
}

impl Entry<'_> {
    fn at(&self) -> OffsetDateTime {
        match self {
            Self::Asked(round) => round.created_at,
            Self::Decided(_, at) => *at,
            Self::Event(event) => event.timestamp,
        }
    }
}

fn timeline(
    base: &str,
    execution_id: &str,
    rounds: &[RoundDiagnostics],
    events: &[ExecutionEvent],
) -> Markup {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    for round in rounds {
        entries.push(Entry::Asked(round));
        let decided = round
            .failed_at
            .or(round.resolved_at)
            .or(round.response_validated_at);
        if let Some(at) = decided {
            entries.push(Entry::Decided(round, at));
        }
    }
    entries.extend(events.iter().map(Entry::Event));
    entries.sort_by_key(Entry::at);
    html! {
        h2 id="timeline-heading" { "Timeline" }
        @if entries.is_empty() { p { "Nothing happened yet." } }
        ol class="timeline" aria-labelledby="timeline-heading" {
            @for entry in &entries { (entry_item(base, execution_id, entry)) }
        }
    }
}

fn entry_item(base: &str, execution_id: &str, entry: &Entry<'_>) -> Markup {
    match entry {
        Entry::Asked(round) => {
            let href = format!(
                "{base}/executions/{}/rounds/{}",
                encode(execution_id),
                encode(&round.round_id)
            );
            html! {
                li class="entry round-asked" data-round-id=(round.round_id) data-round-status=(round.status.as_str()) {
                    (when(round.created_at)) " "
                    strong { "Round " (round.round_index) " asked" } ": "
                    (round.operation_kind.as_str()) " " (round.operation_name) " · server " (round.server)
                    " · now " a href=(href) { (round.status.as_str()) }
                    p class="meta" { "Requests: " (round.request_keys.join(", ")) }
                }
            }
        }
        Entry::Decided(round, at) => html! {
            li class="entry round-decided" data-round-id=(round.round_id) {
                (when(*at)) " "
                strong { "Round " (round.round_index) " " (decision(round)) }
                @if let Some(code) = &round.failure_code { " (" (code) ")" }
                @if let Some(message) = &round.failure_message { ": " (message) }
                @if let Some(actor) = &round.answered_by { (answered_by(actor)) }
                @if let Some(responses) = &round.redacted_responses { (responses_list(responses)) }
            }
        },
        Entry::Event(event) => html! {
            li class="entry event" data-sequence=(event.sequence) {
                (when(event.timestamp)) " " strong { (event.kind) }
                (payload(&event.payload))
            }
        },
    }
}

fn decision(round: &RoundDiagnostics) -> &'static str {
    if round.failed_at.is_some() {
        "failed"
    } else if round.resolved_at.is_some() {
        "answered and resolved"
    } else {
        "answered"
    }
}

/// Each request's action and its (redacted) fields, as a list.
fn responses_list(responses: &serde_json::Map<String, Value>) -> Markup {
    html! {
        ul class="responses" {
            @for (key, response) in responses {
                li data-request-key=(key) {
                    strong { (key) } ": " (response.get("action").and_then(Value::as_str).unwrap_or("?"))
                    @if let Some(Value::Object(content)) = response.get("content") {
                        " · " (fields(content))
                    }
                }
            }
        }
    }
}

/// `name value` pairs of an object, each value as short text.
fn fields(object: &serde_json::Map<String, Value>) -> Markup {
    html! {
        @for (index, (name, value)) in object.iter().enumerate() {
            @if index > 0 { ", " }
            span class="field-value" { em { (name) } " " (value_text(value)) }
        }
    }
}

fn payload(value: &Value) -> Markup {
    match value {
        Value::Null => html! {},
        Value::Object(object) if object.is_empty() => html! {},
        Value::Object(object) => html! { p class="meta payload" { (fields(object)) } },
        other => html! { p class="meta payload" { (value_text(other)) } },
    }
}

/// A value as one short line (strings without quotes; long text cut with "…").
fn value_text(value: &Value) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= VALUE_TEXT_MAX {
        return text;
    }
    let cut: String = text.chars().take(VALUE_TEXT_MAX).collect();
    format!("{cut}…")
}
