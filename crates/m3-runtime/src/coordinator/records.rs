//! What the coordinator writes and reads about a round: its stored parameters, its
//! `elicitation.request` event, and the errors of a passed deadline or a failed round.

use m3_store::RoundRef;
use m3_types::{
    Error, ErrorCode, ManagedInputRecord, PendingElicitationRound, Result, RoundFailureCode,
    messages, redact,
};
use serde_json::{Map, Value, json};

/// The operation's parameters as stored with the round: without the wire's
/// continuation fields, with the operation's identity.
/// A round another worker can carry on is marked [`TRANSFERABLE_PARAMETER`].
pub(super) fn round_parameters(
    pending: &PendingElicitationRound,
    mut parameters: Map<String, Value>,
    transferable: bool,
) -> Map<String, Value> {
    for key in [
        "requestState",
        "request_state",
        "inputResponses",
        "input_responses",
    ] {
        // `shift_remove` keeps the other parameters in the order they were given.
        parameters.shift_remove(key);
    }
    parameters.insert(
        "logical_operation_id".into(),
        pending.logical_operation_id.clone().into(),
    );
    parameters.insert(
        "operation_kind".into(),
        pending.operation_kind.as_str().into(),
    );
    parameters.insert(
        "operation_name".into(),
        pending.operation_name.clone().into(),
    );
    if transferable {
        parameters.insert(crate::transfer::TRANSFERABLE_PARAMETER.into(), true.into());
    }
    parameters
}

/// The `elicitation.request` event of a round (requests redacted).
pub(super) fn request_event(pending: &PendingElicitationRound, round_index: u32) -> Result<Value> {
    let requests = serde_json::to_value(&pending.requests)
        .map_err(|e| Error::protocol("elicitation requests are not serializable").with_source(e))?;
    Ok(json!({
        "round_id": pending.round_id,
        "round_index": round_index,
        "server": pending.server,
        "operation_kind": pending.operation_kind.as_str(),
        "operation_name": pending.operation_name,
        "logical_operation_id": pending.logical_operation_id,
        "requests": redact(&requests),
        "deadline": pending.deadline.map(m3_types::timestamp::format),
    }))
}

/// The error of a round whose deadline passed before its response.
pub(super) fn deadline_error(round: &RoundRef) -> Error {
    Error::timeout(messages::ELICITATION_TIMED_OUT)
        .with_detail("round_id", round.round_id.clone())
        .with_detail("reason", "elicitation_deadline")
}

/// The error a waiter gets when its round was failed (by recovery, a cancel, a timeout).
pub(super) fn failed_round_error(record: &ManagedInputRecord) -> Error {
    let message = record
        .failure_message
        .clone()
        .unwrap_or_else(|| "managed-input round failed".into());
    match record.failure() {
        Some(RoundFailureCode::RecoveryUnavailable) => Error::managed_input_recovery(message),
        Some(RoundFailureCode::Error(ErrorCode::Cancelled)) => Error::cancelled(message),
        Some(RoundFailureCode::Error(ErrorCode::Timeout)) => Error::timeout(message),
        _ => Error::managed_input_state(message),
    }
    .with_detail("round_id", record.pending.round_id.clone())
}
