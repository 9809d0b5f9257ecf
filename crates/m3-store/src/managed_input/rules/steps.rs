//! Rules of the status machine after creation: the delivery transitions, response
//! submission, failure and the recovery decision.

use m3_types::{
    Error, ManagedInputRecord, ManagedInputStatus, RECOVERY_UNAVAILABLE, Reason, Result,
    redact_responses, validate_responses,
};
use time::OffsetDateTime;

use super::{authorize, json_text, to_json_value, token_mismatch};
use crate::managed_input::request::{LeaseRef, ResponseSubmission, RoundFailure};

/// What a checked write does with the stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// The write was already made with the same data: return the stored record unchanged.
    AlreadyDone,
    /// Every precondition holds: make the write.
    Apply,
}

/// One forward step of the delivery state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transition {
    /// `response_validated → delivery_started`, one more delivery attempt.
    StartDelivery,
    /// `delivery_started → delivered`.
    MarkDelivered,
    /// `delivered → resolved`.
    Resolve,
}

impl Transition {
    /// The status the transition requires.
    pub fn expected(self) -> ManagedInputStatus {
        match self {
            Self::StartDelivery => ManagedInputStatus::ResponseValidated,
            Self::MarkDelivered => ManagedInputStatus::DeliveryStarted,
            Self::Resolve => ManagedInputStatus::Delivered,
        }
    }

    /// The status the transition leaves.
    pub fn target(self) -> ManagedInputStatus {
        match self {
            Self::StartDelivery => ManagedInputStatus::DeliveryStarted,
            Self::MarkDelivered => ManagedInputStatus::Delivered,
            Self::Resolve => ManagedInputStatus::Resolved,
        }
    }

    /// The record this transition leaves when applied at `now` (already at stored
    /// precision) to `record`.
    pub fn apply(self, record: &ManagedInputRecord, now: OffsetDateTime) -> ManagedInputRecord {
        let mut next = record.clone();
        next.status = self.target();
        next.updated_at = now;
        match self {
            Self::StartDelivery => {
                next.delivery_started_at = Some(now);
                next.delivery_attempts = next.delivery_attempts.saturating_add(1);
            }
            Self::MarkDelivered => next.delivered_at = Some(now),
            Self::Resolve => next.resolved_at = Some(now),
        }
        next
    }
}

/// A transition's preconditions: authorized with a live lease; already at the target is an
/// idempotent repeat; any status but the expected one is a state error.
///
/// # Errors
/// `managed_input_conflict` from [`authorize`]; `managed_input_state` /
/// [`Reason::WrongStatus`].
pub fn check_transition(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    now: OffsetDateTime,
    transition: Transition,
) -> Result<Decision> {
    authorize(current, lease, now, false)?;
    if current.status == transition.target() {
        return Ok(Decision::AlreadyDone);
    }
    if current.status != transition.expected() {
        return Err(Error::managed_input_state(format!(
            "managed-input transition requires {}, got {}",
            transition.expected().as_str(),
            current.status.as_str()
        ))
        .with_reason(Reason::WrongStatus)
        .with_detail("status", current.status.as_str()));
    }
    Ok(Decision::Apply)
}

/// The stored forms of an accepted submission.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncodedSubmission {
    /// Canonical JSON of the responses (what replays compare).
    pub payload_json: String,
    /// Canonical JSON of the redacted diagnostic projection (name rules and the request
    /// schemas' secret markers: [`redact_responses`]).
    pub redacted_json: String,
}

/// What `submit_responses` does on the stored round.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Submission {
    /// An idempotent replay: return the stored record unchanged.
    Replay,
    /// Accept: store these forms and move to `response_validated`.
    Accept(EncodedSubmission),
}

/// Validates `submission` against the stored requests of `record` and encodes it.
///
/// # Errors
/// `managed_input_invalid` / [`Reason::InvalidResponse`], or [`Reason::LimitExceeded`]
/// for an answer over a bound of `m3_types::limits`.
pub fn encode_submission(
    record: &ManagedInputRecord,
    submission: &ResponseSubmission,
) -> Result<EncodedSubmission> {
    validate_responses(&record.pending, &submission.responses).map_err(|e| {
        // A bound keeps its own, more precise reason (`limit_exceeded`).
        if e.reason() == Some(Reason::LimitExceeded) {
            e
        } else {
            e.with_reason(Reason::InvalidResponse)
        }
    })?;
    let payload = to_json_value(&submission.responses)?;
    Ok(EncodedSubmission {
        payload_json: json_text(&payload)?,
        redacted_json: json_text(&redact_responses(&record.pending.requests, &payload))?,
    })
}

/// `submit_responses`' rules in the contract's order: a failed round refuses; owner and token
/// must match and the lease must be live only while pending; the responses must validate;
/// on a later status, the same key with the canonically identical payload is a replay and
/// anything else a conflict.
///
/// # Errors
/// `managed_input_state` / [`Reason::RoundFailed`]; `managed_input_conflict` from
/// [`authorize`] or [`Reason::IdempotencyKeyReused`]; `managed_input_invalid` /
/// [`Reason::InvalidResponse`].
pub fn check_submission(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    submission: &ResponseSubmission,
    now: OffsetDateTime,
) -> Result<Submission> {
    if current.status == ManagedInputStatus::Failed {
        return Err(Error::managed_input_state(
            "failed managed-input round cannot accept responses",
        )
        .with_reason(Reason::RoundFailed));
    }
    let pending = current.status == ManagedInputStatus::Pending;
    authorize(current, lease, now, !pending)?;
    let encoded = encode_submission(current, submission)?;
    if pending {
        return Ok(Submission::Accept(encoded));
    }
    let stored = match &current.responses {
        Some(responses) => json_text(&to_json_value(responses)?)?,
        None => String::new(),
    };
    if current.response_idempotency_key.as_deref() == Some(submission.idempotency_key.as_str())
        && stored == encoded.payload_json
    {
        return Ok(Submission::Replay);
    }
    Err(Error::managed_input_conflict(
        "response idempotency key conflicts with an accepted response",
    )
    .with_reason(Reason::IdempotencyKeyReused)
    .with_detail("status", current.status.as_str()))
}

/// The record an accepted submission leaves.
pub fn apply_submission(
    current: &ManagedInputRecord,
    submission: &ResponseSubmission,
    now: OffsetDateTime,
) -> ManagedInputRecord {
    let mut next = current.clone();
    next.status = ManagedInputStatus::ResponseValidated;
    next.responses = Some(submission.responses.clone());
    next.response_idempotency_key = Some(submission.idempotency_key.clone());
    next.response_validated_at = Some(now);
    next.updated_at = now;
    next.failure_code = None;
    next.failure_message = None;
    next
}

/// `fail`'s rules: authorized with a live lease; `resolved` refuses; an identical failure is
/// an idempotent repeat, another one a conflict.
///
/// # Errors
/// `managed_input_conflict` ([`authorize`], [`Reason::FailureRecorded`]);
/// `managed_input_state` / [`Reason::Terminal`].
pub fn check_fail(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    failure: &RoundFailure,
    now: OffsetDateTime,
) -> Result<Decision> {
    authorize(current, lease, now, false)?;
    match current.status {
        ManagedInputStatus::Resolved => Err(Error::managed_input_state(
            "resolved managed-input round cannot fail",
        )
        .with_reason(Reason::Terminal)),
        ManagedInputStatus::Failed
            if current.failure_code.as_deref() == Some(failure.code.as_str())
                && current.failure_message.as_deref() == Some(failure.message.as_str()) =>
        {
            Ok(Decision::AlreadyDone)
        }
        ManagedInputStatus::Failed => Err(Error::managed_input_conflict(
            "managed-input failure is already recorded",
        )
        .with_reason(Reason::FailureRecorded)),
        _ => Ok(Decision::Apply),
    }
}

/// The record a failure with `code` and `message` leaves.
pub fn apply_fail(
    current: &ManagedInputRecord,
    code: &str,
    message: &str,
    now: OffsetDateTime,
) -> ManagedInputRecord {
    let mut next = current.clone();
    next.status = ManagedInputStatus::Failed;
    next.failed_at = Some(now);
    next.failure_code = Some(code.to_owned());
    next.failure_message = Some(message.to_owned());
    next.updated_at = now;
    next
}

/// The record the recovery decision leaves (also what `terminalize_expired` writes on every
/// unresolved round of the execution).
pub fn apply_recovery_failure(
    current: &ManagedInputRecord,
    message: &str,
    now: OffsetDateTime,
) -> ManagedInputRecord {
    apply_fail(current, RECOVERY_UNAVAILABLE, message, now)
}

/// `fail_recovery`'s rules: the expected token must be the stored one; a recovery failure
/// already recorded is an idempotent repeat; another failure or `resolved` refuses; the
/// lease must have expired.
///
/// # Errors
/// `managed_input_conflict` ([`Reason::LeaseTokenMismatch`], [`Reason::LeaseLive`]);
/// `managed_input_state` / [`Reason::Terminal`].
pub fn check_fail_recovery(
    current: &ManagedInputRecord,
    expected_lease_token: &str,
    now: OffsetDateTime,
) -> Result<Decision> {
    if current.lease.lease_token != expected_lease_token {
        return Err(token_mismatch());
    }
    match current.status {
        ManagedInputStatus::Failed
            if current.failure_code.as_deref() == Some(RECOVERY_UNAVAILABLE) =>
        {
            return Ok(Decision::AlreadyDone);
        }
        ManagedInputStatus::Failed | ManagedInputStatus::Resolved => {
            return Err(Error::managed_input_state(format!(
                "{} managed-input round cannot take a recovery failure",
                current.status.as_str()
            ))
            .with_reason(Reason::Terminal));
        }
        _ => {}
    }
    if current.lease.expires_at > now {
        return Err(
            Error::managed_input_conflict("managed-input lease is still held")
                .with_reason(Reason::LeaseLive),
        );
    }
    Ok(Decision::Apply)
}
