//! Every decision of the worker registry: what a valid announcement is, how an entry is
//! stored, which entries are silent. Backends only keep rows ([`super::rows`]).

use std::time::Duration;

use m3_types::{Error, Reason, Result};
use time::OffsetDateTime;

use super::record::{NewWorker, WorkerEntry, WorkerState};

/// The longest worker id.
pub const WORKER_ID_MAX_CHARS: usize = 200;

/// The longest host name.
pub const HOST_MAX_CHARS: usize = 255;

fn check(what: &str, text: &str, max: usize) -> Result<()> {
    if text.is_empty() || text.chars().count() > max || text.chars().any(char::is_control) {
        return Err(Error::model_validation(format!(
            "a worker's {what} is 1 to {max} characters without control characters"
        ))
        .with_reason(Reason::InvalidWorker)
        .with_detail(what, text.chars().take(80).collect::<String>()));
    }
    Ok(())
}

/// The entry of `new`, announced at `now`.
///
/// # Errors
/// `invalid_argument` (reason `invalid_worker`) for a bad id or host.
pub fn make(new: &NewWorker, now: OffsetDateTime) -> Result<WorkerEntry> {
    check("id", &new.worker_id, WORKER_ID_MAX_CHARS)?;
    check("host", &new.host, HOST_MAX_CHARS)?;
    Ok(WorkerEntry {
        worker_id: new.worker_id.clone(),
        host: new.host.clone(),
        pid: new.pid,
        handover_only: new.handover_only,
        state: WorkerState::Running,
        started_at: now,
        heartbeat_at: now,
    })
}

/// `entry` after a heartbeat at `now` in `state` (a heartbeat never moves time back).
pub fn beat(mut entry: WorkerEntry, state: WorkerState, now: OffsetDateTime) -> WorkerEntry {
    entry.state = state;
    entry.heartbeat_at = entry.heartbeat_at.max(now);
    entry
}

/// Whether `entry` has been silent for longer than `silent_for` at `now`.
pub fn is_silent(entry: &WorkerEntry, now: OffsetDateTime, silent_for: Duration) -> bool {
    !entry.is_live(now, silent_for)
}

/// The text a backend keeps for `entry`.
///
/// # Errors
/// `storage_error` if it cannot be encoded (never for a valid entry).
pub fn encode(entry: &WorkerEntry) -> Result<String> {
    serde_json::to_string(entry)
        .map_err(|e| Error::storage(format!("cannot encode a worker entry: {e}")))
}

/// The entry a backend kept as `text`.
///
/// # Errors
/// `storage_error` for text that is not a worker entry.
pub fn decode(text: &str) -> Result<WorkerEntry> {
    serde_json::from_str(text)
        .map_err(|e| Error::storage(format!("a stored worker entry is unreadable: {e}")))
}
