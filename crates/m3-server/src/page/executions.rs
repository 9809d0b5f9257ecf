//! `GET /executions`: the stored executions, newest first, filtered as the JSON API's
//! list is (`lifecycle`, `limit`) and by creation time (`since`: `1h`, `1d`, `7d`), each a
//! link to its page.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use m3_kit::{ExecutionSummary, ListExecutions};
use m3_types::{ExecutionStatus, timestamp};
use maud::{Markup, html};
use serde::Deserialize;

use super::render::{self, encode, error_page, html_response};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::Shared;

/// How many executions the page lists when no limit is given.
const DEFAULT_LIMIT: u32 = 100;

/// The lifecycle filter's choices.
const LIFECYCLES: [&str; 9] = [
    "",
    "created",
    "queued",
    "starting",
    "idle",
    "running_turn",
    "waiting_for_input",
    "closing",
    "finished",
];

/// The `since` filter's choices: (value, label, hours).
const SINCE: [(&str, &str, i64); 4] = [
    ("", "any time", 0),
    ("1h", "the last hour", 1),
    ("1d", "the last day", 24),
    ("7d", "the last 7 days", 168),
];

/// The view's query parameters (an empty value is no filter).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    #[serde(default)]
    lifecycle: String,
    #[serde(default)]
    limit: String,
    #[serde(default)]
    since: String,
}

impl Filters {
    fn limit(&self) -> Result<u32, ApiError> {
        if self.limit.is_empty() {
            return Ok(DEFAULT_LIMIT);
        }
        self.limit
            .parse::<u32>()
            .ok()
            .filter(|limit| *limit > 0)
            .ok_or_else(|| ApiError::bad_request(format!("limit '{}' is not a count", self.limit)))
    }

    fn list(&self) -> Result<ListExecutions, ApiError> {
        let mut list = ListExecutions::new();
        if !self.lifecycle.is_empty() {
            let lifecycle: ExecutionStatus = self.lifecycle.parse().map_err(|_| {
                ApiError::bad_request(format!("unknown lifecycle '{}'", self.lifecycle))
            })?;
            list = list.with_lifecycle(lifecycle);
        }
        Ok(list)
    }

    fn since_hours(&self) -> Result<Option<i64>, ApiError> {
        match SINCE.iter().find(|(value, _, _)| *value == self.since) {
            Some((_, _, 0)) => Ok(None),
            Some((_, _, hours)) => Ok(Some(*hours)),
            None => Err(ApiError::bad_request(format!(
                "unknown since '{}'",
                self.since
            ))),
        }
    }
}

pub(super) async fn page(
    State(state): State<Shared>,
    ApiQuery(filters): ApiQuery<Filters>,
) -> Response {
    let base = &state.base_path;
    let loaded = async {
        let (list, limit, hours) = (filters.list()?, filters.limit()?, filters.since_hours()?);
        let mut summaries = state.kit.executions_where(list).await?;
        if let Some(hours) = hours {
            let since = state.kit.now() - time::Duration::hours(hours);
            summaries.retain(|s| s.state.created_at >= since);
        }
        summaries.reverse();
        summaries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok::<_, ApiError>(summaries)
    };
    let summaries = match loaded.await {
        Ok(summaries) => summaries,
        Err(error) => return error_page(base, &error),
    };
    let main = html! {
        h1 { "Executions" }
        (filter_form(base, &filters))
        @if summaries.is_empty() { p class="empty" { "No executions match." } }
        ol class="executions" {
            @for summary in &summaries { (item(base, summary)) }
        }
        p class="meta" { "As JSON: " a href={(base) "/api/v1/executions"} { "/api/v1/executions" } }
    };
    html_response(
        StatusCode::OK,
        render::layout(base, "Executions · m3", None, main),
    )
}

fn filter_form(base: &str, filters: &Filters) -> Markup {
    html! {
        form class="filters" method="get" action={(base) "/executions"} aria-label="Filter the executions" {
            label { "Lifecycle "
                select name="lifecycle" {
                    @for value in LIFECYCLES {
                        option value=(value) selected[filters.lifecycle == value] { (if value.is_empty() { "any" } else { value }) }
                    }
                }
            }
            label { "Created in "
                select name="since" {
                    @for (value, label, _) in SINCE { option value=(value) selected[filters.since == value] { (label) } }
                }
            }
            label { "At most " input type="number" name="limit" min="1" value=(filters.limit) placeholder=(DEFAULT_LIMIT); }
            button type="submit" { "Apply" }
        }
    }
}

fn item(base: &str, summary: &ExecutionSummary) -> Markup {
    let state = &summary.state;
    let created = timestamp::format(state.created_at);
    html! {
        li class="execution" data-execution-id=(state.execution_id) data-lifecycle=(state.lifecycle.as_str()) {
            a href={(base) "/executions/" (encode(&state.execution_id))} { code { (state.execution_id) } }
            " · " strong { (state.lifecycle.as_str()) }
            @if let Some(outcome) = state.outcome { " (" (outcome.as_str()) ")" }
            " · created " time datetime=(created) { (created) }
            @if summary.pending_rounds > 0 { " · " (summary.pending_rounds) " pending" }
        }
    }
}
