//! The writes of [`SqliteExecutionStore`]: each is one `BEGIN IMMEDIATE` transaction that
//! reads the execution, hands it to a shared step of [`crate::execution::rules`] as a
//! [`StagedWrite`], and writes the record and the events the step left. The write lock is
//! held from the read on, so nothing changes the row in between.

use m3_types::{Error, Result, timestamp};
use time::OffsetDateTime;

use super::schema::MANAGED_ROUNDS_TABLE;
use super::store::SqliteExecutionStore;
use super::writes::{fetch, fetch_existing, insert_event, store, table_exists};
use crate::execution::record::{
    AcquireLease, AppendEvent, ExecutionEvent, ExecutionLease, ExecutionLeaseRef, ExecutionRecord,
    FinishExecution, NewExecution, TerminalizeExpired, Terminalized,
};
use crate::execution::rules::errors as error;
use crate::execution::rules::{
    Acquire, ROUND_CLOSED_AT_FINISH, StagedWrite, TerminalData, acquire_token, append_step,
    check_acquire, check_append, check_release, created_event, created_record, finish_step,
    finished_payload, granted_lease, lease_expiry, lease_step, release_step, require_non_empty,
    terminalize_step, terminalized_payload, to_canonical,
};
use crate::managed_input::rules::Decision;
use crate::sqlite::error::storage;

impl SqliteExecutionStore {
    /// The read-decide-write of a write on one execution: in one write transaction, reads
    /// `id` (`None`: no such execution), lets `step` decide and change it at `now`, and
    /// writes what it changed. An error rolls everything back.
    pub(super) async fn mutate_optional<T: Send>(
        &self,
        id: &str,
        now: OffsetDateTime,
        step: impl FnOnce(Option<&mut StagedWrite>, OffsetDateTime) -> Result<T> + Send,
    ) -> Result<T> {
        let mut tx = self.begin_write().await?;
        let result = async {
            let mut staged = fetch(&mut tx, id).await?.map(StagedWrite::new);
            let value = step(staged.as_mut(), now)?;
            if let Some(staged) = &staged {
                store(&mut tx, staged).await?;
            }
            Ok(value)
        }
        .await;
        tx.finish(result).await
    }

    /// [`mutate_optional`](Self::mutate_optional) on an execution that must exist.
    pub(super) async fn mutate<T: Send>(
        &self,
        id: &str,
        now: OffsetDateTime,
        step: impl FnOnce(&mut StagedWrite, OffsetDateTime) -> Result<T> + Send,
    ) -> Result<T> {
        self.mutate_optional(id, now, |staged, now| {
            step(staged.ok_or_else(|| error::not_found(id))?, now)
        })
        .await
    }

    pub(super) async fn create(
        &self,
        execution_id: String,
        new: NewExecution,
    ) -> Result<ExecutionRecord> {
        require_non_empty(&execution_id, "execution_id")?;
        let id = execution_id.as_str();
        // Stored in the order given (a script's call arguments are shown in the agent's
        // order); a replay is compared canonically.
        let spec_canonical = to_canonical(&new.spec)?;
        let spec_json = m3_types::ordered_json(&new.spec)?;
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
                let stored_canonical = serde_json::from_str(&stored_spec)
                    .ok()
                    .and_then(|stored| m3_types::canonical_json(&stored).ok());
                if stored_canonical.as_deref() == Some(spec_canonical.as_str())
                    && stored_human_input == new.human_input.as_str()
                {
                    return fetch_existing(&mut tx, id).await;
                }
                return Err(error::id_conflict(id));
            }
            let event = created_event(id, new.human_input, now);
            let record = created_record(id, new, now);
            let at = timestamp::format(now);
            let done = sqlx::query(
                "INSERT INTO m3rs_executions(id, spec_json, human_input, lifecycle, created_at, updated_at)
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(&spec_json)
            .bind(record.human_input.as_str())
            .bind(record.lifecycle.as_str())
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
            insert_event(&mut tx, &event).await?;
            Ok(record)
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        let token = acquire_token(&request)?;
        let now = self.now();
        let expires_at = lease_expiry(now, request.ttl)?;
        let id = request.execution_id.as_str();
        self.mutate(id, now, |staged, now| {
            if let Acquire::Held(lease) =
                check_acquire(&staged.record, &request.owner_id, &token, now)?
            {
                return Ok(lease);
            }
            let granted = granted_lease(id, request.owner_id.clone(), token, expires_at);
            Ok(lease_step(staged, granted, now))
        })
        .await
    }

    pub(super) async fn do_release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        self.mutate_optional(&lease.execution_id, self.now(), |staged, now| {
            let read = staged.as_deref().map(|s| &s.record);
            if let (Decision::Apply, Some(staged)) = (check_release(read, lease, now)?, staged) {
                release_step(staged, now);
            }
            Ok(())
        })
        .await
    }

    /// `finish` in one write transaction: the shared step finishes the execution and, unless
    /// it was an idempotent repeat, the execution's unresolved rounds fail with it (the
    /// count is returned, for the round announcement).
    pub(super) async fn do_finish(
        &self,
        request: FinishExecution,
    ) -> Result<(ExecutionRecord, u64)> {
        let requested = TerminalData::of_request(&request)?;
        let payload = finished_payload(&request)?;
        let now = self.now();
        let id = request.execution_id.as_str();
        let mut tx = self.begin_write().await?;
        let result = async {
            let mut staged = StagedWrite::new(fetch_existing(&mut tx, id).await?);
            let (decided, record) =
                finish_step(&mut staged, None, &requested, &request, payload, now)?;
            if decided != Decision::Apply {
                return Ok((record, 0));
            }
            let rounds_failed =
                fail_unresolved_rounds(&mut tx, id, ROUND_CLOSED_AT_FINISH, now).await?;
            store(&mut tx, &staged).await?;
            Ok((staged.into_record(), rounds_failed))
        }
        .await;
        tx.finish(result).await
    }

    pub(super) async fn do_append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        check_append(&event)?;
        let id = event.execution_id.clone();
        self.mutate(&id, self.now(), |staged, now| {
            append_step(staged, event, now)
        })
        .await
    }

    /// Recovery in one write transaction: the shared step finishes the execution on its
    /// expired lease, and the execution's unresolved rounds fail with it.
    pub(super) async fn do_terminalize_expired(
        &self,
        request: TerminalizeExpired,
    ) -> Result<Terminalized> {
        let now = self.now();
        let payload = terminalized_payload(&request)?;
        let id = request.lease.execution_id.as_str();
        let mut tx = self.begin_write().await?;
        let result = async {
            let mut staged = StagedWrite::new(fetch_existing(&mut tx, id).await?);
            terminalize_step(&mut staged, &request, payload, now)?;
            let rounds_failed = fail_unresolved_rounds(&mut tx, id, &request.reason, now).await?;
            store(&mut tx, &staged).await?;
            tracing::info!(
                execution.id = id,
                rounds_failed,
                "terminalized execution after lease loss"
            );
            Ok(Terminalized {
                record: staged.into_record(),
                rounds_failed,
            })
        }
        .await;
        tx.finish(result).await
    }
}

/// Fails every unresolved round of the execution with `recovery_unavailable`, if the
/// managed-input tables exist (recovery never creates them).
async fn fail_unresolved_rounds(
    tx: &mut sqlx::SqliteConnection,
    execution_id: &str,
    reason: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    if !table_exists(tx, MANAGED_ROUNDS_TABLE).await? {
        return Ok(0);
    }
    crate::sqlite::recovery::fail_unresolved_in_tx(tx, execution_id, reason, now).await
}
