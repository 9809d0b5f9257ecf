//! Canonical JSON of stored values, and the payloads of the events only the store appends
//! (`execution.created`, `execution.state_changed`, `execution.finished`).

use m3_types::{Error, ExecutionStatus, Result, canonical_json};
use serde::Serialize;
use serde_json::{Value, json};

use crate::execution::record::{FinishExecution, TerminalizeExpired};

/// Canonical JSON text of any serializable value.
///
/// # Errors
/// `invalid_argument` if it does not serialize.
pub fn to_canonical<T: Serialize>(value: &T) -> Result<String> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::model_validation("execution data is not valid JSON").with_source(e))?;
    canonical_json(&value)
}

/// Canonical JSON text of an optional value.
///
/// # Errors
/// As [`to_canonical`].
pub fn to_canonical_opt<T: Serialize>(value: Option<&T>) -> Result<Option<String>> {
    value.map(to_canonical).transpose()
}

/// The payload of `execution.created`.
pub fn created_payload(human_input: m3_types::HumanInput) -> Value {
    json!({
        "lifecycle": ExecutionStatus::Created.as_str(),
        "human_input": human_input.as_str(),
    })
}

/// The payload of `execution.state_changed`.
pub fn state_changed_payload(to: ExecutionStatus) -> Value {
    json!({ "lifecycle": to.as_str() })
}

/// The payload of `execution.finished` after `finish`.
///
/// # Errors
/// `invalid_argument` if the error does not serialize.
pub fn finished_payload(request: &FinishExecution) -> Result<Value> {
    Ok(json!({
        "lifecycle": ExecutionStatus::Finished.as_str(),
        "outcome": request.outcome.as_str(),
        "error": error_value(request.error.as_ref())?,
    }))
}

/// The payload of `execution.finished` after `terminalize_expired`.
///
/// # Errors
/// `invalid_argument` if the error does not serialize.
pub fn terminalized_payload(request: &TerminalizeExpired) -> Result<Value> {
    Ok(json!({
        "lifecycle": ExecutionStatus::Finished.as_str(),
        "outcome": request.outcome.as_str(),
        "error": error_value(request.error.as_ref())?,
        "reason": request.reason,
        "completeness": "partial",
        "limitations": ["capture_incomplete"],
    }))
}

/// The error as a canonical JSON value for an event payload (`null` if none).
fn error_value(error: Option<&m3_types::ErrorInfo>) -> Result<Value> {
    match to_canonical_opt(error)? {
        None => Ok(Value::Null),
        Some(raw) => serde_json::from_str(&raw)
            .map_err(|e| Error::storage("terminal error is not valid JSON").with_source(e)),
    }
}
