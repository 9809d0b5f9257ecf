//! Lifecycle writes of [`SqliteExecutionStore`]: creation, transitions,
//! finishing, cancellation, event appends and recovery terminalization.

use m3_types::{Error, ExecutionStatus, Result, timestamp};
use serde_json::{Value, json};

use super::error;
use super::record::{
    EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_STATE_CHANGED,
    ExecutionEvent, ExecutionLeaseRef, ExecutionRecord, FinishExecution, NewExecution,
    TerminalizeExpired, Terminalized,
};
use super::schema::MANAGED_ROUNDS_TABLE;
use super::sqlite::SqliteExecutionStore;
use super::writes::{
    append, begin, check_fence, commit, diagnose, fetch, fetch_existing, table_exists,
    to_canonical, to_canonical_opt,
};
use crate::sqlite_pool::sqlx_error;

/// Event kinds only the store itself appends.
const RESERVED_KINDS: [&str; 3] = [
    EVENT_EXECUTION_CREATED,
    EVENT_EXECUTION_STATE_CHANGED,
    EVENT_EXECUTION_FINISHED,
];

impl SqliteExecutionStore {
    pub(super) async fn create(
        &self,
        execution_id: String,
        new: NewExecution,
    ) -> Result<ExecutionRecord> {
        if execution_id.trim().is_empty() {
            return Err(Error::model_validation("execution_id must not be empty"));
        }
        let id = execution_id.as_str();
        let spec_json = to_canonical(&new.spec)?;
        let human_input = new.human_input.as_str();
        let now = self.now();
        let mut tx = begin(&self.inner().pool).await?;
        let existing: Option<(String, String)> =
            sqlx::query_as("SELECT spec_json, human_input FROM m3rs_executions WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| sqlx_error("could not read the execution", e))?;
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
        .map_err(|e| sqlx_error("could not create the execution", e))?;
        if done.rows_affected() != 1 {
            return Err(Error::storage(
                "execution insert did not insert exactly one row",
            ));
        }
        let payload = json!({
            "lifecycle": ExecutionStatus::Created.as_str(),
            "human_input": human_input,
        });
        append(&mut tx, id, EVENT_EXECUTION_CREATED, payload, now).await?;
        let record = fetch_existing(&mut tx, id).await?;
        commit(tx).await?;
        Ok(record)
    }

    pub(super) async fn do_transition(
        &self,
        execution_id: &str,
        to: ExecutionStatus,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionRecord> {
        let now = self.now();
        let mut tx = begin(&self.inner().pool).await?;
        let record = fetch_existing(&mut tx, execution_id).await?;
        let from = record.lifecycle;
        if to == ExecutionStatus::Finished || !from.can_transition_to(to) {
            return Err(error::invalid_transition(execution_id, from, to));
        }
        check_fence(&record, lease, now)?;
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
        .map_err(|e| sqlx_error("could not change the lifecycle", e))?;
        if done.rows_affected() != 1 {
            let fresh = fetch(&mut tx, execution_id).await?;
            return Err(diagnose(fresh.as_ref(), execution_id, lease, now));
        }
        let payload = json!({ "lifecycle": to.as_str() });
        append(
            &mut tx,
            execution_id,
            EVENT_EXECUTION_STATE_CHANGED,
            payload,
            now,
        )
        .await?;
        let record = fetch_existing(&mut tx, execution_id).await?;
        commit(tx).await?;
        Ok(record)
    }

    pub(super) async fn do_finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let id = request.execution_id.as_str();
        let lease = request.lease.as_ref();
        let outcome = request.outcome.as_str();
        let error_json = to_canonical_opt(request.error.as_ref())?;
        let result_json = to_canonical_opt(request.result.as_ref())?;
        let now = self.now();
        let mut tx = begin(&self.inner().pool).await?;
        let record = fetch_existing(&mut tx, id).await?;
        if record.is_finished() {
            let stored: (Option<String>, Option<String>, Option<String>) = sqlx::query_as(
                "SELECT outcome, error_json, result_json FROM m3rs_executions WHERE id = ?",
            )
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| sqlx_error("could not read the terminal data", e))?;
            if stored == (Some(outcome.to_owned()), error_json, result_json) {
                return Ok(record);
            }
            return Err(error::finished_differently(id));
        }
        if !record
            .lifecycle
            .can_transition_to(ExecutionStatus::Finished)
        {
            return Err(error::invalid_transition(
                id,
                record.lifecycle,
                ExecutionStatus::Finished,
            ));
        }
        check_fence(&record, lease, now)?;
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
        .bind(&error_json)
        .bind(&result_json)
        .bind(&at)
        .bind(&at)
        .bind(id)
        .bind(record.lifecycle.as_str())
        .bind(lease.map(|l| l.owner_id.as_str()))
        .bind(lease.map(|l| l.lease_token.as_str()))
        .bind(&at)
        .execute(&mut *tx)
        .await
        .map_err(|e| sqlx_error("could not finish the execution", e))?;
        if done.rows_affected() != 1 {
            let fresh = fetch(&mut tx, id).await?;
            return Err(diagnose(fresh.as_ref(), id, lease, now));
        }
        let payload = json!({
            "lifecycle": ExecutionStatus::Finished.as_str(),
            "outcome": outcome,
            "error": error_value(error_json.as_deref())?,
        });
        append(&mut tx, id, EVENT_EXECUTION_FINISHED, payload, now).await?;
        let record = fetch_existing(&mut tx, id).await?;
        commit(tx).await?;
        Ok(record)
    }

    pub(super) async fn do_request_cancel(
        &self,
        execution_id: &str,
        reason: Option<&str>,
    ) -> Result<ExecutionRecord> {
        let now = self.now();
        let at = timestamp::format(now);
        let mut tx = begin(&self.inner().pool).await?;
        let done = sqlx::query(
            "UPDATE m3rs_executions SET cancel_requested_at = ?, cancel_reason = ?, updated_at = ?
             WHERE id = ? AND cancel_requested_at IS NULL AND finished_at IS NULL",
        )
        .bind(&at)
        .bind(reason)
        .bind(&at)
        .bind(execution_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| sqlx_error("could not record the cancel request", e))?;
        // Zero rows: already requested or finished (both no-ops), or missing.
        let record = fetch_existing(&mut tx, execution_id).await?;
        if done.rows_affected() == 1 {
            commit(tx).await?;
        }
        Ok(record)
    }

    pub(super) async fn do_append_event(
        &self,
        execution_id: &str,
        kind: &str,
        payload: Value,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionEvent> {
        if kind.trim().is_empty() {
            return Err(Error::model_validation("event kind must not be empty"));
        }
        if RESERVED_KINDS.contains(&kind) {
            return Err(
                Error::model_validation("event kind is reserved for the execution store")
                    .with_detail("kind", kind),
            );
        }
        let now = self.now();
        let mut tx = begin(&self.inner().pool).await?;
        let record = fetch_existing(&mut tx, execution_id).await?;
        if record.is_finished() {
            return Err(error::finished(execution_id));
        }
        check_fence(&record, lease, now)?;
        let event = append(&mut tx, execution_id, kind, payload, now).await?;
        commit(tx).await?;
        Ok(event)
    }

    pub(super) async fn do_terminalize_expired(
        &self,
        request: TerminalizeExpired,
    ) -> Result<Terminalized> {
        let lease = &request.lease;
        let id = lease.execution_id.as_str();
        let outcome = request.outcome.as_str();
        let error_json = to_canonical_opt(request.error.as_ref())?;
        let now = self.now();
        let at = timestamp::format(now);
        let mut tx = begin(&self.inner().pool).await?;
        let record = fetch_existing(&mut tx, id).await?;
        if record.is_finished() {
            return Err(error::finished(id));
        }
        match &record.lease {
            Some(stored)
                if stored.owner_id == lease.owner_id && stored.lease_token == lease.lease_token =>
            {
                if !stored.is_expired_at(now) {
                    return Err(error::lease_still_live(id));
                }
            }
            _ => return Err(error::lease_not_held(id)),
        }
        let done = sqlx::query(
            "UPDATE m3rs_executions
             SET lifecycle = 'finished', outcome = ?, error_json = ?, result_json = NULL,
                 finished_at = ?, updated_at = ?,
                 lease_owner_id = NULL, lease_token = NULL, lease_expires_at = NULL
             WHERE id = ? AND finished_at IS NULL AND lease_owner_id = ? AND lease_token = ?
               AND lease_expires_at <= ?",
        )
        .bind(outcome)
        .bind(&error_json)
        .bind(&at)
        .bind(&at)
        .bind(id)
        .bind(&lease.owner_id)
        .bind(&lease.lease_token)
        .bind(&at)
        .execute(&mut *tx)
        .await
        .map_err(|e| sqlx_error("could not terminalize the execution", e))?;
        if done.rows_affected() != 1 {
            return Err(
                Error::managed_input_conflict("execution changed concurrently")
                    .with_detail("execution_id", id)
                    .with_detail("reason", "concurrent_change"),
            );
        }
        let rounds_failed = if table_exists(&mut tx, MANAGED_ROUNDS_TABLE).await? {
            sqlx::query(
                "UPDATE m3_managed_input_rounds
                 SET status = 'failed', failed_at = ?, failure_code = 'recovery_unavailable',
                     failure_message = ?, updated_at = ?
                 WHERE execution_id = ?
                   AND status IN ('pending','response_validated','delivery_started','delivered')",
            )
            .bind(&at)
            .bind(&request.reason)
            .bind(&at)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| sqlx_error("could not fail the managed-input rounds", e))?
            .rows_affected()
        } else {
            0
        };
        let payload = json!({
            "lifecycle": ExecutionStatus::Finished.as_str(),
            "outcome": outcome,
            "error": error_value(error_json.as_deref())?,
            "reason": request.reason,
            "completeness": "partial",
            "limitations": ["capture_incomplete"],
        });
        append(&mut tx, id, EVENT_EXECUTION_FINISHED, payload, now).await?;
        let record = fetch_existing(&mut tx, id).await?;
        commit(tx).await?;
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
}

/// The stored error JSON as a value for an event payload (`null` if none).
fn error_value(error_json: Option<&str>) -> Result<Value> {
    match error_json {
        None => Ok(Value::Null),
        Some(raw) => serde_json::from_str(raw)
            .map_err(|e| Error::storage("terminal error is not valid JSON").with_source(e)),
    }
}
