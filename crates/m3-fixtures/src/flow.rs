//! Drives an operation that asks for input through its rounds, in either era.
//!
//! An operation is a *script*: given the answers of the rounds asked so far it either asks the
//! next round or finishes. In the 2026-07-28 era each round becomes an `InputRequiredResult`
//! (keyed `inputRequests` plus a sealed `requestState` that carries the earlier answers); in the
//! legacy era every request of a round is sent as its own `elicitation/create`, one after
//! another, while the original request stays in flight.

use std::collections::BTreeMap;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationCapability, FormElicitationCapability, InputRequest, InputRequiredResult,
        InputResponses, ProtocolVersion, UrlElicitationCapability,
    },
    service::RequestContext,
};
use serde_json::Value;

use crate::state::{OperationKey, StatePayload, StateSealer};

/// The answers of one round, keyed by request key.
pub(crate) type RoundAnswers = BTreeMap<String, ElicitResult>;

/// One round: requests keyed by request key, in the order the legacy era asks them.
#[derive(Debug, Clone)]
pub(crate) struct Round {
    pub(crate) requests: Vec<(String, ElicitRequestParams)>,
}

impl Round {
    pub(crate) fn one(key: &str, params: ElicitRequestParams) -> Self {
        Self {
            requests: vec![(key.to_owned(), params)],
        }
    }
}

/// What a script does next.
#[derive(Debug)]
pub(crate) enum Step<T> {
    Ask(Round),
    Done(T),
}

/// How a driven operation ended for this request.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    Done(T),
    InputRequired(InputRequiredResult),
}

/// The MRTR part of a request (2026-07-28): the client's answers and the echoed state.
#[derive(Debug, Default)]
pub(crate) struct RetryInput {
    pub(crate) responses: Option<InputResponses>,
    pub(crate) state: Option<String>,
}

/// The user's answer to one request, as a script sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Accepted(Option<Value>),
    Declined,
    /// Cancelled, or never asked because an earlier request of the round was not accepted.
    Cancelled,
}

/// The answer to `key` in `round`.
pub(crate) fn answer(round: &RoundAnswers, key: &str) -> Answer {
    match round.get(key) {
        Some(result) => match result.action {
            ElicitationAction::Accept => Answer::Accepted(result.content.clone()),
            ElicitationAction::Decline => Answer::Declined,
            _ => Answer::Cancelled,
        },
        None => Answer::Cancelled,
    }
}

/// True when this request uses the 2026-07-28 protocol (per-request metadata).
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Runs `script` for this request in the request's era.
///
/// # Errors
/// `-32602` for a bad `requestState` or missing/undecodable `inputResponses`, `-32021` when the
/// client did not declare the elicitation mode a round needs, `-32603` when a legacy
/// `elicitation/create` fails.
pub(crate) async fn drive<T, S>(
    context: &RequestContext<RoleServer>,
    sealer: &StateSealer,
    operation: &OperationKey,
    new_operation_id: impl FnOnce() -> String,
    input: RetryInput,
    script: S,
) -> Result<Outcome<T>, ErrorData>
where
    S: Fn(&str, &[RoundAnswers]) -> Result<Step<T>, ErrorData>,
{
    if is_modern(context) {
        drive_modern(context, sealer, operation, new_operation_id, input, script)
    } else {
        drive_legacy(context, new_operation_id(), script).await
    }
}

fn drive_modern<T, S>(
    context: &RequestContext<RoleServer>,
    sealer: &StateSealer,
    operation: &OperationKey,
    new_operation_id: impl FnOnce() -> String,
    input: RetryInput,
    script: S,
) -> Result<Outcome<T>, ErrorData>
where
    S: Fn(&str, &[RoundAnswers]) -> Result<Step<T>, ErrorData>,
{
    let (operation_id, answers) = match input.state {
        None => {
            if input.responses.as_ref().is_some_and(|map| !map.is_empty()) {
                return Err(ErrorData::invalid_params(
                    "inputResponses were sent without a requestState",
                    None,
                ));
            }
            (new_operation_id(), Vec::new())
        }
        Some(sealed) => {
            let payload = sealer.open(operation, &sealed)?;
            let mut answers = decode_answers(&payload)?;
            let Step::Ask(round) = script(&payload.operation_id, &answers)? else {
                return Err(ErrorData::invalid_params(
                    crate::state::INVALID_STATE_MESSAGE,
                    None,
                ));
            };
            answers.push(round_answers(&round, input.responses.unwrap_or_default())?);
            (payload.operation_id, answers)
        }
    };
    match script(&operation_id, &answers)? {
        Step::Done(value) => Ok(Outcome::Done(value)),
        Step::Ask(round) => {
            require_modes(context, &round)?;
            input_required(sealer, operation, operation_id, &answers, round)
        }
    }
}

/// The answers to `round`'s requests, taken from `responses` (every key must be there).
fn round_answers(round: &Round, mut responses: InputResponses) -> Result<RoundAnswers, ErrorData> {
    let mut current = RoundAnswers::new();
    for (key, _) in &round.requests {
        let value = responses.remove(key).ok_or_else(|| {
            ErrorData::invalid_params(format!("inputResponses lacks the key '{key}'"), None)
        })?;
        let result: ElicitResult = serde_json::from_value(value).map_err(|error| {
            ErrorData::invalid_params(
                format!("inputResponses['{key}'] is not an elicitation result: {error}"),
                None,
            )
        })?;
        current.insert(key.clone(), result);
    }
    Ok(current)
}

/// The input-required result asking `round`, with the sealed state of the answers so far.
fn input_required<T>(
    sealer: &StateSealer,
    operation: &OperationKey,
    operation_id: String,
    answers: &[RoundAnswers],
    round: Round,
) -> Result<Outcome<T>, ErrorData> {
    let payload = StatePayload {
        round: answers.len() + 1,
        operation_id,
        answers: answers
            .iter()
            .map(|round| {
                round
                    .iter()
                    .map(|(key, result)| {
                        (
                            key.clone(),
                            serde_json::to_value(result).unwrap_or(Value::Null),
                        )
                    })
                    .collect()
            })
            .collect(),
    };
    let state = sealer.seal(operation, &payload)?;
    let requests = round
        .requests
        .into_iter()
        .map(|(key, params)| (key, InputRequest::Elicitation(ElicitRequest::new(params))))
        .collect();
    Ok(Outcome::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(state),
    )))
}

fn decode_answers(payload: &StatePayload) -> Result<Vec<RoundAnswers>, ErrorData> {
    if payload.round != payload.answers.len() + 1 {
        return Err(ErrorData::invalid_params(
            crate::state::INVALID_STATE_MESSAGE,
            None,
        ));
    }
    payload
        .answers
        .iter()
        .map(|round| {
            round
                .iter()
                .map(|(key, value)| {
                    serde_json::from_value(value.clone())
                        .map(|result| (key.clone(), result))
                        .map_err(|_| {
                            ErrorData::invalid_params(crate::state::INVALID_STATE_MESSAGE, None)
                        })
                })
                .collect()
        })
        .collect()
}

async fn drive_legacy<T, S>(
    context: &RequestContext<RoleServer>,
    operation_id: String,
    script: S,
) -> Result<Outcome<T>, ErrorData>
where
    S: Fn(&str, &[RoundAnswers]) -> Result<Step<T>, ErrorData>,
{
    let mut answers: Vec<RoundAnswers> = Vec::new();
    loop {
        match script(&operation_id, &answers)? {
            Step::Done(value) => return Ok(Outcome::Done(value)),
            Step::Ask(round) => {
                require_modes(context, &round)?;
                let mut current = RoundAnswers::new();
                for (key, params) in round.requests {
                    // Stop asking when the client cancels the original request.
                    let asked = tokio::select! {
                        asked = context.peer.create_elicitation(params) => asked,
                        () = context.ct.cancelled() => {
                            return Err(ErrorData::internal_error("the request was cancelled", None));
                        }
                    };
                    let result = asked.map_err(|error| {
                        ErrorData::internal_error(
                            format!("elicitation/create for '{key}' failed: {error}"),
                            None,
                        )
                    })?;
                    let accepted = result.action == ElicitationAction::Accept;
                    current.insert(key, result);
                    if !accepted {
                        break;
                    }
                }
                answers.push(current);
            }
        }
    }
}

/// Fails with `-32021` unless the request's client declared every elicitation mode `round` uses.
fn require_modes(context: &RequestContext<RoleServer>, round: &Round) -> Result<(), ErrorData> {
    let declared = context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation);
    let (form, url) = match &declared {
        None => (false, false),
        Some(capability) if capability.form.is_none() && capability.url.is_none() => (true, false),
        Some(capability) => (capability.form.is_some(), capability.url.is_some()),
    };
    let needs_form = round
        .requests
        .iter()
        .any(|(_, params)| matches!(params, ElicitRequestParams::FormElicitationParams { .. }));
    let needs_url = round
        .requests
        .iter()
        .any(|(_, params)| matches!(params, ElicitRequestParams::UrlElicitationParams { .. }));
    if (needs_form && !form) || (needs_url && !url) {
        let mut capability = ElicitationCapability::default();
        if needs_form {
            capability.form = Some(FormElicitationCapability::default());
        }
        if needs_url {
            capability.url = Some(UrlElicitationCapability::default());
        }
        let mut required = ClientCapabilities::default();
        required.elicitation = Some(capability);
        return Err(ErrorData::missing_required_client_capability(required));
    }
    Ok(())
}
