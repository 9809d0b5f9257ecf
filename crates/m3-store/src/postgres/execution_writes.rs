//! The writes of [`PgExecutionStore`] that change an execution's lifecycle or lease: each locks
//! the row, asks the shared rules, and stores the record and its events in one transaction.
//! (The trait methods in `executions.rs` announce each committed change.)

use m3_types::{ExecutionStatus, Result, new_id};
use time::OffsetDateTime;

use super::error::db;
use super::executions::{
    Pending, PgExecutionStore, commit, decode, encode, insert_event, locked_row,
};
use super::rounds::fail_unresolved;
use crate::execution::rules::{
    self, Acquire, TerminalData, check_acquire, check_fence, check_finish, check_terminalize,
    check_transition, created_payload, created_record, errors, finished_payload, lease_expiry,
    mark_finished, new_execution_lease_token, require_non_empty, state_changed_payload,
    terminalized_payload, to_canonical,
};
use crate::managed_input::rules::Decision;
use crate::{
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
        let event = ExecutionEvent {
            execution_id: id.clone(),
            sequence: 0,
            kind: crate::EVENT_EXECUTION_CREATED.to_owned(),
            payload: created_payload(human_input),
            timestamp: now,
        };
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
        let lease = ExecutionLease {
            execution_id: id.to_owned(),
            owner_id: request.owner_id,
            lease_token: token,
            expires_at,
        };
        let mut pending = Pending::new(record);
        let changed = pending.change();
        changed.lease = Some(lease.clone());
        changed.updated_at = now;
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok(lease)
    }

    pub(super) async fn do_release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        let mut tx = self.begin().await?;
        let row = locked_row(&mut tx, &lease.execution_id).await?;
        let record = row.as_ref().map(|(stored, _)| decode(stored)).transpose()?;
        let now = match &row {
            Some((_, server_now)) => self.shared().now(*server_now),
            None => crate::store_now(self.shared().clock.as_ref()),
        };
        match record {
            Some(r) if r.is_finished() && r.lease.is_none() => Ok(()),
            Some(r) if !r.is_finished() && check_fence(&r, Some(lease), now).is_ok() => {
                let mut pending = Pending::new(r);
                let changed = pending.change();
                changed.lease = None;
                changed.updated_at = now;
                pending.store(&mut tx).await?;
                commit(tx).await
            }
            other => Err(rules::diagnose(
                other.as_ref(),
                &lease.execution_id,
                Some(lease),
                now,
            )),
        }
    }

    pub(super) async fn do_transition(
        &self,
        execution_id: &str,
        to: ExecutionStatus,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionRecord> {
        self.mutate(execution_id, |pending, now| {
            check_transition(&pending.record, to, lease, now)?;
            let record = pending.change();
            record.lifecycle = to;
            record.updated_at = now;
            pending.append(
                crate::EVENT_EXECUTION_STATE_CHANGED,
                state_changed_payload(to),
                now,
            );
            Ok(pending.record.clone())
        })
        .await
    }

    pub(super) async fn do_finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let requested = TerminalData::of_request(&request)?;
        let payload = finished_payload(&request)?;
        self.mutate(&request.execution_id, |pending, now| {
            let stored = if pending.record.is_finished() {
                Some(TerminalData::of_record(&pending.record)?)
            } else {
                None
            };
            let decided = check_finish(
                &pending.record,
                stored.as_ref(),
                &requested,
                request.lease.as_ref(),
                now,
            )?;
            if decided == Decision::AlreadyDone {
                return Ok(pending.record.clone());
            }
            mark_finished(
                pending.change(),
                request.outcome,
                request.error.clone(),
                request.result.clone(),
                now,
            );
            pending.append(crate::EVENT_EXECUTION_FINISHED, payload, now);
            Ok(pending.record.clone())
        })
        .await
    }

    pub(super) async fn do_request_cancel(
        &self,
        execution_id: &str,
        reason: Option<&str>,
    ) -> Result<ExecutionRecord> {
        self.mutate(execution_id, |pending, now| {
            if pending.record.cancel_requested_at.is_none() && !pending.record.is_finished() {
                let record = pending.change();
                record.cancel_requested_at = Some(now);
                record.cancel_reason = reason.map(str::to_owned);
                record.updated_at = now;
            }
            Ok(pending.record.clone())
        })
        .await
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
        pending.append(crate::EVENT_EXECUTION_FINISHED, payload, now);
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok(Terminalized {
            record: pending.record,
            rounds_failed,
        })
    }
}
