//! What every backend decides the same way: which records a change appends (from the row
//! before and after it, exactly as the SQL backends' triggers do), and the checks before a
//! read.

use m3_types::{
    ChangeRecord, ChangeRecordKind, Cursor, Error, ExecutionChangeState, ExecutionStatus,
    ManagedInputRecord, Reason, Result, RoundChangeState,
};

use super::request::{FeedBounds, MAX_CHANGE_PAGE};
use crate::ExecutionRecord;

/// The record a write of a round appends: one when the round is new (`round.pending`) or its
/// status changed, none otherwise (a lease renewal, a claim, an idempotent repeat). Its
/// cursor is [`Cursor::START`]; the backend numbers it when it appends it.
pub fn round_change(
    before: Option<&ManagedInputRecord>,
    after: &ManagedInputRecord,
) -> Option<ChangeRecord> {
    if before.is_some_and(|before| before.status == after.status) {
        return None;
    }
    Some(ChangeRecord::of_round(
        Cursor::START,
        after.pending.execution_id.clone(),
        after.pending.round_id.clone(),
        after.updated_at,
        RoundChangeState::of_record(after),
    ))
}

/// The `round.deadline_approaching` record of the pending round `record` at `now`, for
/// `reminder`. Its cursor is [`Cursor::START`]; the backend numbers it when it appends it.
pub fn reminder_change(
    record: &ManagedInputRecord,
    reminder: m3_types::DeadlineReminder,
    now: time::OffsetDateTime,
) -> ChangeRecord {
    ChangeRecord::of_reminder(
        Cursor::START,
        record.pending.execution_id.clone(),
        record.pending.round_id.clone(),
        now,
        RoundChangeState::of_record(record),
        reminder,
    )
}

/// The stored state of a reminder record, for backends that keep a record's state as one
/// JSON text: the round's state with the reminder beside it, under `reminder` (read back by
/// [`split_reminder_state`]).
///
/// # Errors
/// `storage_error` if it cannot be encoded.
pub fn reminder_state_text(
    state: &RoundChangeState,
    reminder: m3_types::DeadlineReminder,
) -> Result<String> {
    let encode = |e: serde_json::Error| Error::storage(format!("cannot encode a reminder: {e}"));
    let mut value = serde_json::to_value(state).map_err(encode)?;
    if let serde_json::Value::Object(map) = &mut value {
        map.insert(
            "reminder".to_owned(),
            serde_json::to_value(reminder).map_err(encode)?,
        );
    }
    serde_json::to_string(&value).map_err(encode)
}

/// A reminder record's stored state ([`reminder_state_text`]), split into the round's state
/// and the reminder (`None`: not one).
pub fn split_reminder_state(text: &str) -> Option<(RoundChangeState, m3_types::DeadlineReminder)> {
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    let reminder = value.as_object_mut()?.remove("reminder")?;
    Some((
        serde_json::from_value(value).ok()?,
        serde_json::from_value(reminder).ok()?,
    ))
}

/// The records a write of an execution appends, in this order: `execution.cancel_requested`
/// (the cancel time was set), `execution.claimed` (a lease with a new token), then the
/// lifecycle's own (`execution.queued`, `execution.waiting_for_input` or
/// `execution.finished`, when the lifecycle became that). Each has cursor
/// [`Cursor::START`]; the backend numbers them when it appends them.
pub fn execution_changes(
    before: Option<&ExecutionRecord>,
    after: &ExecutionRecord,
) -> Vec<ChangeRecord> {
    let mut kinds = Vec::new();
    if after.cancel_requested_at.is_some()
        && before.is_none_or(|before| before.cancel_requested_at.is_none())
    {
        kinds.push(ChangeRecordKind::ExecutionCancelRequested);
    }
    let token =
        |record: &ExecutionRecord| record.lease.as_ref().map(|lease| lease.lease_token.clone());
    if after.lease.is_some() && before.is_none_or(|before| token(before) != token(after)) {
        kinds.push(ChangeRecordKind::ExecutionClaimed);
    }
    if before.is_none_or(|before| before.lifecycle != after.lifecycle) {
        kinds.extend(lifecycle_kind(after.lifecycle));
    }
    let state = ExecutionChangeState::new(after.lifecycle, after.outcome);
    kinds
        .into_iter()
        .map(|kind| {
            ChangeRecord::of_execution(
                Cursor::START,
                kind,
                after.execution_id.clone(),
                after.updated_at,
                state,
            )
        })
        .collect()
}

/// The record kind of entering `lifecycle`, for the lifecycles the feed reports.
fn lifecycle_kind(lifecycle: ExecutionStatus) -> Option<ChangeRecordKind> {
    match lifecycle {
        ExecutionStatus::Queued => Some(ChangeRecordKind::ExecutionQueued),
        ExecutionStatus::WaitingForInput => Some(ChangeRecordKind::ExecutionWaitingForInput),
        ExecutionStatus::Finished => Some(ChangeRecordKind::ExecutionFinished),
        _ => None,
    }
}

/// Checks a page size.
///
/// # Errors
/// `invalid_argument` (reason `limit_exceeded`) unless `1 <= limit <= MAX_CHANGE_PAGE`.
pub fn check_limit(limit: usize) -> Result<()> {
    if (1..=MAX_CHANGE_PAGE).contains(&limit) {
        return Ok(());
    }
    Err(Error::model_validation(format!(
        "a change page holds 1 to {MAX_CHANGE_PAGE} records, not {limit}"
    ))
    .with_reason(Reason::LimitExceeded)
    .with_detail("limit", "change_page"))
}

/// Checks that reading after `after` neither skips records retention removed nor starts
/// beyond the newest record.
///
/// [`Cursor::START`] always reads from the oldest record kept (a new reader has no records
/// to miss).
///
/// # Errors
/// - `cursor_expired` if records after `after` were pruned: the reader missed them;
/// - `invalid_argument` (reason `cursor_in_future`) if `after` is beyond `bounds.newest`.
pub fn check_after(after: Cursor, bounds: FeedBounds) -> Result<()> {
    if after > bounds.newest.max(bounds.pruned_through) {
        return Err(Error::model_validation(format!(
            "change cursor {after} is beyond the newest record ({})",
            bounds.newest.max(bounds.pruned_through)
        ))
        .with_reason(Reason::CursorInFuture));
    }
    if after != Cursor::START && after < bounds.pruned_through {
        return Err(Error::cursor_expired(format!(
            "records after change cursor {after} were pruned (through {}); read from {} or \
             from the start",
            bounds.pruned_through, bounds.pruned_through
        ))
        .with_detail("pruned_through", bounds.pruned_through.get()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_one_to_the_maximum_records() {
        assert!(check_limit(1).is_ok());
        assert!(check_limit(MAX_CHANGE_PAGE).is_ok());
        for bad in [0, MAX_CHANGE_PAGE + 1] {
            let error = check_limit(bad).err();
            assert_eq!(error.map(|e| e.code()), Some("invalid_argument"));
        }
    }

    #[test]
    fn cursors_behind_retention_expire_and_cursors_ahead_are_refused() {
        let bounds = FeedBounds::new(Cursor::new(10), Cursor::new(20));
        assert!(check_after(Cursor::START, bounds).is_ok());
        assert!(check_after(Cursor::new(10), bounds).is_ok());
        assert!(check_after(Cursor::new(20), bounds).is_ok());
        assert_eq!(
            check_after(Cursor::new(9), bounds).err().map(|e| e.code()),
            Some("cursor_expired")
        );
        let ahead = check_after(Cursor::new(21), bounds).err();
        assert_eq!(ahead.as_ref().map(Error::code), Some("invalid_argument"));
        assert_eq!(ahead.and_then(|e| e.reason()), Some(Reason::CursorInFuture));
    }
}
