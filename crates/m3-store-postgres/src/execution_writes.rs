//! The writes of [`PgExecutionStore`] that change an execution's lifecycle or lease: each locks
//! the row, asks the shared rules, and stores the record and its events in one transaction.
//! (The trait methods in `executions.rs` announce each committed change.)

use m3_types::{Result, new_id};
use time::OffsetDateTime;

use super::error::db;
use super::executions::{Pending, PgExecutionStore, Store, commit, decode, encode, insert_event};
use super::round_write::fail_unresolved;
use m3_store::execution::rules::{
    Acquire, ExecutionSlot, ROUND_CLOSED_AT_FINISH, TerminalData, check_acquire, check_release,
    check_terminalize, created_payload, created_record, errors, finish_step, finished_payload,
    granted_lease, lease_expiry, lease_step, mark_finished, new_execution_lease_token,
    release_step, require_non_empty, terminalized_payload, to_canonical,
};
use m3_store::managed_input::rules::Decision;
use m3_store::{
    AcquireLease, ExecutionEvent, ExecutionLease, ExecutionLeaseRef, ExecutionRecord,
    FinishExecution, NewExecution, TerminalizeExpired, Terminalized,
};

impl PgExecutionStore {
    pub(super) async fn do_create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        let id = new.execution_id.clone().unwrap_or_else(new_id);
        require_non_empty(&id, "execution_id")?;
        let spec_json = to_canonical(&new.spec)?;
        let mut tx = self.begin().await?;
        let server_now: OffsetDateTime = sqlx::query_scalar(
            "SELECT clock_timestamp() FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS locked",
        )
        .bind(&id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db("cannot lock the execution id"))?;
        let existing: Option<(String, String)> = sqlx::query_as(
            "SELECT spec_json, record_json FROM m3rs_executions WHERE execution_id = $1",
        )
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("cannot read the execution"))?;
        if let Some((stored_spec, stored)) = existing {
            let record = decode(&stored)?;
            if stored_spec == spec_json && record.human_input == new.human_input {
                return Ok(record);
            }
            return Err(errors::id_conflict(&id));
        }
        let now = self.shared().now(server_now);
        let human_input = new.human_input;
        let record = created_record(&id, new, now);
        sqlx::query(
            "INSERT INTO m3rs_executions (execution_id, lifecycle, human_input, finished, spec_json, \
             record_json, created_at, updated_at) VALUES ($1, $2, $3, false, $4, $5, $6, $6)",
        )
        .bind(&id)
        .bind(record.lifecycle.as_str())
        .bind(human_input.as_str())
        .bind(&spec_json)
        .bind(encode(&record)?)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db("cannot insert the execution"))?;
        let event = ExecutionEvent::new(
            id.clone(),
            0,
            m3_store::EVENT_EXECUTION_CREATED,
            created_payload(human_input),
            now,
        );
        insert_event(&mut tx, &event).await?;
        commit(tx).await?;
        Ok(record)
    }

    pub(super) async fn do_acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        require_non_empty(&request.owner_id, "owner_id")?;
        let token = match request.lease_token {
            Some(token) => {
                require_non_empty(&token, "lease_token")?;
                token
            }
            None => new_execution_lease_token(),
        };
        let id = request.execution_id.as_str();
        let mut tx = self.begin().await?;
        let (record, now) = self.lock(&mut tx, id).await?;
        let expires_at = lease_expiry(now, request.ttl)?;
        if let Acquire::Held(lease) = check_acquire(&record, &request.owner_id, &token, now)? {
            return Ok(lease);
        }
        let token_taken: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM m3rs_executions WHERE lease_token = $1 AND execution_id <> $2)",
        )
        .bind(&token)
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db("cannot check the lease token"))?;
        if token_taken {
            return Err(errors::lease_token_in_use(id));
        }
        let mut pending = Pending::new(record);
        let granted = granted_lease(id, request.owner_id, token, expires_at);
        let lease = lease_step(&mut pending, granted, now);
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok(lease)
    }

    pub(super) async fn do_release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        let mut tx = self.begin().await?;
        let (record, now) = self.lock_optional(&mut tx, &lease.execution_id).await?;
        let decided = check_release(record.as_ref(), lease, now)?;
        match (decided, record) {
            (Decision::Apply, Some(record)) => {
                let mut pending = Pending::new(record);
                release_step(&mut pending, now);
                pending.store(&mut tx).await?;
                commit(tx).await
            }
            _ => Ok(()),
        }
    }

    /// `finish` in one transaction: the execution finished and, when that is not an
    /// idempotent repeat, its unresolved rounds failed closed with it (returned count), so
    /// no round of a finished execution accepts an answer nobody would deliver.
    pub(super) async fn do_finish(
        &self,
        request: FinishExecution,
    ) -> Result<(ExecutionRecord, u64)> {
        let requested = TerminalData::of_request(&request)?;
        let payload = finished_payload(&request)?;
        let id = request.execution_id.as_str();
        let mut tx = self.begin().await?;
        let (record, now) = self.lock(&mut tx, id).await?;
        let mut pending = Pending::new(record);
        let (decided, record) =
            finish_step(&mut pending, None, &requested, &request, payload, now)?;
        if decided != Decision::Apply {
            return Ok((record, 0));
        }
        let rounds_failed = fail_unresolved(&mut tx, id, ROUND_CLOSED_AT_FINISH, now).await?;
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok((record, rounds_failed))
    }

    pub(super) async fn do_terminalize_expired(
        &self,
        request: TerminalizeExpired,
    ) -> Result<Terminalized> {
        let payload = terminalized_payload(&request)?;
        let id = request.lease.execution_id.as_str();
        let mut tx = self.begin().await?;
        let (record, now) = self.lock(&mut tx, id).await?;
        check_terminalize(&record, &request, now)?;
        let mut pending = Pending::new(record);
        let error = request.error.clone();
        mark_finished(pending.change(), request.outcome, error, None, now);
        let rounds_failed = fail_unresolved(&mut tx, id, &request.reason, now).await?;
        pending.append_event(m3_store::EVENT_EXECUTION_FINISHED, payload, now);
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok(Terminalized::new(pending.record, rounds_failed))
    }
}
