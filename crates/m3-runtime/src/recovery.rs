//! Recovery: terminalize executions whose worker disappeared.

use m3_store::{ExecutionStore, TerminalizeExpired};
use m3_types::{
    ErrorCode, ErrorInfo, ExecutionOutcome, HumanInput, ManagedInputStatus, Result, messages,
};
use serde::Serialize;

/// What [`recover`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The executions it finished.
    pub executions: Vec<RecoveredExecution>,
}

/// One execution finished by [`recover`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RecoveredExecution {
    /// The execution.
    pub execution_id: String,
    /// Rounds that were unresolved and are now `failed/recovery_unavailable`.
    pub failed_rounds: Vec<String>,
    /// Why (`"worker lease expired"`).
    pub reason: String,
    /// Stored rounds of the execution that could not be read: reported and skipped, never
    /// fatal (the terminalization still fails them if they are unresolved in storage).
    pub unreadable_rounds: Vec<String>,
}

/// Terminalizes every unfinished execution whose worker lease expired.
///
/// A managed execution finishes `failed` with error code
/// `managed_input_recovery_unavailable`, and every unresolved round becomes
/// `failed/recovery_unavailable` in the same transaction; a late response then
/// gets `managed_input_state` and no round ever becomes pending again. Other
/// executions finish `interrupted`. Executions whose lease is live (a worker in
/// another process) are left alone.
///
/// # Errors
/// `storage_error`; an execution recovered concurrently by another process is
/// skipped, not an error.
pub async fn recover(store: &dyn ExecutionStore) -> Result<RecoveryReport> {
    let reason = "worker lease expired";
    let mut report = RecoveryReport::default();
    for record in store.list_expired_leases().await? {
        let Some(lease) = record.lease.as_ref() else {
            continue;
        };
        let managed = record.human_input == HumanInput::Managed;
        let mut unresolved = Vec::new();
        let mut unreadable_rounds = Vec::new();
        if managed {
            // Resolving the managed store creates its tables before the recovery
            // transaction updates them.
            let scan = store
                .managed_input_store()
                .await?
                .scan_rounds(&record.execution_id)
                .await?;
            for row in &scan.unreadable {
                tracing::warn!(execution.id = %record.execution_id, round.id = %row.round_id, error = %row.error, "unreadable round during recovery");
            }
            unreadable_rounds = scan
                .unreadable
                .into_iter()
                .map(|row| row.round_id)
                .collect();
            unresolved = scan
                .rounds
                .into_iter()
                .filter(|r| {
                    !matches!(
                        r.status,
                        ManagedInputStatus::Resolved | ManagedInputStatus::Failed
                    )
                })
                .map(|r| r.pending.round_id)
                .collect();
        }
        let request = if managed {
            TerminalizeExpired::new(lease.to_ref(), ExecutionOutcome::Failed, reason).with_error(
                ErrorInfo::new(
                    ErrorCode::ManagedInputRecoveryUnavailable,
                    messages::RECOVERY_UNAVAILABLE,
                )
                .with_detail("reason", reason),
            )
        } else {
            TerminalizeExpired::new(lease.to_ref(), ExecutionOutcome::Interrupted, reason)
        };
        match store.terminalize_expired(request).await {
            Ok(_) => {
                let outcome = if managed { "failed" } else { "interrupted" };
                crate::metrics::Metrics::global().count_recovery_fail_close(outcome);
                tracing::info!(execution.id = %record.execution_id, rounds = unresolved.len(), "recovered execution");
                report.executions.push(RecoveredExecution {
                    execution_id: record.execution_id,
                    failed_rounds: unresolved,
                    reason: reason.to_owned(),
                    unreadable_rounds,
                });
            }
            Err(error) if error.is_conflict() || error.is_state() || error.is_not_found() => {
                tracing::debug!(execution.id = %record.execution_id, %error, "execution recovered elsewhere");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(report)
}
