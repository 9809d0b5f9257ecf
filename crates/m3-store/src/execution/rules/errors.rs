//! The typed errors of the execution store, built in one place so every
//! operation of every backend reports the same code and [`Reason`] for the
//! same situation.

use m3_types::{Error, ErrorCode, ExecutionStatus, Reason};

/// `not_found`: the execution does not exist.
pub fn not_found(execution_id: &str) -> Error {
    Error::not_found("execution does not exist").with_detail("execution_id", execution_id)
}

/// The caller's lease is not the stored one (wrong owner or token, released,
/// or replaced).
pub fn lease_not_held(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease is not held by this owner")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseNotHeld)
}

/// The caller's lease expired.
pub fn lease_expired(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease expired")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseExpired)
}

/// Another worker holds a live lease.
pub fn lease_held_by_other(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease is held by another owner")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseHeld)
}

/// A worker lease exists but expired: only recovery may touch the execution.
pub fn recovery_required(execution_id: &str) -> Error {
    Error::managed_input_conflict(
        "execution worker lease expired; the execution must be recovered, not resumed",
    )
    .with_detail("execution_id", execution_id)
    .with_reason(Reason::RecoveryRequired)
}

/// An unleased writer met a live worker lease.
pub fn lease_required(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution is leased by a worker; the write needs its lease")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseRequired)
}

/// Recovery was asked for a lease that is still live.
pub fn lease_still_live(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution worker lease has not expired")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseLive)
}

/// The execution is finished and cannot change.
pub fn finished(execution_id: &str) -> Error {
    Error::managed_input_state("execution is already finished")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::Finished)
}

/// `finish` was repeated with different terminal data.
pub fn finished_differently(execution_id: &str) -> Error {
    Error::managed_input_state("execution is already finished with a different outcome")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::FinishedDifferently)
}

/// The lifecycle table forbids `from -> to`: the reference's
/// `InvalidTransitionError`, built with [`Error::from_code`] so it carries the
/// kind m3-types gives `invalid_transition` (today `invalid_argument` with
/// detail `code = "invalid_transition"`).
pub fn invalid_transition(execution_id: &str, from: ExecutionStatus, to: ExecutionStatus) -> Error {
    Error::from_code(
        ErrorCode::InvalidTransition,
        format!(
            "invalid execution lifecycle transition from {} to {}",
            from.as_str(),
            to.as_str()
        ),
    )
    .with_detail("execution_id", execution_id)
    .with_reason(Reason::InvalidTransition)
    .with_detail("from", from.as_str())
    .with_detail("to", to.as_str())
}

/// The id is already used by a different execution.
pub fn id_conflict(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution id already exists with a different specification")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::IdConflict)
}

/// `storage_error`: a stored row could not be decoded (`what` names the column).
pub fn corrupt(execution_id: &str, what: &'static str) -> Error {
    Error::storage("stored execution row is corrupt")
        .with_reason(Reason::StoredRecordInvalid)
        .with_detail("execution_id", execution_id)
        .with_detail("column", what)
}

/// `managed_input_conflict` / [`Reason::ConcurrentChange`]: a guarded write
/// changed nothing although its checks passed.
pub fn concurrent_change(execution_id: &str) -> Error {
    Error::managed_input_conflict("execution changed concurrently")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::ConcurrentChange)
}

/// `managed_input_conflict` / [`Reason::LeaseTokenInUse`]: another execution
/// holds a lease with this token.
pub fn lease_token_in_use(execution_id: &str) -> Error {
    Error::managed_input_conflict("lease token is already in use")
        .with_detail("execution_id", execution_id)
        .with_reason(Reason::LeaseTokenInUse)
}
