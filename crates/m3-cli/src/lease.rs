//! What people are told about an execution's worker lease: whether a worker holds the
//! execution, until when, and what happens once the lease expires (recovery fails it).
//!
//! A worker renews its lease while it lives; a killed worker's lease runs out, and only then
//! may recovery terminalize the execution. Without this, answering a dead worker looks like
//! success and `m3 recover` says "nothing to recover".

use m3_kit::{AsyncExecutionHandle, ExecutionLease};
use m3_types::timestamp;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::failure::Failure;

/// The lease of an unfinished execution, read now (`None` once finished or before a claim,
/// and for rounds with no execution record, such as the Python implementation's: no m3
/// worker holds those).
pub(crate) async fn current(
    handle: &AsyncExecutionHandle,
) -> Result<Option<ExecutionLease>, Failure> {
    match handle.worker_lease().await {
        Ok(lease) => Ok(lease),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// One line about `lease` at `now`: who holds it until when, or that it expired and what
/// recovery will do.
pub(crate) fn describe(lease: &ExecutionLease, now: OffsetDateTime) -> String {
    let expires = timestamp::format(lease.expires_at);
    let seconds = (lease.expires_at - now).as_seconds_f64().abs();
    if lease.is_expired_at(now) {
        format!(
            "worker lease of {} expired at {expires} ({seconds:.0}s ago): the worker is gone; \
             `m3 recover` (or opening the store) fails the execution",
            lease.owner_id
        )
    } else {
        format!(
            "worker lease held by {} until {expires} (in {seconds:.0}s, renewed while the \
             worker lives); if the worker is gone, recovery fails the execution after that",
            lease.owner_id
        )
    }
}

/// The lease as JSON for `--json` output (owner, expiry, expired; never the token).
pub(crate) fn json(lease: &ExecutionLease, now: OffsetDateTime) -> Value {
    json!({
        "owner_id": lease.owner_id,
        "expires_at": timestamp::format(lease.expires_at),
        "expired": lease.is_expired_at(now),
    })
}

/// The current time of this machine's clock.
pub(crate) fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}
