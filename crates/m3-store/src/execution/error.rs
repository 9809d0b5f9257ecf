//! The typed errors of the execution store, built in one place so every
//! operation reports the same code for the same situation.

use m3_types::{Error, ErrorCode, ExecutionStatus};

/// The execution does not exist (store level: a conflict, as for rounds).
pub(crate) fn not_found(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution does not exist")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "not_found")
}

/// The caller's lease is not the stored one (wrong owner or token, released,
/// or replaced).
pub(crate) fn lease_not_held(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease is not held by this owner")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "lease_not_held")
}

/// The caller's lease expired.
pub(crate) fn lease_expired(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease expired")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "lease_expired")
}

/// Another worker holds a live lease.
pub(crate) fn lease_held_by_other(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease is held by another owner")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "lease_held")
}

/// A worker lease exists but expired: only recovery may touch the execution.
pub(crate) fn recovery_required(execution_id: &str) -> Error {
    Error::managed_input_conflict(
        "execution worker lease expired; the execution must be recovered, not resumed",
    )
    .with_detail("execution_id", execution_id)
    .with_detail("reason", "recovery_required")
}

/// An unleased writer met a live worker lease.
pub(crate) fn lease_required(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution is leased by a worker; the write needs its lease")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "lease_required")
}

/// Recovery was asked for a lease that is still live.
pub(crate) fn lease_still_live(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease has not expired")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "lease_live")
}

/// The execution is finished and cannot change.
pub(crate) fn finished(execution_id: &str) -> Error {
    Error::managed_input_state("execution is already finished")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "finished")
}

/// `finish` was repeated with different terminal data.
pub(crate) fn finished_differently(execution_id: &str) -> Error {
    Error::managed_input_state("execution is already finished with a different outcome")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "finished_differently")
}

/// The lifecycle table forbids `from -> to`: the reference's
/// `InvalidTransitionError`, built with [`Error::from_code`] so it carries the
/// kind m3-types gives `invalid_transition` (today `invalid_argument` with
/// detail `code = "invalid_transition"`).
pub(crate) fn invalid_transition(
    execution_id: &str,
    from: ExecutionStatus,
    to: ExecutionStatus,
) -> Error {
    Error::from_code(
        ErrorCode::InvalidTransition,
        format!(
            "invalid execution lifecycle transition from {} to {}",
            from.as_str(),
            to.as_str()
        ),
    )
    .with_detail("execution_id", execution_id)
    .with_detail("reason", "invalid_transition")
    .with_detail("from", from.as_str())
    .with_detail("to", to.as_str())
}

/// The id is already used by a different execution.
pub(crate) fn id_conflict(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution id already exists with a different specification")
        .with_detail("execution_id", execution_id)
        .with_detail("reason", "id_conflict")
}

/// A stored row could not be decoded.
pub(crate) fn corrupt(execution_id: &str, what: &'static str) -> Error {
    Error::storage("stored execution row is corrupt")
        .with_detail("execution_id", execution_id)
        .with_detail("column", what)
}
