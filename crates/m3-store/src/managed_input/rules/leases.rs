//! The lease rules: who may write ([`authorize`]), renewal, the claim and its
//! delivery-state evidence, and the statuses recovery fails.

use m3_types::{
    DeliveryState, Error, ManagedInputRecord, ManagedInputStatus, RECOVERY_UNAVAILABLE, Reason,
    Result,
};
use time::OffsetDateTime;

use crate::managed_input::request::{ClaimRound, LeaseRef};

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
/// [`claim_round`](super::super::ManagedInputStore::claim_round)).
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
