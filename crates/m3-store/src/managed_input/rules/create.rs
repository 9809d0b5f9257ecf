//! `create_round`'s rules: the whole round validated before any write
//! ([`prepare_create`]), and an identical replay told from a conflicting one.

use m3_types::{Error, ManagedInputRecord, Reason, Result};
use serde_json::Value;
use time::OffsetDateTime;

use super::arguments::{
    json_text, lease_expiry, optional_text, ordered_json_text, require_lease_duration,
    require_text, to_json_value,
};
use super::errors::invalid;
use super::token::new_lease_token;
use crate::managed_input::request::{CreateRound, RoundRef};

/// A [`CreateRound`] that passed every check, with its lease token chosen and its payloads
/// encoded: what a backend writes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreparedRound {
    /// The request as given.
    pub request: CreateRound,
    /// The lease token: the request's, or a fresh [`new_lease_token`].
    pub lease_token: String,
    /// The pending round as stored: compact JSON in the order the server sent it
    /// ([`m3_types::ordered_json`]), so that a form keeps its fields' order.
    pub pending_json: String,
    /// The operation parameters as stored (compact JSON, in the order given).
    pub parameters_json: String,
    /// Canonical JSON of the pending round: what a replay is compared in.
    pub pending_canonical: String,
    /// Canonical JSON of the operation parameters: what a replay is compared in.
    pub parameters_canonical: String,
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
    let pending = to_json_value(&request.pending)?;
    let parameters = Value::Object(request.operation_parameters.clone());
    let pending_canonical = json_text(&pending)?;
    let parameters_canonical = json_text(&parameters)?;
    let pending_json = ordered_json_text(&pending)?;
    let parameters_json = ordered_json_text(&parameters)?;
    let lease_token = match &request.lease_token {
        Some(token) => token.clone(),
        None => new_lease_token()?,
    };
    Ok(PreparedRound {
        request,
        lease_token,
        pending_json,
        parameters_json,
        pending_canonical,
        parameters_canonical,
    })
}

/// Whether a stored round carries exactly the data of a replayed `create_round` (its
/// idempotency rule). Payloads compare canonically: a replay whose objects list their keys
/// in another order is the same round.
///
/// # Errors
/// `managed_input_invalid` if the stored record does not encode.
pub fn same_round(current: &ManagedInputRecord, new: &PreparedRound) -> Result<bool> {
    let request = &new.request;
    let current_pending = json_text(&to_json_value(&current.pending)?)?;
    let current_parameters = json_text(&Value::Object(current.operation_parameters.clone()))?;
    Ok(current_pending == new.pending_canonical
        && current.round_index == request.round_index
        && current.round_limit == request.round_limit
        && current.lease.owner_id == request.owner_id
        && current.lease.lease_token == new.lease_token
        && current.harness_session_id == request.harness_session_id
        && current.native_resume_token == request.native_resume_token
        && current.delivery_idempotency_key == request.delivery_idempotency_key
        && current.session_id == request.session_id
        && current.turn_id == request.turn_id
        && current_parameters == new.parameters_canonical)
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
