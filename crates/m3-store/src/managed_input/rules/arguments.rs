//! Argument checks, before anything is read: non-empty identifiers and texts, a usable
//! lease duration (and the expiry it gives), JSON that encodes.

use std::time::Duration;

use m3_types::{Reason, Result, canonical_json, ordered_json};
use serde_json::Value;
use time::OffsetDateTime;

use super::errors::invalid;
use crate::managed_input::request::{
    ClaimRound, LeaseRef, ResponseSubmission, RoundFailure, RoundRef,
};

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

/// As [`json_text`] but with object keys in the order the value holds them (a server's
/// order): the stored form of a round's requests and parameters.
pub fn ordered_json_text(value: &Value) -> Result<String> {
    ordered_json(value).map_err(|source| {
        invalid("managed input contains invalid JSON", Reason::InvalidRound).with_source(source)
    })
}

/// Serializes a serde value to JSON (`managed_input_invalid` if it cannot be).
pub fn to_json_value<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|source| {
        invalid("managed input contains invalid JSON", Reason::InvalidRound).with_source(source)
    })
}
