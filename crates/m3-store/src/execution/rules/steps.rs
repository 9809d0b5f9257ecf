//! Whole write steps on a backend's [`ExecutionSlot`]: a backend that reads the record,
//! decides and writes in one critical section (a lock, a transaction) hands the rules its
//! slot and stores what they changed, so no backend spells a step out again.

use m3_types::{ExecutionStatus, HumanInput, Result};
use serde_json::Value;
use time::OffsetDateTime;

use super::{
    TerminalData, check_fence, check_finish, check_lease_write, check_terminalize,
    check_transition, diagnose, errors, mark_finished, state_changed_payload,
};
use crate::execution::ExecutionChange;
use crate::execution::record::{
    AppendEvent, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_HANDED_OVER,
    EVENT_EXECUTION_STATE_CHANGED, ExecutionEvent, ExecutionLease, ExecutionLeaseRef,
    ExecutionRecord, FinishExecution, TerminalizeExpired,
};
use crate::managed_input::rules::Decision;

/// One execution as a backend holds it inside a read-decide-write: its record and its
/// event log. The steps below change the record only through [`record_mut`](Self::record_mut),
/// after every check passed, so a backend that writes only changed records can track that.
pub trait ExecutionSlot {
    /// The record as read.
    fn record(&self) -> &ExecutionRecord;
    /// The record, to be changed (and stored).
    fn record_mut(&mut self) -> &mut ExecutionRecord;
    /// Appends an event with the record's next sequence number (and advances the record's
    /// `sequence` to it).
    fn append_event(&mut self, kind: &str, payload: Value, now: OffsetDateTime) -> ExecutionEvent;
}

/// `transition`: [`check_transition`], then the new lifecycle and its
/// `execution.state_changed` event; returns the changed record.
///
/// # Errors
/// As [`check_transition`].
pub fn transition_step(
    slot: &mut impl ExecutionSlot,
    to: ExecutionStatus,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Result<ExecutionRecord> {
    check_transition(slot.record(), to, lease, now)?;
    let record = slot.record_mut();
    record.lifecycle = to;
    record.updated_at = now;
    slot.append_event(
        EVENT_EXECUTION_STATE_CHANGED,
        state_changed_payload(to),
        now,
    );
    Ok(slot.record().clone())
}

/// `finish`: [`check_finish`] against `stored` (the terminal data stored for a finished
/// record; `None`: [`TerminalData::of_record`] of the record read), then the terminal record
/// and its `execution.finished` event with `payload`. Returns the decision (an idempotent
/// repeat changes nothing) and the record.
///
/// # Errors
/// As [`check_finish`] and [`TerminalData::of_record`].
pub fn finish_step(
    slot: &mut impl ExecutionSlot,
    stored: Option<&TerminalData>,
    requested: &TerminalData,
    request: &FinishExecution,
    payload: Value,
    now: OffsetDateTime,
) -> Result<(Decision, ExecutionRecord)> {
    let derived = match stored {
        None if slot.record().is_finished() => Some(TerminalData::of_record(slot.record())?),
        _ => None,
    };
    let stored = stored.or(derived.as_ref());
    let decided = check_finish(
        slot.record(),
        stored,
        requested,
        request.lease.as_ref(),
        now,
    )?;
    if decided == Decision::Apply {
        let (error, result) = (request.error.clone(), request.result.clone());
        mark_finished(slot.record_mut(), request.outcome, error, result, now);
        slot.append_event(EVENT_EXECUTION_FINISHED, payload, now);
    }
    Ok((decided, slot.record().clone()))
}

/// `terminalize_expired` on the slot (the backend fails the execution's unresolved rounds
/// in the same atomic step): [`check_terminalize`], then the execution finished on its
/// expired lease ([`mark_finished`]) and its `execution.finished` event with `payload`
/// (from [`terminalized_payload`](super::terminalized_payload)).
///
/// # Errors
/// As [`check_terminalize`].
pub fn terminalize_step(
    slot: &mut impl ExecutionSlot,
    request: &TerminalizeExpired,
    payload: Value,
    now: OffsetDateTime,
) -> Result<()> {
    check_terminalize(slot.record(), request, now)?;
    let error = request.error.clone();
    mark_finished(slot.record_mut(), request.outcome, error, None, now);
    slot.append_event(EVENT_EXECUTION_FINISHED, payload, now);
    Ok(())
}

/// `claim_queued` on a slot that [`is_claimable`](super::is_claimable): the claim
/// ([`apply_claim`](super::apply_claim)) and its `execution.state_changed` event. Returns
/// the new lease.
pub fn claim_step(
    slot: &mut impl ExecutionSlot,
    owner_id: &str,
    lease_token: String,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> ExecutionLease {
    let lease = super::apply_claim(slot.record_mut(), owner_id, lease_token, expires_at, now);
    slot.append_event(
        EVENT_EXECUTION_STATE_CHANGED,
        state_changed_payload(super::CLAIMED_LIFECYCLE),
        now,
    );
    lease
}

/// The `execution.created` event (sequence 0) of a new execution with `human_input`.
pub fn created_event(
    execution_id: &str,
    human_input: HumanInput,
    now: OffsetDateTime,
) -> ExecutionEvent {
    ExecutionEvent {
        execution_id: execution_id.to_owned(),
        sequence: 0,
        kind: EVENT_EXECUTION_CREATED.to_owned(),
        payload: super::created_payload(human_input),
        timestamp: now,
    }
}

/// [`ExecutionChange`]'s step on the slot read for its execution: [`transition_step`] or
/// [`cancel_step`]. Returns the record.
///
/// # Errors
/// As [`transition_step`].
pub fn change_step(
    slot: &mut impl ExecutionSlot,
    change: &ExecutionChange,
    now: OffsetDateTime,
) -> Result<ExecutionRecord> {
    match change {
        ExecutionChange::Transition { to, lease, .. } => {
            transition_step(slot, *to, lease.as_ref(), now)
        }
        ExecutionChange::Cancel { reason, .. } => Ok(cancel_step(slot, reason.as_deref(), now)),
        ExecutionChange::HandOver {
            lease,
            successor,
            ttl,
            ..
        } => hand_over_step(slot, lease, successor, *ttl, now),
    }
}

/// `hand_over`: the execution is unfinished and `lease` is its stored, live lease (the
/// compare-and-set); then `successor` holds it under a fresh token until `now + ttl`, and
/// the `execution.handed_over` event records both owners. Returns the changed record.
///
/// # Errors
/// `invalid_argument` for an empty successor, the successor being the current owner, or a
/// zero ttl; as [`check_lease_write`] otherwise (an expired lease is never handed over).
pub fn hand_over_step(
    slot: &mut impl ExecutionSlot,
    lease: &ExecutionLeaseRef,
    successor: &str,
    ttl: std::time::Duration,
    now: OffsetDateTime,
) -> Result<ExecutionRecord> {
    super::require_non_empty(successor, "successor")?;
    if successor == lease.owner_id {
        return Err(m3_types::Error::model_validation(
            "an execution is handed over to another worker, not to its owner",
        )
        .with_detail("successor", successor));
    }
    let expires_at = super::lease_expiry(now, ttl)?;
    check_lease_write(Some(slot.record()), lease, now)?;
    let granted = granted_lease(
        &lease.execution_id,
        successor.to_owned(),
        super::new_execution_lease_token(),
        expires_at,
    );
    lease_step(slot, granted, now);
    slot.append_event(
        EVENT_EXECUTION_HANDED_OVER,
        serde_json::json!({"from": lease.owner_id, "to": successor}),
        now,
    );
    Ok(slot.record().clone())
}

/// `request_cancel`: the first request on an unfinished execution records when and why;
/// any other is a no-op. Returns the record.
pub fn cancel_step(
    slot: &mut impl ExecutionSlot,
    reason: Option<&str>,
    now: OffsetDateTime,
) -> ExecutionRecord {
    let current = slot.record();
    if current.cancel_requested_at.is_none() && !current.is_finished() {
        let record = slot.record_mut();
        record.cancel_requested_at = Some(now);
        record.cancel_reason = reason.map(str::to_owned);
        record.updated_at = now;
    }
    slot.record().clone()
}

/// `append_event` (after [`check_append`](super::check_append)): the execution is not
/// finished and the fence holds; then the event is appended.
///
/// # Errors
/// `managed_input_state` ([`Reason::Finished`](m3_types::Reason::Finished)); the fence's
/// errors.
pub fn append_step(
    slot: &mut impl ExecutionSlot,
    event: AppendEvent,
    now: OffsetDateTime,
) -> Result<ExecutionEvent> {
    let record = slot.record();
    if record.is_finished() {
        return Err(errors::finished(&record.execution_id));
    }
    check_fence(record, event.lease.as_ref(), now)?;
    Ok(slot.append_event(&event.kind, event.payload, now))
}

/// `release_lease`'s decision on the stored record (`None`: no such execution): a finished
/// execution without a lease is an idempotent repeat; an unfinished one whose fence holds
/// is released ([`release_step`]); anything else is diagnosed.
///
/// # Errors
/// As [`diagnose`].
pub fn check_release(
    record: Option<&ExecutionRecord>,
    lease: &ExecutionLeaseRef,
    now: OffsetDateTime,
) -> Result<Decision> {
    match record {
        Some(r) if r.is_finished() && r.lease.is_none() => Ok(Decision::AlreadyDone),
        Some(r) if !r.is_finished() && check_fence(r, Some(lease), now).is_ok() => {
            Ok(Decision::Apply)
        }
        other => Err(diagnose(other, &lease.execution_id, Some(lease), now)),
    }
}

/// `release_lease` after [`check_release`] said [`Decision::Apply`]: the lease is gone.
pub fn release_step(slot: &mut impl ExecutionSlot, now: OffsetDateTime) {
    let record = slot.record_mut();
    record.lease = None;
    record.updated_at = now;
}

/// `acquire_lease` and `renew_lease` after their checks: the record holds `lease` from
/// `now` on. Returns the lease.
pub fn lease_step(
    slot: &mut impl ExecutionSlot,
    lease: ExecutionLease,
    now: OffsetDateTime,
) -> ExecutionLease {
    let record = slot.record_mut();
    record.lease = Some(lease.clone());
    record.updated_at = now;
    lease
}

/// `renew_lease` on the slot read for `lease.execution_id` (`None`: no such execution):
/// [`check_lease_write`], then the lease extended to `expires_at` (from
/// [`lease_expiry`](super::lease_expiry)). Returns the renewed lease.
///
/// # Errors
/// As [`check_lease_write`].
pub fn renew_step<S: ExecutionSlot>(
    slot: Option<&mut S>,
    lease: &ExecutionLeaseRef,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<ExecutionLease> {
    check_lease_write(slot.as_deref().map(ExecutionSlot::record), lease, now)?;
    let slot = slot.ok_or_else(|| errors::not_found(&lease.execution_id))?;
    Ok(lease_step(slot, renewed_lease(lease, expires_at), now))
}

/// The lease `acquire_lease` grants: `owner_id` holds `execution_id` under `lease_token`
/// until `expires_at`.
pub fn granted_lease(
    execution_id: &str,
    owner_id: String,
    lease_token: String,
    expires_at: OffsetDateTime,
) -> ExecutionLease {
    ExecutionLease {
        execution_id: execution_id.to_owned(),
        owner_id,
        lease_token,
        expires_at,
    }
}

/// The lease `renew_lease` stores: the presented one, expiring at `expires_at`.
pub fn renewed_lease(lease: &ExecutionLeaseRef, expires_at: OffsetDateTime) -> ExecutionLease {
    granted_lease(
        &lease.execution_id,
        lease.owner_id.clone(),
        lease.lease_token.clone(),
        expires_at,
    )
}
