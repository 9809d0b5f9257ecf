//! `GET /`: the inbox as a summary list, one line per pending round (operation, server,
//! age, deadline, first question), with the count, filters (`server`, `operation`, `age`),
//! a search (`q`), a sort (`sort`) and pages (`page`), all query parameters, so every view
//! is a link that works without the script. Only one page of rounds is read from the
//! store; selecting a round opens its form (the script expands it in place, else its page).
//! Each line has a checkbox of the form that answers the selected rounds at once
//! ([`super::bulk`]).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use m3_kit::{InboxPage, PendingQuery, PendingSort};
use m3_types::PendingElicitationRound;
use maud::{Markup, html};
use serde::Deserialize;
use time::OffsetDateTime;

use super::render::{self, age, encode, error_page, html_response};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::Shared;

/// How many rounds one page lists.
const PAGE: usize = 50;

/// The age filter's choices: (value, label, minutes).
const AGES: [(&str, &str, i64); 5] = [
    ("", "any age", 0),
    ("1m", "older than 1 minute", 1),
    ("10m", "older than 10 minutes", 10),
    ("1h", "older than 1 hour", 60),
    ("1d", "older than 1 day", 1440),
];

/// The sort choices: (value, label).
const SORTS: [(&str, &str); 4] = [
    ("newest", "newest first"),
    ("oldest", "oldest first"),
    ("deadline", "deadline"),
    ("server", "server"),
];

/// The view's query parameters (an empty value is no filter).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    #[serde(default)]
    server: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    age: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    page: String,
}

impl Filters {
    /// The 1-based page number (anything unreadable is the first page).
    fn page_number(&self) -> usize {
        self.page.parse::<usize>().unwrap_or(1).max(1)
    }

    /// Whether this is the plain first page, where the script adds new rounds live.
    fn is_live(&self) -> bool {
        self.server.is_empty()
            && self.operation.is_empty()
            && self.age.is_empty()
            && self.q.trim().is_empty()
            && matches!(self.sort.as_str(), "" | "newest")
            && self.page_number() == 1
    }

    fn query(&self, now: OffsetDateTime) -> Result<PendingQuery, ApiError> {
        let sort = PendingSort::parse(&self.sort).map_err(ApiError::from)?;
        let offset = (self.page_number() - 1).saturating_mul(PAGE);
        let mut query = PendingQuery::new().sort(sort).page(offset, PAGE);
        if !self.server.is_empty() {
            query = query.server(self.server.clone());
        }
        if !self.operation.is_empty() {
            query = query.operation(self.operation.clone());
        }
        if !self.q.trim().is_empty() {
            query = query.text(self.q.trim().to_owned());
        }
        if !self.age.is_empty() {
            let minutes = AGES
                .iter()
                .find(|(value, _, _)| *value == self.age)
                .map(|(_, _, minutes)| *minutes)
                .ok_or_else(|| ApiError::bad_request(format!("unknown age '{}'", self.age)))?;
            query = query.created_before(now - time::Duration::minutes(minutes));
        }
        Ok(query)
    }

    /// This view's link with page `page`.
    fn link(&self, base: &str, page: usize) -> String {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("server", &self.server)
            .append_pair("operation", &self.operation)
            .append_pair("age", &self.age)
            .append_pair("q", &self.q)
            .append_pair("sort", &self.sort)
            .append_pair("page", &page.to_string())
            .finish();
        format!("{base}/?{query}")
    }
}

pub(super) async fn page(
    State(state): State<Shared>,
    ApiQuery(filters): ApiQuery<Filters>,
) -> Response {
    let base = &state.base_path;
    let loaded = async {
        let query = filters.query(state.kit.now())?;
        let cursor = crate::events::latest_cursor(&state.kit).await?.to_string();
        let listed = state.kit.pending_page(&query).await?;
        Ok::<_, ApiError>((cursor, listed))
    };
    let (cursor, listed) = match loaded.await {
        Ok(loaded) => loaded,
        Err(error) => return error_page(base, &error),
    };
    let title = format!("({}) Pending rounds · m3", listed.total);
    let main = html! {
        h1 { "Pending rounds " span id="count" data-count=(listed.total) { "(" (listed.total) ")" } }
        (filter_form(base, &filters))
        (render::nothing_pending(listed.total > 0))
        (shown_range(&filters, &listed))
        ol id="inbox" class="inbox-list" aria-live="polite" data-live=(filters.is_live()) {
            @for round in &listed.rounds { (item(base, round)) }
        }
        (pager(base, &filters, listed.total))
        (super::bulk::form(base))
    };
    html_response(
        StatusCode::OK,
        render::layout(base, &title, Some(&cursor), main),
    )
}

fn filter_form(base: &str, filters: &Filters) -> Markup {
    html! {
        form class="filters" method="get" action={(base) "/"} role="search" aria-label="Filter the pending rounds" {
            label { "Search " input type="search" name="q" value=(filters.q) placeholder="server, operation or question"; }
            label { "Server " input type="text" name="server" value=(filters.server); }
            label { "Operation " input type="text" name="operation" value=(filters.operation); }
            label { "Age "
                select name="age" {
                    @for (value, label, _) in AGES { option value=(value) selected[filters.age == value] { (label) } }
                }
            }
            label { "Sort "
                select name="sort" {
                    @for (value, label) in SORTS {
                        option value=(value) selected[filters.sort == value || (filters.sort.is_empty() && value == "newest")] { (label) }
                    }
                }
            }
            button type="submit" { "Apply" }
        }
    }
}

fn shown_range(filters: &Filters, listed: &InboxPage) -> Markup {
    let first = (filters.page_number() - 1) * PAGE + 1;
    let last = first + listed.rounds.len().saturating_sub(1);
    html! {
        @if !listed.rounds.is_empty() {
            p class="meta" id="range" { "Showing " (first) "–" (last) " of " (listed.total) }
        } @else if listed.total > 0 {
            p class="meta" id="range" { "No rounds on this page." }
        }
    }
}

fn pager(base: &str, filters: &Filters, total: usize) -> Markup {
    let page = filters.page_number();
    let pages = total.div_ceil(PAGE).max(1);
    html! {
        @if pages > 1 || page > 1 {
            nav class="pager" aria-label="Pages" {
                @if page > 1 { a rel="prev" href=(filters.link(base, page - 1)) { "Previous" } " " }
                span { "Page " (page) " of " (pages) }
                @if page < pages { " " a rel="next" href=(filters.link(base, page + 1)) { "Next" } }
            }
        }
    }
}

/// One summary line: the round's operation (a link to its form: the script opens the form
/// in place, else the round's page), its server, age, deadline and first question.
pub(super) fn item(base: &str, round: &PendingElicitationRound) -> Markup {
    let href = format!(
        "{base}/executions/{}/rounds/{}",
        encode(&round.execution_id),
        encode(&round.round_id)
    );
    let question = round.requests.values().next().map_or("", |r| r.message());
    let more = round.requests.len().saturating_sub(1);
    html! {
        li class="inbox-item" data-inbox-round=(round.round_id) data-execution-id=(round.execution_id)
            data-server=(round.server) data-operation=(round.operation_name) {
            div class="line" {
                input type="checkbox" class="select" form=(super::bulk::FORM_ID) name="round"
                    value=(super::bulk::selection_value(&round.execution_id, &round.round_id))
                    aria-label=(format!("Select {} {} ({})", round.operation_kind.as_str(), round.operation_name, round.round_id));
                a class="open" href=(href) aria-expanded="false" {
                    (round.operation_kind.as_str()) " " (round.operation_name)
                }
                span class="server" { " · " (round.server) }
                span class="age" { " · asked " (age(round.created_at)) }
                @if let Some(deadline) = round.deadline { (render::deadline_note(deadline)) }
            }
            p class="question" { (question) @if more > 0 { " (+" (more) " more)" } }
        }
    }
}
