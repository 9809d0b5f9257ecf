//! Fixtures of the execution suite.

use std::time::Duration;

use m3_types::{ErrorCode, ErrorInfo, HumanInput};
use serde_json::json;

use super::ExecutionHarness;
use crate::conformance::CaseFailure;
use crate::{AcquireLease, ExecutionLease, ExecutionRecord, NewExecution};

pub(super) type Step<T> = Result<T, CaseFailure>;

pub(super) const TTL: Duration = Duration::from_secs(30);
pub(super) const INVALID_ARGUMENT: &str = "invalid_argument";
pub(super) const CONFLICT: &str = "managed_input_conflict";
pub(super) const STATE: &str = "managed_input_state";
pub(super) const NOT_FOUND: &str = "not_found";

/// A `fail` execution with a small spec.
pub(super) async fn create(h: &ExecutionHarness) -> Step<ExecutionRecord> {
    Ok(h.store
        .create_execution(NewExecution::new(json!({"prompt": "ship it", "n": 1})))
        .await?)
}

/// A `managed` execution.
pub(super) async fn create_managed(h: &ExecutionHarness) -> Step<ExecutionRecord> {
    Ok(h.store
        .create_execution(
            NewExecution::new(json!({"prompt": "ask me"})).with_human_input(HumanInput::Managed),
        )
        .await?)
}

/// `owner`'s lease on `execution_id` for [`TTL`].
pub(super) async fn lease(
    h: &ExecutionHarness,
    execution_id: &str,
    owner: &str,
) -> m3_types::Result<ExecutionLease> {
    h.store
        .acquire_lease(AcquireLease::new(execution_id, owner, TTL))
        .await
}

/// The error a managed execution finishes with after recovery.
pub(super) fn recovery_error() -> ErrorInfo {
    ErrorInfo::new(
        ErrorCode::ManagedInputRecoveryUnavailable,
        "managed input cannot be recovered",
    )
}

/// A sample terminal error.
pub(super) fn sample_error() -> ErrorInfo {
    ErrorInfo::new(ErrorCode::Timeout, "execution timed out")
}

/// Moves the clock.
pub(super) fn advance(h: &ExecutionHarness, by: Duration) {
    h.clock.advance_std(by);
}

/// The record of an execution that must exist.
pub(super) async fn read(h: &ExecutionHarness, id: &str) -> Step<ExecutionRecord> {
    h.store
        .get_execution(id)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("execution {id} is missing")))
}
