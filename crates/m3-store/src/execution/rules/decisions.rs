//! The decision of each operation, for every backend: argument checks, lease expiry and
//! tokens, the claim, the fence, the lifecycle table, `finish` idempotency and the recovery
//! preconditions; and the record changes a decision allows.

use std::time::Duration;

use m3_types::{
    Error, ErrorInfo, ExecutionOutcome, ExecutionResult, ExecutionStatus, Reason, Result,
    canonical_json, new_id,
};
use time::OffsetDateTime;

use super::errors;
use super::payloads::to_canonical_opt;
use crate::execution::record::{
    AppendEvent, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_HANDED_OVER,
    EVENT_EXECUTION_STATE_CHANGED, ExecutionLease, ExecutionLeaseRef, ExecutionRecord,
    FinishExecution, NewExecution, TerminalizeExpired,
};

/// The failure message of a round still unresolved when its execution finishes: `finish`
/// fails every such round (code `recovery_unavailable`) in the step that finishes the
/// execution, as recovery does, so a finished execution never has a round that accepts an
/// answer nobody would deliver.
pub const ROUND_CLOSED_AT_FINISH: &str = "the execution finished before the round was resolved";

/// The record a new execution gets: `created`, no lease, sequence 0, created and updated
/// at `now`.
pub fn created_record(id: &str, new: NewExecution, now: OffsetDateTime) -> ExecutionRecord {
    ExecutionRecord {
        execution_id: id.to_owned(),
        spec: new.spec,
        human_input: new.human_input,
        lifecycle: ExecutionStatus::Created,
        outcome: None,
        error: None,
        result: None,
        sequence: 0,
        lease: None,
        cancel_requested_at: None,
        cancel_reason: None,
        created_at: now,
        updated_at: now,
        finished_at: None,
    }
}

/// Marks `record` finished at `now` with its terminal data, releasing the lease (after
/// [`check_finish`] or [`check_terminalize`] allowed it).
pub fn mark_finished(
    record: &mut ExecutionRecord,
    outcome: ExecutionOutcome,
    error: Option<ErrorInfo>,
    result: Option<ExecutionResult>,
    now: OffsetDateTime,
) {
    record.lifecycle = ExecutionStatus::Finished;
    record.outcome = Some(outcome);
    record.error = error;
    record.result = result;
    record.finished_at = Some(now);
    record.updated_at = now;
    record.lease = None;
}

/// Event kinds only the store itself appends.
pub const RESERVED_KINDS: [&str; 4] = [
    EVENT_EXECUTION_CREATED,
    EVENT_EXECUTION_STATE_CHANGED,
    EVENT_EXECUTION_FINISHED,
    EVENT_EXECUTION_HANDED_OVER,
];

/// `invalid_argument` / [`Reason::EmptyArgument`] for an empty or blank string.
pub fn require_non_empty(value: &str, what: &'static str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::model_validation(format!("{what} must not be empty"))
            .with_reason(Reason::EmptyArgument));
    }
    Ok(())
}

/// `now + ttl` at the stored precision, refusing a zero or unrepresentable ttl
/// (`invalid_argument` / [`Reason::InvalidLeaseDuration`]).
pub fn lease_expiry(now: OffsetDateTime, ttl: Duration) -> Result<OffsetDateTime> {
    let invalid =
        |message: &str| Error::model_validation(message).with_reason(Reason::InvalidLeaseDuration);
    if ttl.is_zero() {
        return Err(invalid("lease ttl must be positive"));
    }
    time::Duration::try_from(ttl)
        .ok()
        .and_then(|d| now.checked_add(d))
        .map(crate::clock::truncate_to_stored_precision)
        .ok_or_else(|| invalid("lease ttl is too large"))
}

/// A fresh execution-lease token (`lease-` + a ULID).
pub fn new_execution_lease_token() -> String {
    format!("lease-{}", new_id())
}

/// `acquire_lease`'s argument checks: a non-empty owner, and the caller's non-empty token
/// or a fresh one. Returns the token to store.
///
/// # Errors
/// `invalid_argument` / [`Reason::EmptyArgument`].
pub fn acquire_token(request: &crate::AcquireLease) -> Result<String> {
    require_non_empty(&request.owner_id, "owner_id")?;
    match &request.lease_token {
        Some(token) => {
            require_non_empty(token, "lease_token")?;
            Ok(token.clone())
        }
        None => Ok(new_execution_lease_token()),
    }
}

/// The lifecycle a claimed execution is in when the claim returns.
pub const CLAIMED_LIFECYCLE: ExecutionStatus = ExecutionStatus::Starting;

/// `claim_queued`'s argument checks: a non-empty owner and a usable ttl. Returns the
/// lease's expiry and its fresh token.
///
/// # Errors
/// `invalid_argument` ([`Reason::EmptyArgument`], [`Reason::InvalidLeaseDuration`]).
pub fn check_claim_request(
    request: &crate::ClaimQueued,
    now: OffsetDateTime,
) -> Result<(OffsetDateTime, String)> {
    require_non_empty(&request.owner_id, "owner_id")?;
    if let Some(id) = &request.execution_id {
        require_non_empty(id, "execution_id")?;
    }
    Ok((lease_expiry(now, request.ttl)?, new_execution_lease_token()))
}

/// Whether `claim_queued` may hand out `record`: lifecycle `queued`, no lease (live or
/// expired), not finished, and the requested id if one was given.
pub fn is_claimable(record: &ExecutionRecord, only: Option<&str>) -> bool {
    record.lifecycle == ExecutionStatus::Queued
        && record.lease.is_none()
        && !record.is_finished()
        && only.is_none_or(|id| id == record.execution_id)
}

/// Applies a claim to `record` (which [`is_claimable`]): the new lease, lifecycle
/// [`CLAIMED_LIFECYCLE`], `updated_at`. The caller appends `execution.state_changed` with
/// [`state_changed_payload`](super::state_changed_payload)`(CLAIMED_LIFECYCLE)` in the same
/// atomic step.
pub fn apply_claim(
    record: &mut ExecutionRecord,
    owner_id: &str,
    lease_token: String,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> ExecutionLease {
    let lease = ExecutionLease {
        execution_id: record.execution_id.clone(),
        owner_id: owner_id.to_owned(),
        lease_token,
        expires_at,
    };
    record.lease = Some(lease.clone());
    record.lifecycle = CLAIMED_LIFECYCLE;
    record.updated_at = now;
    lease
}

/// An event kind a caller may append: non-empty and not reserved.
///
/// # Errors
/// `invalid_argument` ([`Reason::EmptyArgument`], [`Reason::ReservedEventKind`]).
pub fn check_event_kind(kind: &str) -> Result<()> {
    require_non_empty(kind, "event kind")?;
    if RESERVED_KINDS.contains(&kind) {
        return Err(
            Error::model_validation("event kind is reserved for the execution store")
                .with_reason(Reason::ReservedEventKind)
                .with_detail("kind", kind),
        );
    }
    Ok(())
}

/// `append_event`'s argument checks: [`check_event_kind`], then a payload that is finite
/// JSON. Returns the payload's canonical JSON text (what a backend that stores text writes).
///
/// # Errors
/// `invalid_argument` ([`Reason::EmptyArgument`], [`Reason::ReservedEventKind`]); the
/// payload's encoding error.
pub fn check_append(event: &AppendEvent) -> Result<String> {
    check_event_kind(&event.kind)?;
    canonical_json(&event.payload)
}

/// The fence of the module docs of [`ExecutionStore`](super::super::ExecutionStore):
/// `Some(lease)` must be the stored, live lease; `None` requires that no lease exists at all.
///
/// # Errors
/// `managed_input_conflict` ([`Reason::RecoveryRequired`], [`Reason::LeaseRequired`],
/// [`Reason::LeaseNotHeld`], [`Reason::LeaseExpired`]).
pub fn check_fence(
    record: &ExecutionRecord,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Result<()> {
    let id = record.execution_id.as_str();
    match (lease, &record.lease) {
        (None, None) => Ok(()),
        (None, Some(stored)) if stored.is_expired_at(now) => Err(errors::recovery_required(id)),
        (None, Some(_)) => Err(errors::lease_required(id)),
        (Some(_), None) => Err(errors::lease_not_held(id)),
        (Some(given), Some(stored)) => {
            if !holds(stored, given) {
                Err(errors::lease_not_held(id))
            } else if stored.is_expired_at(now) {
                Err(errors::lease_expired(id))
            } else {
                Ok(())
            }
        }
    }
}

fn holds(stored: &ExecutionLease, given: &ExecutionLeaseRef) -> bool {
    given.execution_id == stored.execution_id
        && given.owner_id == stored.owner_id
        && given.lease_token == stored.lease_token
}

/// Explains why a guarded write touched no row, from a fresh read (`None`: missing).
pub fn diagnose(
    record: Option<&ExecutionRecord>,
    execution_id: &str,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Error {
    match record {
        None => errors::not_found(execution_id),
        Some(record) if record.is_finished() => errors::finished(execution_id),
        Some(record) => match check_fence(record, lease, now) {
            Err(e) => e,
            Ok(()) => errors::concurrent_change(execution_id),
        },
    }
}

/// What `acquire_lease` does on the stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquire {
    /// No lease exists: take it.
    Take,
    /// The same owner and token already hold this live lease: return it unchanged.
    Held(ExecutionLease),
}

/// `acquire_lease`'s rules: not finished; no lease (take it), or the same live lease
/// (idempotent); an expired lease is never taken over.
///
/// # Errors
/// `managed_input_state` ([`Reason::Finished`]); `managed_input_conflict`
/// ([`Reason::RecoveryRequired`], [`Reason::LeaseHeld`]).
pub fn check_acquire(
    record: &ExecutionRecord,
    owner_id: &str,
    lease_token: &str,
    now: OffsetDateTime,
) -> Result<Acquire> {
    let id = record.execution_id.as_str();
    if record.is_finished() {
        return Err(errors::finished(id));
    }
    match &record.lease {
        None => Ok(Acquire::Take),
        Some(stored) if stored.is_expired_at(now) => Err(errors::recovery_required(id)),
        Some(stored) if stored.owner_id == owner_id && stored.lease_token == lease_token => {
            Ok(Acquire::Held(stored.clone()))
        }
        Some(_) => Err(errors::lease_held_by_other(id)),
    }
}

/// `renew_lease` and `release_lease` need the caller's stored, live lease on an unfinished
/// execution; `diagnose` names the failure. Returns `Ok` when the write may proceed.
///
/// # Errors
/// As [`diagnose`].
pub fn check_lease_write(
    record: Option<&ExecutionRecord>,
    lease: &ExecutionLeaseRef,
    now: OffsetDateTime,
) -> Result<()> {
    match record {
        Some(r) if !r.is_finished() && check_fence(r, Some(lease), now).is_ok() => Ok(()),
        _ => Err(diagnose(record, &lease.execution_id, Some(lease), now)),
    }
}

/// `transition`'s rules: the lifecycle table allows `from -> to`, `finished` only through
/// `finish`/`terminalize_expired`, and the fence holds.
///
/// # Errors
/// `invalid_argument` / [`Reason::InvalidTransition`]; the fence's errors.
pub fn check_transition(
    record: &ExecutionRecord,
    to: ExecutionStatus,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Result<()> {
    let from = record.lifecycle;
    if to == ExecutionStatus::Finished || !from.can_transition_to(to) {
        return Err(errors::invalid_transition(&record.execution_id, from, to));
    }
    check_fence(record, lease, now)
}

/// The stored terminal data of a finish, as canonical JSON, for the idempotency check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TerminalData {
    /// The outcome string.
    pub outcome: String,
    /// Canonical JSON of the error, if any.
    pub error_json: Option<String>,
    /// Canonical JSON of the result, if any.
    pub result_json: Option<String>,
}

impl TerminalData {
    /// The terminal data `request` asks to store.
    ///
    /// # Errors
    /// `invalid_argument` if the error or result does not serialize.
    pub fn of_request(request: &FinishExecution) -> Result<Self> {
        Ok(Self {
            outcome: request.outcome.as_str().to_owned(),
            error_json: to_canonical_opt(request.error.as_ref())?,
            result_json: to_canonical_opt(request.result.as_ref())?,
        })
    }

    /// The terminal data a finished record holds.
    ///
    /// # Errors
    /// As [`of_request`](Self::of_request).
    pub fn of_record(record: &ExecutionRecord) -> Result<Self> {
        Ok(Self {
            outcome: record
                .outcome
                .map(|o| o.as_str().to_owned())
                .unwrap_or_default(),
            error_json: to_canonical_opt(record.error.as_ref())?,
            result_json: to_canonical_opt(record.result.as_ref())?,
        })
    }
}

/// `finish`'s rules: a finished execution with the same terminal data is an idempotent
/// repeat ([`Decision::AlreadyDone`](crate::managed_input::rules::Decision)), with other data
/// a state error; else the lifecycle must allow `finished` and the fence must hold.
///
/// # Errors
/// `managed_input_state` ([`Reason::FinishedDifferently`]), `invalid_argument`
/// ([`Reason::InvalidTransition`]), the fence's errors.
pub fn check_finish(
    record: &ExecutionRecord,
    stored: Option<&TerminalData>,
    requested: &TerminalData,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Result<crate::managed_input::rules::Decision> {
    use crate::managed_input::rules::Decision;
    let id = record.execution_id.as_str();
    if record.is_finished() {
        return match stored {
            Some(stored) if stored == requested => Ok(Decision::AlreadyDone),
            _ => Err(errors::finished_differently(id)),
        };
    }
    if !record
        .lifecycle
        .can_transition_to(ExecutionStatus::Finished)
    {
        return Err(errors::invalid_transition(
            id,
            record.lifecycle,
            ExecutionStatus::Finished,
        ));
    }
    check_fence(record, lease, now)?;
    Ok(Decision::Apply)
}

/// `terminalize_expired`'s rules: not finished; the presented lease is the stored one and
/// it has expired.
///
/// # Errors
/// `managed_input_state` ([`Reason::Finished`]); `managed_input_conflict`
/// ([`Reason::LeaseNotHeld`], [`Reason::LeaseLive`]).
pub fn check_terminalize(
    record: &ExecutionRecord,
    request: &TerminalizeExpired,
    now: OffsetDateTime,
) -> Result<()> {
    let id = record.execution_id.as_str();
    if record.is_finished() {
        return Err(errors::finished(id));
    }
    match &record.lease {
        Some(stored) if holds(stored, &request.lease) => {
            if stored.is_expired_at(now) {
                Ok(())
            } else {
                Err(errors::lease_still_live(id))
            }
        }
        _ => Err(errors::lease_not_held(id)),
    }
}
