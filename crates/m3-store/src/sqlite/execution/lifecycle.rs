//! Lifecycle writes of [`SqliteExecutionStore`]: creation, transitions,
//! finishing, cancellation, event appends and recovery terminalization.

use m3_types::{Error, ExecutionStatus, Result, timestamp};
use serde_json::Value;
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::schema::MANAGED_ROUNDS_TABLE;
use super::store::SqliteExecutionStore;
use super::writes::{append, fetch, fetch_existing, table_exists};
use crate::execution::record::{
    EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_STATE_CHANGED,
    ExecutionEvent, ExecutionLeaseRef, ExecutionRecord, FinishExecution, NewExecution,
    TerminalizeExpired, Terminalized,
};
use crate::execution::rules::errors as error;
use crate::execution::rules::{
    TerminalData, check_event_kind, check_fence, check_finish, check_terminalize, check_transition,
    created_payload, diagnose, finished_payload, require_non_empty, state_changed_payload,
    terminalized_payload, to_canonical,
};
use crate::managed_input::rules::Decision;
use crate::sqlite::error::storage;

impl SqliteExecutionStore {
    pub(super) async fn create(
        &self,
        execution_id: String,
        new: NewExecution,
    ) -> Result<ExecutionRecord> {
        require_non_empty(&execution_id, "execution_id")?;
        let id = execution_id.as_str();
        let spec_json = to_canonical(&new.spec)?;
        let human_input = new.human_input.as_str();
        let now = self.now();
        let mut tx = self.begin_write().await?;
        let result = async {
            let existing: Option<(String, String)> =
                sqlx::query_as("SELECT spec_json, human_input FROM m3rs_executions WHERE id = ?")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| storage("could not read the execution", e))?;
            if let Some((stored_spec, stored_human_input)) = existing {
                if stored_spec == spec_json && stored_human_input == human_input {
                    return fetch_existing(&mut tx, id).await;
                }
                return Err(error::id_conflict(id));
            }
            let at = timestamp::format(now);
            let done = sqlx::query(
                "INSERT INTO m3rs_executions(id, spec_json, human_input, lifecycle, created_at, updated_at)
                 VALUES (?, ?, ?, 'created', ?, ?)",
            )
            .bind(id)
            .bind(&spec_json)
            .bind(human_input)
            .bind(&at)
            .bind(&at)
            .execute(&mut *tx)
            .await
            .map_err(|e| storage("could not create the execution", e))?;
            if done.rows_affected() != 1 {
                return Err(Error::storage(
                    "execution insert did not insert exactly one row",
                ));
            }
            let payload = created_payload(new.human_input);
            append(&mut tx, id, EVENT_EXECUTION_CREATED, payload, now).await?;
            let record = fetch_existing(&mut tx, id).await?;
            Ok(record)
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_transition(
        &self,
        execution_id: &str,
        to: ExecutionStatus,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionRecord> {
        let now = self.now();
        let mut tx = self.begin_write().await?;
        let result = async {
            let record = fetch_existing(&mut tx, execution_id).await?;
            let from = record.lifecycle;
            check_transition(&record, to, lease, now)?;
            let done = sqlx::query(
                "UPDATE m3rs_executions SET lifecycle = ?, updated_at = ?
                 WHERE id = ? AND lifecycle = ? AND finished_at IS NULL
                   AND lease_owner_id IS ? AND lease_token IS ?
                   AND (lease_token IS NULL OR lease_expires_at > ?)",
            )
            .bind(to.as_str())
            .bind(timestamp::format(now))
            .bind(execution_id)
            .bind(from.as_str())
            .bind(lease.map(|l| l.owner_id.as_str()))
            .bind(lease.map(|l| l.lease_token.as_str()))
            .bind(timestamp::format(now))
            .execute(&mut *tx)
            .await
            .map_err(|e| storage("could not change the lifecycle", e))?;
            if done.rows_affected() != 1 {
                let fresh = fetch(&mut tx, execution_id).await?;
                return Err(diagnose(fresh.as_ref(), execution_id, lease, now));
            }
            let payload = state_changed_payload(to);
            append(
                &mut tx,
                execution_id,
                EVENT_EXECUTION_STATE_CHANGED,
                payload,
                now,
            )
            .await?;
            let record = fetch_existing(&mut tx, execution_id).await?;
            Ok(record)
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let id = request.execution_id.as_str();
        let lease = request.lease.as_ref();
        let requested = TerminalData::of_request(&request)?;
        let (outcome, error_json, result_json) = (
            &requested.outcome,
            &requested.error_json,
            &requested.result_json,
        );
        let now = self.now();
        let mut tx = self.begin_write().await?;
        let result = async {
            let record = fetch_existing(&mut tx, id).await?;
            let stored = match record.is_finished() {
                true => Some(stored_terminal_data(&mut tx, id).await?),
                false => None,
            };
            if check_finish(&record, stored.as_ref(), &requested, lease, now)?
                == Decision::AlreadyDone
            {
                return Ok(record);
            }
            let at = timestamp::format(now);
            let done = sqlx::query(
                "UPDATE m3rs_executions
                 SET lifecycle = 'finished', outcome = ?, error_json = ?, result_json = ?,
                     finished_at = ?, updated_at = ?,
                     lease_owner_id = NULL, lease_token = NULL, lease_expires_at = NULL
                 WHERE id = ? AND lifecycle = ? AND finished_at IS NULL
                   AND lease_owner_id IS ? AND lease_token IS ?
                   AND (lease_token IS NULL OR lease_expires_at > ?)",
            )
            .bind(outcome)
            .bind(error_json)
            .bind(result_json)
            .bind(&at)
            .bind(&at)
            .bind(id)
            .bind(record.lifecycle.as_str())
            .bind(lease.map(|l| l.owner_id.as_str()))
            .bind(lease.map(|l| l.lease_token.as_str()))
            .bind(&at)
            .execute(&mut *tx)
            .await
            .map_err(|e| storage("could not finish the execution", e))?;
            if done.rows_affected() != 1 {
                let fresh = fetch(&mut tx, id).await?;
                return Err(diagnose(fresh.as_ref(), id, lease, now));
            }
            let payload = finished_payload(&request)?;
            append(&mut tx, id, EVENT_EXECUTION_FINISHED, payload, now).await?;
            let record = fetch_existing(&mut tx, id).await?;
            Ok(record)
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_request_cancel(
        &self,
        execution_id: &str,
        reason: Option<&str>,
    ) -> Result<ExecutionRecord> {
        let now = self.now();
        let at = timestamp::format(now);
        let mut tx = self.begin_write().await?;
        let result = async {
            sqlx::query(
                "UPDATE m3rs_executions SET cancel_requested_at = ?, cancel_reason = ?, updated_at = ?
                 WHERE id = ? AND cancel_requested_at IS NULL AND finished_at IS NULL",
            )
            .bind(&at)
            .bind(reason)
            .bind(&at)
            .bind(execution_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| storage("could not record the cancel request", e))?;
            // Zero rows: already requested or finished (both no-ops), or missing.
            fetch_existing(&mut tx, execution_id).await
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_append_event(
        &self,
        execution_id: &str,
        kind: &str,
        payload: Value,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionEvent> {
        check_event_kind(kind)?;
        let now = self.now();
        let mut tx = self.begin_write().await?;
        let result = async {
            let record = fetch_existing(&mut tx, execution_id).await?;
            if record.is_finished() {
                return Err(error::finished(execution_id));
            }
            check_fence(&record, lease, now)?;
            let event = append(&mut tx, execution_id, kind, payload, now).await?;
            Ok(event)
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_terminalize_expired(
        &self,
        request: TerminalizeExpired,
    ) -> Result<Terminalized> {
        let now = self.now();
        let payload = terminalized_payload(&request)?;
        let mut tx = self.begin_write().await?;
        let result = terminalize_in_tx(&mut tx, &request, payload, now).await;
        tx.finish(result).await
    }
}

/// The stored terminal data of a finished execution (raw canonical text, as written).
async fn stored_terminal_data(conn: &mut SqliteConnection, id: &str) -> Result<TerminalData> {
    let (outcome, error_json, result_json): (Option<String>, Option<String>, Option<String>) =
        sqlx::query_as("SELECT outcome, error_json, result_json FROM m3rs_executions WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| storage("could not read the terminal data", e))?;
    Ok(TerminalData {
        outcome: outcome.unwrap_or_default(),
        error_json,
        result_json,
    })
}

/// Recovery inside one write transaction: check, finish on the expired lease, fail the
/// execution's unresolved rounds, append `execution.finished`.
async fn terminalize_in_tx(
    tx: &mut SqliteConnection,
    request: &TerminalizeExpired,
    payload: Value,
    now: OffsetDateTime,
) -> Result<Terminalized> {
    let id = request.lease.execution_id.as_str();
    let record = fetch_existing(tx, id).await?;
    check_terminalize(&record, request, now)?;
    finish_on_expired_lease(tx, request, now).await?;
    let rounds_failed = fail_unresolved_rounds(tx, id, &request.reason, now).await?;
    append(tx, id, EVENT_EXECUTION_FINISHED, payload, now).await?;
    let record = fetch_existing(tx, id).await?;
    tracing::info!(
        execution.id = id,
        rounds_failed,
        "terminalized execution after lease loss"
    );
    Ok(Terminalized {
        record,
        rounds_failed,
    })
}

/// The guarded UPDATE that finishes the execution on its expired lease.
async fn finish_on_expired_lease(
    tx: &mut SqliteConnection,
    request: &TerminalizeExpired,
    now: OffsetDateTime,
) -> Result<()> {
    let lease = &request.lease;
    let at = timestamp::format(now);
    let error_json = crate::execution::rules::to_canonical_opt(request.error.as_ref())?;
    let done = sqlx::query(
        "UPDATE m3rs_executions
         SET lifecycle = 'finished', outcome = ?, error_json = ?, result_json = NULL,
             finished_at = ?, updated_at = ?,
             lease_owner_id = NULL, lease_token = NULL, lease_expires_at = NULL
         WHERE id = ? AND finished_at IS NULL AND lease_owner_id = ? AND lease_token = ?
           AND lease_expires_at <= ?",
    )
    .bind(request.outcome.as_str())
    .bind(&error_json)
    .bind(&at)
    .bind(&at)
    .bind(&lease.execution_id)
    .bind(&lease.owner_id)
    .bind(&lease.lease_token)
    .bind(&at)
    .execute(&mut *tx)
    .await
    .map_err(|e| storage("could not terminalize the execution", e))?;
    if done.rows_affected() != 1 {
        return Err(error::concurrent_change(&lease.execution_id));
    }
    Ok(())
}

/// Fails every unresolved round of the execution with `recovery_unavailable`, if the
/// managed-input tables exist (recovery never creates them).
async fn fail_unresolved_rounds(
    tx: &mut SqliteConnection,
    execution_id: &str,
    reason: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    if !table_exists(tx, MANAGED_ROUNDS_TABLE).await? {
        return Ok(0);
    }
    crate::sqlite::leases::fail_unresolved_in_tx(tx, execution_id, reason, now).await
}
