//! The page's markup (maud escapes every value it inserts): the layout, one
//! round as a form (HTTP.md "Markup that tests rely on"), an answered round, and
//! the HTML responses that carry them (an error as a small page).

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use m3_kit::RoundDetails;
use m3_types::form::fields;
use m3_types::{
    ElicitationRequest, ManagedInputStatus, PendingElicitationRound, RoundContext, timestamp,
};
use maud::{DOCTYPE, Markup, html};
use time::OffsetDateTime;

use super::coerce::{PageErrors, Submitted};
use super::context::context_block;
use super::widgets::{self, FieldContext};
use crate::error::ApiError;

/// The document around `main`.
pub(super) fn layout(base: &str, title: &str, cursor: Option<&str>, main: Markup) -> Markup {
    let events = format!("{base}/api/v1/events");
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                link rel="stylesheet" href={(base) "/assets/app.css"};
                script src={(base) "/assets/app.js"} defer {}
            }
            body data-base=(base) data-events=(events) data-cursor=[cursor] {
                header class="top" {
                    nav {
                        a href={(base) "/"} { "m3 inbox" }
                        " · "
                        a href={(base) "/answered"} { "Answered" }
                        " · "
                        a href={(base) "/executions"} { "Executions" }
                    }
                }
                main { (main) }
            }
        }
    }
}

/// A pending round as a form, or an answered one as its status.
pub(super) fn round(base: &str, details: &RoundDetails, view: &RoundView<'_>) -> Markup {
    if details.diagnostics.status == ManagedInputStatus::Pending {
        let view = RoundView {
            context: Some(&details.diagnostics.context),
            transferable: Some(details.diagnostics.transferable),
            ..*view
        };
        round_form(base, &details.round, &view)
    } else {
        answered(base, details)
    }
}

/// What a form shows besides the round: typed values, errors, the idempotency key, the
/// round's context.
#[derive(Default, Clone, Copy)]
pub(super) struct RoundView<'a> {
    pub(super) submitted: Option<&'a Submitted>,
    pub(super) errors: Option<&'a PageErrors>,
    pub(super) idempotency_key: Option<&'a str>,
    /// Where the form posts (default: the round's own address).
    pub(super) action: Option<&'a str>,
    /// The operation's arguments and the agent's prompt, shown above the requests.
    pub(super) context: Option<&'a RoundContext>,
    /// Whether the round survives its worker's restart (said in the meta line).
    pub(super) transferable: Option<bool>,
}

/// `<form data-round-id data-execution-id>` with one element per request.
pub(super) fn round_form(
    base: &str,
    round: &PendingElicitationRound,
    view: &RoundView<'_>,
) -> Markup {
    let action = view.action.map_or_else(
        || {
            format!(
                "{base}/executions/{}/rounds/{}",
                encode(&round.execution_id),
                encode(&round.round_id)
            )
        },
        str::to_owned,
    );
    let key = view
        .idempotency_key
        .map_or_else(|| format!("page-{}", m3_types::new_id()), str::to_owned);
    let heading = format!("{} {}", round.operation_kind.as_str(), round.operation_name);
    html! {
        form class="round" method="post" action=(action) novalidate
            data-round-id=(round.round_id) data-execution-id=(round.execution_id) data-round-status="pending" {
            h2 { (heading) }
            p class="meta" {
                "server " strong { (round.server) }
                " · execution " a href={(base) "/executions/" (encode(&round.execution_id))} { code { (round.execution_id) } }
                " · asked " (age(round.created_at))
                @if let Some(deadline) = round.deadline { (deadline_note(deadline)) }
                @if let Some(transferable) = view.transferable { (restart_note(transferable)) }
            }
            @if let Some(message) = view.errors.and_then(|e| e.round.as_deref()) {
                p class="alert" role="alert" { (message) }
            }
            @if let Some(context) = view.context { (context_block(context)) }
            input type="hidden" name="idempotency_key" value=(key);
            @for (request_key, request) in &round.requests {
                (request_block(&round.round_id, request_key, request, view))
            }
            button type="submit" { "Submit" }
        }
    }
}

fn request_block(
    round_id: &str,
    key: &str,
    request: &ElicitationRequest,
    view: &RoundView<'_>,
) -> Markup {
    let mode = request.mode().as_str();
    html! {
        fieldset class="request" data-request-key=(key) data-mode=(mode) {
            legend { (request.message()) }
            @match request {
                ElicitationRequest::Form(form) => {
                    @for field in fields(&form.requested_schema) {
                        @let name = format!("{key}.{}", field.name);
                        @let ctx = FieldContext {
                            round_id,
                            request_key: key,
                            submitted: view.submitted,
                            error: view.errors.and_then(|e| e.fields.get(&name)).map(String::as_str),
                        };
                        (widgets::field(&ctx, &field))
                    }
                }
                ElicitationRequest::Url(url) => {
                    p class="url" { "The server asks you to open this address yourself: " code { (url.url) } }
                    (url_host(&url.url))
                    p class="hint" { "Accepting records your consent only; this page never opens, fetches or embeds the address." }
                }
            }
            (actions(round_id, key, mode, view.submitted))
        }
    }
}

/// The full host of a URL request, before consent, as the specification asks: its ASCII
/// (punycode) form, which a look-alike international name cannot disguise, and the
/// Unicode form beside it when the two differ.
pub(super) fn url_host(address: &str) -> Markup {
    let parsed = url::Url::parse(address).ok();
    let ascii = parsed.as_ref().and_then(url::Url::host_str).unwrap_or("");
    let (unicode, _) = idna::domain_to_unicode(ascii);
    html! {
        p class="url-host" {
            "Host: " strong data-host=(ascii) { (if ascii.is_empty() { "(none)" } else { ascii }) }
            @if !ascii.is_empty() && unicode != ascii { " (displayed as " (unicode) ")" }
        }
    }
}

fn actions(round_id: &str, key: &str, mode: &str, submitted: Option<&Submitted>) -> Markup {
    let name = format!("{key}.action");
    let chosen = submitted
        .and_then(|s| s.first(&name))
        .unwrap_or("accept")
        .to_owned();
    let accept = if mode == "url" {
        "Accept (I consent)"
    } else {
        "Accept"
    };
    html! {
        div class="actions" role="radiogroup" aria-label="Answer" {
            @for (value, label) in [("accept", accept), ("decline", "Decline"), ("cancel", "Cancel")] {
                @let id = format!("f-{round_id}-{key}-action-{value}");
                span class="choice" {
                    input type="radio" id=(id) name=(name) value=(value) checked[chosen == value];
                    " "
                    label for=(id) { (label) }
                }
            }
        }
    }
}

/// A round that is no longer pending: its status until it leaves the inbox.
pub(super) fn answered(base: &str, details: &RoundDetails) -> Markup {
    let round = &details.round;
    let d = &details.diagnostics;
    html! {
        article class="round answered" data-round-id=(round.round_id) data-execution-id=(round.execution_id)
            data-round-status=(d.status.as_str()) {
            h2 { (round.operation_kind.as_str()) " " (round.operation_name) }
            p role="status" {
                "Answered: " strong { (d.status.as_str()) }
                @if let Some(code) = &d.failure_code { " (" (code) ")" }
                " · " a href={(base) "/executions/" (encode(&round.execution_id))} { "execution" }
            }
            @if let Some(actor) = &d.answered_by {
                (answered_by(actor))
            }
        }
    }
}

/// Who answered a round: the name shown (the display name, else the principal) and the
/// surface; the principal itself in `data-principal` and the tooltip.
pub(super) fn answered_by(actor: &m3_types::Actor) -> Markup {
    html! {
        p class="answered-by meta" data-principal=(actor.principal) data-surface=(actor.surface.as_str())
            title=(actor.principal) {
            "Answered by " strong { (actor.shown_name()) } " via " (actor.surface.as_str())
        }
    }
}

/// "3 s ago" style age (the exact time in the element's `datetime`).
pub(super) fn age(at: OffsetDateTime) -> Markup {
    let seconds = (OffsetDateTime::now_utc() - at).whole_seconds().max(0);
    let text = match seconds {
        0..60 => format!("{seconds} s ago"),
        60..3600 => format!("{} min ago", seconds / 60),
        _ => format!("{} h ago", seconds / 3600),
    };
    html! { time datetime=(timestamp::format(at)) title=(timestamp::format(at)) { (text) } }
}

/// " · deadline <time>…</time> · 12 min left": the deadline and the time left until it
/// (as text rendered now, kept current by the script's countdown), or that it has passed.
pub(super) fn deadline_note(deadline: OffsetDateTime) -> Markup {
    let at = timestamp::format(deadline);
    let left = deadline - OffsetDateTime::now_utc();
    html! {
        span class="deadline" {
            " · deadline " time datetime=(at) title=(at) { (at) }
            " · " span class="countdown" data-deadline=(at) data-passed=(left.is_negative() || left.is_zero()) { (time_left(left)) }
        }
    }
}

/// Whether the question outlives its worker: a stopping worker hands a transferable round
/// to another one; any other fails closed when its worker stops (docs/workers.md).
fn restart_note(transferable: bool) -> Markup {
    html! {
        " · "
        @if transferable {
            span class="restart" data-transferable="true" { "survives a worker restart" }
        } @else {
            span class="restart" data-transferable="false" title="Its server's request lives in the worker: answer before the worker stops" { "closes if its worker stops" }
        }
    }
}

/// The countdown's text: "45 s left", "12 min left", "3 h 5 min left", "2 d 4 h left", or
/// "deadline passed" (the same wording as the script's countdown in `app.js`).
pub(super) fn time_left(left: time::Duration) -> String {
    let seconds = left.whole_seconds();
    match seconds {
        ..=0 => "deadline passed".to_owned(),
        1..60 => format!("{seconds} s left"),
        60..3600 => format!("{} min left", seconds / 60),
        3600..86400 => format!("{} h {} min left", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h left", seconds / 86400, seconds % 86400 / 3600),
    }
}

/// Percent-encodes one path segment.
pub(super) fn encode(segment: &str) -> String {
    form_urlencoded::byte_serialize(segment.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// An empty marker for the inbox's "nothing pending" line.
pub(super) fn nothing_pending(hidden: bool) -> Markup {
    html! { p id="empty" hidden[hidden] { "Nothing is waiting for an answer." } }
}

/// An HTML answer with `status`.
pub(super) fn html_response(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// A page-level failure (unknown execution, store down) as a small page.
pub(super) fn error_page(base: &str, error: &ApiError) -> Response {
    let main = html! {
        h1 { "Cannot show this" }
        p role="alert" { (error.message) " (" code { (error.code) } ")" }
    };
    html_response(error.status, layout(base, "m3: error", None, main))
}

/// Whether the request asks for only the round's element (`X-M3-Fragment: 1`: the script's
/// live inbox and in-place submit).
pub(super) fn wants_fragment(headers: &HeaderMap) -> bool {
    headers.get("x-m3-fragment").is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_reads_as_text() {
        let cases = [
            (-5, "deadline passed"),
            (0, "deadline passed"),
            (45, "45 s left"),
            (12 * 60 + 30, "12 min left"),
            (3 * 3600 + 5 * 60, "3 h 5 min left"),
            (2 * 86400 + 4 * 3600 + 59, "2 d 4 h left"),
        ];
        for (seconds, text) in cases {
            assert_eq!(
                time_left(time::Duration::seconds(seconds)),
                text,
                "{seconds}"
            );
        }
    }
}
