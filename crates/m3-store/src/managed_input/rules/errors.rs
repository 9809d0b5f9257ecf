//! The errors the rules give that are not tied to one check: a missing round, a stored
//! record that does not decode, a guarded write that raced.

use m3_types::{Error, Reason};

use crate::managed_input::request::RoundRef;

/// `not_found`: the round does not exist.
pub fn missing_round(round: &RoundRef) -> Error {
    Error::not_found("managed-input round does not exist")
        .with_detail("execution_id", round.execution_id.as_str())
        .with_detail("round_id", round.round_id.as_str())
}

/// `managed_input_invalid` / [`Reason::StoredRecordInvalid`]: a stored row does not decode
/// into a valid record. `why` says which column or invariant.
pub fn stored_invalid(why: impl Into<String>) -> Error {
    Error::managed_input_validation("stored managed-input record is invalid")
        .with_reason(Reason::StoredRecordInvalid)
        .with_detail("why", why.into())
}

/// `managed_input_conflict` / [`Reason::ConcurrentChange`]: a guarded write changed nothing
/// although the checks passed in the same step (`what` names the write).
pub fn raced(what: &'static str) -> Error {
    Error::managed_input_conflict(format!("managed-input {what} raced with another writer"))
        .with_reason(Reason::ConcurrentChange)
}

pub(super) fn invalid(message: impl Into<String>, reason: Reason) -> Error {
    Error::managed_input_validation(message).with_reason(reason)
}
