//! Answering elicitation requests in a terminal: a form rendered from the requested schema, or
//! consent for a URL.
//!
//! The renderer works on any `BufRead` + `Write` pair, so it is driven the same way by a
//! person at a terminal, a pseudo-terminal in tests, and plain byte buffers in unit tests.
//! It uses line prompts: one question per line, one answer per line (on a terminal, edited
//! with rustyline; anywhere else, read as plain lines).
//!
//! - [`fields`] classifies each property of a `requestedSchema` (`Field`, [`FieldKind`]):
//!   strings (with `format` hints and length bounds), numbers and integers (with bounds),
//!   booleans, single-select enums (`enum`, legacy `enumNames`, titled `oneOf`/`const`),
//!   multi-select enums (`items.enum`, titled `items.anyOf`), and a JSON fallback.
//! - [`Prompter`] asks one request at a time: decline and cancel are always offered, required
//!   fields are enforced, defaults pre-fill, invalid input is explained and asked again.
//! - [`answer_round`] asks every request of a pending round, checks each form against the
//!   round's own validation, shows a summary and asks to commit it.
//! - [`TerminalInput`] reads answers on a terminal with line editing and history (any
//!   [`LineInput`] works: every `BufRead` is one).

mod input;
mod prompt;

use std::io::{self, Write};

use m3_types::redact::redact_content;
use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, PendingElicitationRound,
    ResponseMap, redact, validate_responses,
};
use serde_json::Value;

pub(crate) use input::{LineInput, TerminalInput};
pub(crate) use m3_types::form::{Choice, Field, FieldKind, fields};
pub(crate) use prompt::Prompter;

use crate::terminal::escape;

/// Asks every request of `round`, in request-key order, shows a summary of the answers
/// (secret-named fields redacted) and asks to commit them: `Some(responses)` once the person
/// confirms, `None` when they quit or gave up (Ctrl-C, Ctrl-D) anywhere, which leaves the
/// round pending. Editing asks every request again.
///
/// Each accepted form is checked with [`validate_responses`] against that request before it
/// is accepted; a refusal is shown and the form is asked again.
///
/// # Errors
/// Only I/O errors of the prompter.
pub(crate) fn answer_round<R: LineInput, W: Write>(
    prompter: &mut Prompter<R, W>,
    round: &PendingElicitationRound,
) -> io::Result<Option<ResponseMap>> {
    loop {
        let Some(responses) = ask_each(prompter, round)? else {
            return Ok(None);
        };
        prompter.say("Summary:")?;
        for (key, response) in &responses {
            prompter.say(&format!(
                "  {}",
                summary_line(key, &round.requests[key], response)
            ))?;
        }
        match prompter.confirm()? {
            Some(true) => return Ok(Some(responses)),
            Some(false) => {}
            None => return Ok(None),
        }
    }
}

fn ask_each<R: LineInput, W: Write>(
    prompter: &mut Prompter<R, W>,
    round: &PendingElicitationRound,
) -> io::Result<Option<ResponseMap>> {
    let mut responses = ResponseMap::new();
    for (key, request) in &round.requests {
        let check = |content: &serde_json::Map<String, Value>| {
            let mut single = round.clone();
            single.requests.retain(|k, _| k == key);
            let mut map = ResponseMap::new();
            map.insert(key.clone(), ElicitationResponse::accept(content.clone()));
            validate_responses(&single, &map).map_err(|error| error.message().to_owned())
        };
        let Some(response) = prompter.ask(request, check)? else {
            return Ok(None);
        };
        responses.insert(key.clone(), response);
    }
    Ok(Some(responses))
}

/// `[key] accept: street = "1 Main Street", password = "[REDACTED]"`: the diagnostic
/// projection (secret names, and fields the form's schema marks secret), escaped for the
/// terminal.
fn summary_line(key: &str, request: &ElicitationRequest, response: &ElicitationResponse) -> String {
    let key = escape(key);
    match (response.action, &response.content, request) {
        (ElicitationAction::Accept, Some(content), _) => {
            let shown = match request {
                ElicitationRequest::Form(form) => redact_content(&form.requested_schema, content),
                _ => redact(&Value::Object(content.clone())),
            };
            let fields: Vec<String> = shown
                .as_object()
                .map(|map| {
                    map.iter()
                        .map(|(name, value)| {
                            format!("{} = {}", escape(name), escape(&value.to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("[{key}] accept: {}", fields.join(", "))
        }
        (ElicitationAction::Accept, None, ElicitationRequest::Url(_)) => {
            format!("[{key}] accept (consent to the URL)")
        }
        (action, _, _) => format!("[{key}] {action}"),
    }
}

#[cfg(test)]
mod tests;
