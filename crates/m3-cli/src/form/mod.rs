//! Answering elicitation requests in a terminal: a form rendered from the requested schema, or
//! consent for a URL.
//!
//! The renderer works on any `BufRead` + `Write` pair, so it is driven the same way by a
//! person at a terminal, a pseudo-terminal in tests, and plain byte buffers in unit tests.
//! It uses plain line prompts (no cursor movement, no raw mode): one question per line, one
//! answer per line.
//!
//! - [`fields`] classifies each property of a `requestedSchema` ([`Field`], [`FieldKind`]):
//!   strings (with `format` hints and length bounds), numbers and integers (with bounds),
//!   booleans, single-select enums (`enum`, legacy `enumNames`, titled `oneOf`/`const`),
//!   multi-select enums (`items.enum`, titled `items.anyOf`), and a JSON fallback.
//! - [`Prompter`] asks one request at a time: decline and cancel are always offered, required
//!   fields are enforced, defaults pre-fill, invalid input is explained and asked again.
//! - [`answer_round`] asks every request of a pending round and checks each form against the
//!   round's own validation before returning it.

mod answer;
mod prompt;

use std::io::{self, BufRead, Write};

use m3_types::{ElicitationResponse, PendingElicitationRound, ResponseMap, validate_responses};

pub use m3_types::form::{Choice, Field, FieldKind, fields};
pub use prompt::{CANCEL_WORD, DECLINE_WORD, Prompter};

/// Asks every request of `round`, in request-key order, and returns the response map.
///
/// Each accepted form is checked with [`validate_responses`] against that request before it
/// is accepted; a refusal is shown and the form is asked again.
///
/// # Errors
/// Only I/O errors of the prompter.
pub fn answer_round<R: BufRead, W: Write>(
    prompter: &mut Prompter<R, W>,
    round: &PendingElicitationRound,
) -> io::Result<ResponseMap> {
    let mut responses = ResponseMap::new();
    for (key, request) in &round.requests {
        let check = |content: &serde_json::Map<String, serde_json::Value>| {
            let mut single = round.clone();
            single.requests.retain(|k, _| k == key);
            let mut map = ResponseMap::new();
            map.insert(key.clone(), ElicitationResponse::accept(content.clone()));
            validate_responses(&single, &map).map_err(|error| error.message().to_owned())
        };
        let response = prompter.ask(request, check)?;
        responses.insert(key.clone(), response);
    }
    Ok(responses)
}

#[cfg(test)]
mod tests;
