//! Argument checks and lease rules shared by the SQLite operations.

use std::time::Duration;

use m3_types::{Error, ManagedInputRecord, Result};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::codec::{decode_record, record_columns};
use super::error::storage;
use crate::{LeaseRef, RoundRef};

/// `managed_input_invalid` ("`<label>` must be a non-empty string") for an empty string.
pub(crate) fn require_text(value: &str, label: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::managed_input_validation(format!(
            "{label} must be a non-empty string"
        )));
    }
    Ok(())
}

/// As [`require_text`] for an optional value (absent is fine).
pub(crate) fn optional_text(value: Option<&str>, label: &str) -> Result<()> {
    value.map_or(Ok(()), |v| require_text(v, label))
}

pub(crate) fn require_round(round: &RoundRef) -> Result<()> {
    require_text(&round.execution_id, "execution_id")?;
    require_text(&round.round_id, "round_id")
}

pub(crate) fn require_lease(lease: &LeaseRef) -> Result<()> {
    require_text(&lease.owner_id, "owner_id")?;
    require_text(&lease.lease_token, "lease_token")
}

/// `now + duration`, refusing a zero or unrepresentable duration.
pub(crate) fn lease_expiry(now: OffsetDateTime, duration: Duration) -> Result<OffsetDateTime> {
    if duration.is_zero() {
        return Err(Error::managed_input_validation(
            "lease_seconds must be positive",
        ));
    }
    time::Duration::try_from(duration)
        .ok()
        .and_then(|d| now.checked_add(d))
        .map(|t| {
            // Stored with microsecond precision.
            let micros = t.nanosecond() / 1_000 * 1_000;
            t.replace_nanosecond(micros).unwrap_or(t)
        })
        .ok_or_else(|| Error::managed_input_validation("lease_seconds is too large"))
}

/// The round's row inside the current transaction, or `None`.
pub(crate) async fn fetch_round(
    conn: &mut SqliteConnection,
    round: &RoundRef,
) -> Result<Option<ManagedInputRecord>> {
    let row = sqlx::query(SELECT_ROUND)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| storage("cannot read a managed-input round", e))?;
    row.as_ref().map(decode_record).transpose()
}

/// Like [`fetch_round`], with a missing round as `managed_input_conflict`.
pub(crate) async fn fetch_existing(
    conn: &mut SqliteConnection,
    round: &RoundRef,
) -> Result<ManagedInputRecord> {
    fetch_round(conn, round)
        .await?
        .ok_or_else(|| missing(round))
}

pub(crate) fn missing(round: &RoundRef) -> Error {
    Error::managed_input_conflict("managed-input round does not exist")
        .with_detail("execution_id", round.execution_id.as_str())
        .with_detail("round_id", round.round_id.as_str())
}

const SELECT_ROUND: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? AND round_id=?"
);

/// Owner and token must match; the lease must be live unless `allow_expired`.
pub(crate) fn authorize(
    current: &ManagedInputRecord,
    lease: &LeaseRef,
    now: OffsetDateTime,
    allow_expired: bool,
) -> Result<()> {
    if current.lease.owner_id != lease.owner_id || current.lease.lease_token != lease.lease_token {
        return Err(Error::managed_input_conflict(
            "managed-input round is owned by another lease",
        ));
    }
    if !allow_expired && current.lease.expires_at <= now {
        return Err(Error::managed_input_conflict(
            "managed-input lease has expired",
        ));
    }
    Ok(())
}
