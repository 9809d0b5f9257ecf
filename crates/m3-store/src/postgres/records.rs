//! Execution records built in memory before a PostgreSQL write: the new record and
//! the finished one (pure; the store writes them under its row lock).

use m3_types::ExecutionStatus;
use time::OffsetDateTime;

use crate::{ExecutionRecord, FinishExecution, NewExecution};

/// The record an execution gets when created.
pub(super) fn created_record(id: &str, new: NewExecution, now: OffsetDateTime) -> ExecutionRecord {
    ExecutionRecord {
        execution_id: id.to_owned(),
        spec: new.spec,
        human_input: new.human_input,
        lifecycle: ExecutionStatus::Created,
        outcome: None,
        error: None,
        result: None,
        sequence: 0,
        lease: None,
        cancel_requested_at: None,
        cancel_reason: None,
        created_at: now,
        updated_at: now,
        finished_at: None,
    }
}

/// Marks `record` finished with the given terminal data.
pub(super) fn finish_record(
    record: &mut ExecutionRecord,
    request: &FinishExecution,
    now: OffsetDateTime,
) {
    record.lifecycle = ExecutionStatus::Finished;
    record.outcome = Some(request.outcome);
    record.error = request.error.clone();
    record.result = request.result.clone();
    record.finished_at = Some(now);
    record.updated_at = now;
    record.lease = None;
}
