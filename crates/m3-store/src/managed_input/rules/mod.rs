//! The storage-independent rules of [`ManagedInputStore`](super::ManagedInputStore): the
//! toolkit of every backend author.
//!
//! Every backend, the shipped ones included, calls these functions for each decision and
//! keeps only storage code of its own: argument checks, whole-round validation before any
//! write, lease authorization and expiry arithmetic, the claim-evidence table, transition
//! preconditions and targets, idempotent-replay comparison, and lease-token generation.
//! Each rule returns the error (code and [`Reason`]) the contract documents, so two
//! backends give the same answer to the same call; the conformance suite checks codes and
//! reasons, never message wording.
//!
//! Times: pass the store's "now" from [`store_now`](crate::store_now) (UTC, whole
//! microseconds). [`lease_expiry`] returns expiries at that precision too, so a stored and
//! re-read timestamp compares equal to the one returned.
//!
//! The `check_*` functions take the current stored record and decide; the `apply_*`
//! functions give the record a write leaves behind, for backends that store records (the
//! memory backend); a SQL backend writes the same columns with a guarded `UPDATE` and may
//! use the record as its image.

use std::time::Duration;

use m3_types::{
    DeliveryState, Error, ManagedInputRecord, ManagedInputStatus, Reason, Result, canonical_json,
};
use serde_json::Value;
use time::OffsetDateTime;

use super::request::{
    ClaimRound, CreateRound, LeaseRef, ResponseSubmission, RoundFailure, RoundRef,
};

pub use m3_types::RECOVERY_UNAVAILABLE;

/// The statuses recovery fails (every status but `resolved` and `failed`).
pub const UNRESOLVED: [ManagedInputStatus; 4] = [
    ManagedInputStatus::Pending,
    ManagedInputStatus::ResponseValidated,
    ManagedInputStatus::DeliveryStarted,
    ManagedInputStatus::Delivered,
];

/// The statuses whose lease may be renewed.
pub const RENEWABLE: [ManagedInputStatus; 3] = [
    ManagedInputStatus::Pending,
    ManagedInputStatus::ResponseValidated,
    ManagedInputStatus::DeliveryStarted,
];

// ---------------------------------------------------------------- errors

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

fn invalid(message: impl Into<String>, reason: Reason) -> Error {
    Error::managed_input_validation(message).with_reason(reason)
}

// ---------------------------------------------------------------- arguments

/// `managed_input_invalid` / [`Reason::EmptyArgument`] for an empty string.
pub fn require_text(value: &str, label: &str) -> Result<()> {
    if value.is_empty() {
        return Err(invalid(
            format!("{label} must be a non-empty string"),
            Reason::EmptyArgument,
        ));
    }
    Ok(())
}

/// As [`require_text`] for an optional value (absent is fine).
pub fn optional_text(value: Option<&str>, label: &str) -> Result<()> {
    value.map_or(Ok(()), |v| require_text(v, label))
}

/// Both ids of `round` are non-empty.
pub fn require_round(round: &RoundRef) -> Result<()> {
    require_text(&round.execution_id, "execution_id")?;
    require_text(&round.round_id, "round_id")
}

/// Owner and token of `lease` are non-empty.
pub fn require_lease(lease: &LeaseRef) -> Result<()> {
    require_text(&lease.owner_id, "owner_id")?;
    require_text(&lease.lease_token, "lease_token")
}

/// `claim_round`'s argument checks.
///
/// # Errors
/// `managed_input_invalid` ([`Reason::EmptyArgument`], [`Reason::InvalidLeaseDuration`]).
pub fn check_claim_args(round: &RoundRef, claim: &ClaimRound) -> Result<()> {
    require_round(round)?;
    require_text(&claim.owner_id, "owner_id")?;
    optional_text(
        claim.expected_lease_token.as_deref(),
        "expected_lease_token",
    )?;
    require_lease_duration(claim.lease_duration)
}

/// The argument checks of every lease-holding write (`renew`, the transitions, `fail`,
/// `submit_responses`): the round's ids and the lease's owner and token.
///
/// # Errors
/// `managed_input_invalid` / [`Reason::EmptyArgument`].
pub fn check_lease_args(round: &RoundRef, lease: &LeaseRef) -> Result<()> {
    require_round(round)?;
    require_lease(lease)
}

/// `renew`'s argument checks: [`check_lease_args`], then a positive duration.
///
/// # Errors
/// `managed_input_invalid` ([`Reason::EmptyArgument`], [`Reason::InvalidLeaseDuration`]).
pub fn check_renew_args(
    round: &RoundRef,
    lease: &LeaseRef,
    lease_duration: Duration,
) -> Result<()> {
    check_lease_args(round, lease)?;
    require_lease_duration(lease_duration)
}

/// `submit_responses`' argument checks: [`check_lease_args`], then the idempotency key.
///
/// # Errors
/// `managed_input_invalid` / [`Reason::EmptyArgument`].
pub fn check_submit_args(
    round: &RoundRef,
    lease: &LeaseRef,
    submission: &ResponseSubmission,
) -> Result<()> {
    check_lease_args(round, lease)?;
    require_text(&submission.idempotency_key, "response_idempotency_key")
}

/// `fail`'s argument checks: the failure's code and message, then [`check_lease_args`].
///
/// # Errors
/// `managed_input_invalid` / [`Reason::EmptyArgument`].
pub fn check_fail_args(round: &RoundRef, lease: &LeaseRef, failure: &RoundFailure) -> Result<()> {
    require_text(&failure.code, "code")?;
    require_text(&failure.message, "message")?;
    check_lease_args(round, lease)
}

/// `fail_recovery`'s argument checks.
///
/// # Errors
/// `managed_input_invalid` / [`Reason::EmptyArgument`].
pub fn check_fail_recovery_args(
    round: &RoundRef,
    expected_lease_token: &str,
    message: &str,
) -> Result<()> {
    require_round(round)?;
    require_text(expected_lease_token, "expected_lease_token")?;
    require_text(message, "message")
}

/// `managed_input_invalid` / [`Reason::InvalidLeaseDuration`] for a zero duration.
pub fn require_lease_duration(duration: Duration) -> Result<()> {
    if duration.is_zero() {
        return Err(invalid(
            "lease_seconds must be positive",
            Reason::InvalidLeaseDuration,
        ));
    }
    Ok(())
}

/// `now + duration` at the stored microsecond precision, refusing a zero or unrepresentable
/// duration.
pub fn lease_expiry(now: OffsetDateTime, duration: Duration) -> Result<OffsetDateTime> {
    require_lease_duration(duration)?;
    time::Duration::try_from(duration)
        .ok()
        .and_then(|d| now.checked_add(d))
        .map(crate::clock::truncate_to_stored_precision)
        .ok_or_else(|| invalid("lease_seconds is too large", Reason::InvalidLeaseDuration))
}

/// Canonical JSON text of a value (sorted keys, compact): the stored form of every JSON
/// payload and the form replays are compared in.
pub fn json_text(value: &Value) -> Result<String> {
    canonical_json(value).map_err(|source| {
        invalid("managed input contains invalid JSON", Reason::InvalidRound).with_source(source)
    })
}

/// Serializes a serde value to JSON (`managed_input_invalid` if it cannot be).
pub fn to_json_value<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|source| {
        invalid("managed input contains invalid JSON", Reason::InvalidRound).with_source(source)
    })
}

// ---------------------------------------------------------------- create

/// A [`CreateRound`] that passed every check, with its lease token chosen and its payloads
/// encoded: what a backend writes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreparedRound {
    /// The request as given.
    pub request: CreateRound,
    /// The lease token: the request's, or a fresh [`new_lease_token`].
    pub lease_token: String,
    /// Canonical JSON of the pending round.
    pub pending_json: String,
    /// Canonical JSON of the operation parameters.
    pub parameters_json: String,
}

impl PreparedRound {
    /// The round's identity.
    pub fn round(&self) -> RoundRef {
        RoundRef::of_pending(&self.request.pending)
    }

    /// The record a fresh insert at `now` stores (status `pending`, lease until
    /// `now + lease_duration`).
    ///
    /// # Errors
    /// `managed_input_invalid` for an unrepresentable lease duration.
    pub fn record_at(&self, now: OffsetDateTime) -> Result<ManagedInputRecord> {
        let request = &self.request;
        let expires_at = lease_expiry(now, request.lease_duration)?;
        let lease = m3_types::ManagedInputLease::new(
            request.owner_id.clone(),
            self.lease_token.clone(),
            expires_at,
        );
        let mut record = ManagedInputRecord::new_pending(
            request.pending.clone(),
            request.round_index,
            request.round_limit,
            lease,
            now,
        )?;
        record.harness_session_id = request.harness_session_id.clone();
        record.native_resume_token = request.native_resume_token.clone();
        record.delivery_idempotency_key = request.delivery_idempotency_key.clone();
        record.session_id = request.session_id.clone();
        record.turn_id = request.turn_id.clone();
        record.operation_parameters = request.operation_parameters.clone();
        Ok(record)
    }
}

/// Validates the whole round before any write and prepares it: the pending round's own
/// invariants (ids, servers, request keys equal to their `request_key`, non-empty requests),
/// `round_index < round_limit`, owner, lease duration, every optional string, and JSON
/// payloads. Invalid input changes nothing because nothing has been written yet.
///
/// # Errors
/// `managed_input_invalid` with [`Reason::InvalidRound`], [`Reason::RoundIndexOutOfRange`],
/// [`Reason::EmptyArgument`] or [`Reason::InvalidLeaseDuration`].
pub fn prepare_create(request: CreateRound) -> Result<PreparedRound> {
    if request.pending.requests.is_empty() {
        return Err(invalid(
            "managed input requires a non-empty elicitation round",
            Reason::InvalidRound,
        ));
    }
    require_text(&request.pending.execution_id, "execution_id")?;
    require_text(&request.pending.round_id, "round_id")?;
    request
        .pending
        .validate()
        .map_err(|e| invalid(e.message().to_owned(), Reason::InvalidRound))?;
    if request.round_limit == 0 || request.round_index >= request.round_limit {
        return Err(invalid(
            "round_index exceeds round limit",
            Reason::RoundIndexOutOfRange,
        )
        .with_detail("round_index", request.round_index)
        .with_detail("round_limit", request.round_limit));
    }
    require_text(&request.owner_id, "owner_id")?;
    require_lease_duration(request.lease_duration)?;
    for (value, label) in [
        (&request.lease_token, "lease_token"),
        (&request.harness_session_id, "harness_session_id"),
        (&request.native_resume_token, "native_resume_token"),
        (
            &request.delivery_idempotency_key,
            "delivery_idempotency_key",
        ),
        (&request.session_id, "session_id"),
        (&request.turn_id, "turn_id"),
    ] {
        optional_text(value.as_deref(), label)?;
    }
    let pending_json = json_text(&to_json_value(&request.pending)?)?;
    let parameters_json = json_text(&Value::Object(request.operation_parameters.clone()))?;
    let lease_token = match &request.lease_token {
        Some(token) => token.clone(),
        None => new_lease_token()?,
    };
    Ok(PreparedRound {
        request,
        lease_token,
        pending_json,
        parameters_json,
    })
}

/// Whether a stored round carries exactly the data of a replayed `create_round` (its
/// idempotency rule).
///
/// # Errors
/// `managed_input_invalid` if the stored record does not encode.
pub fn same_round(current: &ManagedInputRecord, new: &PreparedRound) -> Result<bool> {
    let request = &new.request;
    let current_pending = json_text(&to_json_value(&current.pending)?)?;
    let current_parameters = json_text(&Value::Object(current.operation_parameters.clone()))?;
    Ok(current_pending == new.pending_json
        && current.round_index == request.round_index
        && current.round_limit == request.round_limit
        && current.lease.owner_id == request.owner_id
        && current.lease.lease_token == new.lease_token
        && current.harness_session_id == request.harness_session_id
        && current.native_resume_token == request.native_resume_token
        && current.delivery_idempotency_key == request.delivery_idempotency_key
        && current.session_id == request.session_id
        && current.turn_id == request.turn_id
        && current_parameters == new.parameters_json)
}

/// The outcome of a `create_round` that met an existing round with the same key: the stored
/// record for an identical replay, else `managed_input_conflict` / [`Reason::IdConflict`].
///
/// # Errors
/// As described.
pub fn replay_create(
    current: ManagedInputRecord,
    new: &PreparedRound,
) -> Result<ManagedInputRecord> {
    if same_round(&current, new)? {
        return Ok(current);
    }
    let round = new.round();
    Err(
        Error::managed_input_conflict("managed-input round already exists with different data")
            .with_reason(Reason::IdConflict)
            .with_detail("execution_id", round.execution_id.as_str())
            .with_detail("round_id", round.round_id.as_str()),
    )
}

/// `managed_input_conflict` / [`Reason::RoundIndexTaken`]: another round of the execution
/// has the same `round_index`.
pub fn round_index_taken(new: &PreparedRound) -> Error {
    Error::managed_input_conflict("managed-input round conflicts with an existing round")
        .with_reason(Reason::RoundIndexTaken)
        .with_detail("execution_id", new.request.pending.execution_id.as_str())
        .with_detail("round_index", new.request.round_index)
}

// ---------------------------------------------------------------- leases

/// Owner and token must match (else [`Reason::LeaseNotHeld`]); the lease must be live at
/// `now` unless `allow_expired` (else [`Reason::LeaseExpired`]). Both `managed_input_conflict`.
///
/// # Errors
/// As described.
pub fn authorize(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    now: OffsetDateTime,
    allow_expired: bool,
) -> Result<()> {
    if current.lease.owner_id != lease.owner_id || current.lease.lease_token != lease.lease_token {
        return Err(
            Error::managed_input_conflict("managed-input round is owned by another lease")
                .with_reason(Reason::LeaseNotHeld),
        );
    }
    if !allow_expired && current.lease.expires_at <= now {
        return Err(
            Error::managed_input_conflict("managed-input lease has expired")
                .with_reason(Reason::LeaseExpired),
        );
    }
    Ok(())
}

/// `renew`'s preconditions: authorized with a live lease, status renewable.
///
/// # Errors
/// `managed_input_conflict` from [`authorize`]; `managed_input_state` /
/// [`Reason::Terminal`] for `delivered`, `resolved` or `failed`.
pub fn check_renew(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    now: OffsetDateTime,
) -> Result<()> {
    authorize(current, lease, now, false)?;
    if !RENEWABLE.contains(&current.status) {
        return Err(
            Error::managed_input_state("terminal managed-input round cannot renew")
                .with_reason(Reason::Terminal)
                .with_detail("status", current.status.as_str()),
        );
    }
    Ok(())
}

/// The record `renew` leaves: the lease's expiry moved to `expires_at`.
pub fn apply_renew(
    current: &ManagedInputRecord,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> ManagedInputRecord {
    let mut next = current.clone();
    next.lease.expires_at = expires_at;
    next.updated_at = now;
    next
}

/// The status a claim leaves behind, given the stored status and the evidence, or why the
/// evidence is not enough (the claim-evidence table of
/// [`claim_round`](super::ManagedInputStore::claim_round)).
///
/// # Errors
/// `managed_input_recovery_unavailable` ([`Reason::RecoveryUnavailable`],
/// [`Reason::MissingEvidence`], [`Reason::EvidenceMismatch`],
/// [`Reason::IdempotentDeliveryRequired`]); `managed_input_state` ([`Reason::Terminal`]).
pub fn claimed_status(
    current: &ManagedInputRecord,
    claim: &ClaimRound,
) -> Result<ManagedInputStatus> {
    use ManagedInputStatus as S;
    let recovery =
        |message: &str, reason| Error::managed_input_recovery(message).with_reason(reason);
    match current.status {
        S::Failed if current.failure_code.as_deref() == Some(RECOVERY_UNAVAILABLE) => {
            let message = current
                .failure_message
                .as_deref()
                .unwrap_or("managed input cannot be recovered");
            return Err(recovery(message, Reason::RecoveryUnavailable));
        }
        S::Failed | S::Resolved => {
            return Err(Error::managed_input_state(format!(
                "{} managed-input round cannot be claimed",
                current.status.as_str()
            ))
            .with_reason(Reason::Terminal));
        }
        _ => {}
    }
    let Some(evidence) = claim.delivery_state else {
        return Err(recovery(
            "replacement claims require adapter delivery-state evidence",
            Reason::MissingEvidence,
        ));
    };
    let next = match (current.status, evidence) {
        (S::DeliveryStarted, DeliveryState::NotDelivered) if claim.idempotent_delivery => {
            S::ResponseValidated
        }
        (S::DeliveryStarted, DeliveryState::NotDelivered) => {
            return Err(recovery(
                "not_delivered recovery requires idempotent delivery proof",
                Reason::IdempotentDeliveryRequired,
            ));
        }
        (S::DeliveryStarted, DeliveryState::Delivered) => S::Delivered,
        (S::DeliveryStarted, DeliveryState::NotStarted) => {
            return Err(recovery(
                "delivery_started round has ambiguous delivery state",
                Reason::EvidenceMismatch,
            ));
        }
        (S::Pending, DeliveryState::NotStarted)
        | (S::ResponseValidated, DeliveryState::NotDelivered)
        | (S::Delivered, DeliveryState::Delivered) => current.status,
        _ => {
            return Err(recovery(
                "adapter delivery-state evidence does not match the persisted round",
                Reason::EvidenceMismatch,
            )
            .with_detail("status", current.status.as_str()));
        }
    };
    if current.status == S::ResponseValidated && !claim.idempotent_delivery {
        return Err(recovery(
            "validated responses require idempotent delivery proof",
            Reason::IdempotentDeliveryRequired,
        ));
    }
    Ok(next)
}

/// Every check of `claim_round` on the stored record, in the contract's order: the evidence
/// table ([`claimed_status`]), a live lease ([`Reason::LeaseLive`]), the expected token
/// ([`Reason::LeaseTokenMismatch`]). Returns the status the claim leaves.
///
/// # Errors
/// As described (`managed_input_conflict` for the lease checks).
pub fn check_claim(
    current: &ManagedInputRecord,
    claim: &ClaimRound,
    now: OffsetDateTime,
) -> Result<ManagedInputStatus> {
    let next = claimed_status(current, claim)?;
    if current.lease.expires_at > now {
        return Err(
            Error::managed_input_conflict("managed-input round lease is still held")
                .with_reason(Reason::LeaseLive),
        );
    }
    if claim.expected_lease_token.as_deref() != Some(current.lease.lease_token.as_str()) {
        return Err(token_mismatch());
    }
    Ok(next)
}

pub(crate) fn token_mismatch() -> Error {
    Error::managed_input_conflict("expected lease token does not match")
        .with_reason(Reason::LeaseTokenMismatch)
}

/// The record a claim leaves: new owner, `token`, expiry, status `next`, and `delivered_at =
/// now` when a started delivery is claimed as delivered.
pub fn apply_claim(
    current: &ManagedInputRecord,
    claim: &ClaimRound,
    next: ManagedInputStatus,
    token: String,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> ManagedInputRecord {
    let mut record = current.clone();
    if current.status == ManagedInputStatus::DeliveryStarted
        && next == ManagedInputStatus::Delivered
    {
        record.delivered_at = Some(now);
    }
    record.status = next;
    record.lease = m3_types::ManagedInputLease::new(claim.owner_id.clone(), token, expires_at);
    record.updated_at = now;
    record
}

mod steps;
mod token;
mod writes;

pub use writes::{RoundWrite, renew_item};

pub use steps::{
    Decision, EncodedSubmission, Submission, Transition, apply_fail, apply_recovery_failure,
    apply_submission, check_fail, check_fail_recovery, check_submission, check_transition,
    encode_submission,
};
pub use token::new_lease_token;
