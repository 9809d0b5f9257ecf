//! Answering the rounds selected on the inbox at once: the form below the list (each line's
//! checkbox belongs to it through `form=`), and `POST /inbox/answer`, a plain form post
//! that works without the script. The same answer goes to every request of every selected
//! round (decline, cancel, or accept with one JSON content), each round on its own through
//! the kit's bulk answer under `NONCE-ROUND` (the nonce is the form's own, so posting the
//! same form again replays), answered with surface `page`; then a summary lists each
//! round's outcome. Like every state-changing request of the page, the post must come
//! from this server's own origin (the guard checks `Origin`) with the `SameSite=Strict`
//! cookie.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use m3_kit::{BulkOutcome, RoundAnswer, RoundOutcome, check_answer_count, each_round_key};
use m3_types::{ActorSurface, ElicitationResponse, Error};
use maud::{Markup, html};
use serde_json::{Map, Value};

use super::coerce::Submitted;
use super::render::{self, encode, error_page, html_response};
use crate::error::{ApiError, status_of};
use crate::principal::Principal;
use crate::state::Shared;

/// The `id` of the form the inbox's checkboxes belong to.
pub(super) const FORM_ID: &str = "answer-selected";

/// A checkbox's value: the execution and the round, each percent-encoded, joined by `/`.
pub(super) fn selection_value(execution_id: &str, round_id: &str) -> String {
    format!("{}/{}", encode(execution_id), encode(round_id))
}

/// The execution and round a checkbox's value names.
fn parse_selection(value: &str) -> Option<(String, String)> {
    let (execution, round) = value.split_once('/')?;
    let decode = |part: &str| {
        percent_encoding::percent_decode_str(part)
            .decode_utf8()
            .ok()
            .map(std::borrow::Cow::into_owned)
            .filter(|id| !id.is_empty())
    };
    Some((decode(execution)?, decode(round)?))
}

/// The form below the inbox list: the answer (decline by default), the content an accept
/// gives, whether the schema's defaults fill what it leaves out, and a fresh nonce.
pub(super) fn form(base: &str) -> Markup {
    let nonce = format!("page-bulk-{}", m3_types::new_id());
    html! {
        form id=(FORM_ID) class="bulk" method="post" action={(base) "/inbox/answer"} aria-labelledby="bulk-heading" {
            h2 id="bulk-heading" { "Answer the selected rounds" }
            p class="hint" { "Tick rounds in the list above, then give them all the same answer. Each round is answered on its own: one that does not take the answer stays pending." }
            input type="hidden" name="nonce" value=(nonce);
            fieldset class="choices" {
                legend { "Answer" }
                @for (value, label) in [("decline", "Decline"), ("cancel", "Cancel"), ("accept", "Accept with the content below")] {
                    @let id = format!("bulk-action-{value}");
                    span class="choice" {
                        input type="radio" id=(id) name="action" value=(value) checked[value == "decline"];
                        " " label for=(id) { (label) }
                    }
                }
            }
            div class="field" {
                label for="bulk-content" { "Content to accept with (a JSON object, given to every form request)" }
                textarea id="bulk-content" name="content" rows="3" spellcheck="false" aria-describedby="bulk-content-hint" {}
                p class="hint" id="bulk-content-hint" { "Only for accept. Requests that ask to open an address are never accepted this way." }
            }
            div class="field" {
                input type="checkbox" id="bulk-defaults" name="accept_defaults" value="true";
                " " label for="bulk-defaults" { "Fill the fields the content leaves out with their defaults" }
            }
            button type="submit" { "Answer selected rounds" }
        }
    }
}

/// `POST /inbox/answer`: answers every selected round, then shows the summary.
pub(super) async fn answer(
    State(state): State<Shared>,
    Extension(principal): Extension<Principal>,
    submitted: Result<Submitted, ApiError>,
) -> Response {
    let base = state.base_path.clone();
    let answers = submitted.and_then(|submitted| answers_of(&submitted, &principal));
    let answers = match answers {
        Ok(answers) => answers,
        Err(error) => return error_page(&base, &error),
    };
    match state.kit.answer_each(answers).await {
        Ok(outcome) => html_response(StatusCode::OK, summary(&base, &outcome)),
        Err(error) => error_page(&base, &ApiError::from(error)),
    }
}

/// The answers the post means: one per selected round, or why the post means nothing
/// (no round selected, no nonce, an unknown action, content that is not a JSON object).
fn answers_of(submitted: &Submitted, principal: &Principal) -> Result<Vec<RoundAnswer>, ApiError> {
    let selected = submitted.all("round");
    if selected.is_empty() {
        return Err(invalid("select at least one round to answer"));
    }
    check_answer_count(selected.len())?;
    let nonce = submitted.first("nonce").unwrap_or_default();
    if nonce.is_empty() {
        return Err(ApiError::bad_request(
            "the form has no nonce: reload the inbox",
        ));
    }
    let response = response_of(submitted)?;
    let accept_defaults = submitted.first("accept_defaults") == Some("true");
    let actor = principal.actor(ActorSurface::Page);
    let mut answers = Vec::with_capacity(selected.len());
    for value in selected {
        let (execution_id, round_id) = parse_selection(value)
            .ok_or_else(|| ApiError::bad_request(format!("'{value}' does not name a round")))?;
        let key = each_round_key(nonce, &round_id);
        answers.push(
            RoundAnswer::to_every_request(execution_id, round_id, response.clone(), key)
                .accept_defaults(accept_defaults)
                .actor(actor.clone()),
        );
    }
    Ok(answers)
}

/// The one response every request gets.
fn response_of(submitted: &Submitted) -> Result<ElicitationResponse, ApiError> {
    match submitted.first("action").unwrap_or("decline") {
        "decline" => Ok(ElicitationResponse::decline()),
        "cancel" => Ok(ElicitationResponse::cancel()),
        "accept" => {
            let text = submitted.first("content").unwrap_or_default().trim();
            if text.is_empty() {
                return Ok(ElicitationResponse::accept(Map::new()));
            }
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(content)) => Ok(ElicitationResponse::accept(content)),
                // The text is the person's own answer: it is not repeated in the error.
                _ => Err(invalid("the content to accept with is not a JSON object")),
            }
        }
        other => Err(invalid(&format!(
            "unknown answer '{other}': decline, cancel or accept"
        ))),
    }
}

fn invalid(message: &str) -> ApiError {
    ApiError::from(Error::model_validation(message))
}

/// The summary page: the counts, then one line per selected round with its outcome.
fn summary(base: &str, outcome: &BulkOutcome) -> Markup {
    let total = outcome.rounds.len();
    let title = format!("Answered {} of {total} rounds · m3", outcome.answered());
    let main = html! {
        h1 { "Answered " (outcome.answered()) " of " (total) " rounds" }
        p role="status" id="bulk-counts" data-answered=(outcome.answered())
            data-replayed=(outcome.replayed()) data-failed=(outcome.failed()) {
            (outcome.answered()) " answered (" (outcome.replayed()) " already were), "
            (outcome.failed()) " not answered"
        }
        ol class="bulk-results" {
            @for round in &outcome.rounds { (result_line(base, round)) }
        }
        p { a href={(base) "/"} { "Back to the inbox" } }
    };
    render::layout(base, &title, None, main)
}

fn result_line(base: &str, round: &RoundOutcome) -> Markup {
    let href = format!(
        "{base}/executions/{}/rounds/{}",
        encode(&round.execution_id),
        encode(&round.round_id)
    );
    let outcome = match &round.result {
        Ok(details) if details.replayed => "replayed",
        Ok(_) => "committed",
        Err(_) => "failed",
    };
    html! {
        li data-round-id=(round.round_id) data-execution-id=(round.execution_id) data-outcome=(outcome) {
            @match &round.result {
                Ok(details) => {
                    a href=(href) { (details.round.operation_kind.as_str()) " " (details.round.operation_name) }
                    " · server " (details.round.server)
                    " · " strong { (if details.replayed { "already answered" } else { "answered" }) }
                    " (" (details.diagnostics.status.as_str()) ")"
                }
                Err(error) => {
                    a href=(href) { "Round " code { (round.round_id) } }
                    " · " strong { "not answered" } ": " (error.message())
                    " (" code data-error-code=(error.code()) { (error.code()) } ", " (status_of(error).as_u16()) ")"
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_names_its_execution_and_round() {
        let value = selection_value("exec/1 a", "round%2");
        assert_eq!(
            parse_selection(&value),
            Some(("exec/1 a".to_owned(), "round%2".to_owned()))
        );
        assert_eq!(parse_selection("no-slash"), None);
        assert_eq!(parse_selection("/r"), None);
    }
}
