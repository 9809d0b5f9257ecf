//! `GET /answered`: the answer history beside the inbox: the answered and failed rounds,
//! newest first, with who answered, when, and the action per request; filterable by server
//! and principal (`?server=&principal=&status=`), paged by `?before=CURSOR`.

use axum::extract::State;
use axum::response::Response;
use m3_kit::{HistoryEntry, HistoryQuery, HistoryStatus};
use m3_types::{Cursor, ElicitationAction, timestamp};
use maud::{Markup, html};
use serde::Deserialize;

use super::render::{self, answered_by, encode, error_page, html_response};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::Shared;

/// How many rounds one page shows.
const PAGE: usize = 50;

/// The view's filters, as the form submits them (an empty value is no filter).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    #[serde(default)]
    status: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    principal: String,
    #[serde(default)]
    before: String,
}

impl Filters {
    fn query(&self) -> Result<HistoryQuery, ApiError> {
        let status = HistoryStatus::parse(&self.status).map_err(ApiError::from)?;
        let mut query = HistoryQuery::new().status(status).limit(PAGE);
        if !self.server.is_empty() {
            query = query.server(self.server.clone());
        }
        if !self.principal.is_empty() {
            query = query.principal(self.principal.clone());
        }
        if !self.before.is_empty() {
            let before: Cursor = self.before.parse().map_err(ApiError::from)?;
            query = query.before(before);
        }
        Ok(query)
    }
}

pub(super) async fn page(
    State(state): State<Shared>,
    ApiQuery(filters): ApiQuery<Filters>,
) -> Response {
    let base = &state.base_path;
    let listed = match filters.query() {
        Ok(query) => state.kit.history(&query).await.map_err(ApiError::from),
        Err(error) => Err(error),
    };
    let page = match listed {
        Ok(page) => page,
        Err(error) => return error_page(base, &error),
    };
    let main = html! {
        h1 { "Answered" }
        (filter_form(base, &filters))
        @if page.entries.is_empty() { p class="empty" { "No answered rounds match." } }
        ol class="history" {
            @for entry in &page.entries { (history_item(base, entry)) }
        }
        @if let Some(next) = page.next {
            a class="older" rel="next" href=(older_link(base, &filters, next)) { "Older rounds" }
        }
    };
    html_response(
        axum::http::StatusCode::OK,
        render::layout(base, "m3: answered", None, main),
    )
}

fn filter_form(base: &str, filters: &Filters) -> Markup {
    html! {
        form class="filters" method="get" action={(base) "/answered"} {
            label { "Status "
                select name="status" {
                    @for (value, label) in [("", "answered or failed"), ("answered", "answered"), ("resolved", "resolved"), ("failed", "failed")] {
                        option value=(value) selected[filters.status == value] { (label) }
                    }
                }
            }
            label { "Server " input type="text" name="server" value=(filters.server); }
            label { "Answered by " input type="text" name="principal" value=(filters.principal); }
            button type="submit" { "Filter" }
        }
    }
}

fn history_item(base: &str, entry: &HistoryEntry) -> Markup {
    let round = &entry.details.round;
    let d = &entry.details.diagnostics;
    html! {
        li class="history-entry" data-round-id=(round.round_id) data-execution-id=(round.execution_id)
            data-round-status=(d.status.as_str()) data-cursor=(entry.cursor.get()) {
            a href={(base) "/executions/" (encode(&round.execution_id)) "/rounds/" (encode(&round.round_id))} {
                (round.operation_kind.as_str()) " " (round.operation_name)
            }
            " · server " (round.server) " · " strong { (d.status.as_str()) }
            @if let Some(code) = &d.failure_code { " (" (code) ")" }
            " · " time datetime=(timestamp::format(entry.at)) { (timestamp::format(entry.at)) }
            @if let Some(actor) = &d.answered_by { (answered_by(actor)) }
            @if let Some(responses) = &d.redacted_responses {
                ul class="actions" {
                    @for (key, response) in responses {
                        li data-request-key=(key) { (key) ": " (action_of(response)) }
                    }
                }
            }
        }
    }
}

/// The action of one redacted response (`accept`, `decline`, `cancel`).
fn action_of(response: &serde_json::Value) -> &str {
    response
        .get("action")
        .and_then(serde_json::Value::as_str)
        .and_then(|action| action.parse::<ElicitationAction>().ok())
        .map_or("?", ElicitationAction::as_str)
}

fn older_link(base: &str, filters: &Filters, next: Cursor) -> String {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("status", &filters.status)
        .append_pair("server", &filters.server)
        .append_pair("principal", &filters.principal)
        .append_pair("before", &next.to_string())
        .finish();
    format!("{base}/answered?{query}")
}
