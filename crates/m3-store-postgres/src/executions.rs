//! [`PgExecutionStore`]: one row per execution in `m3rs_executions`, its event log in
//! `m3rs_execution_events`, and its own [`PgManagedInputStore`] on the same pool.
//!
//! Each mutation locks the execution row (`SELECT ... FOR UPDATE`, which also reads the
//! server clock), asks the shared [`rules`](m3_store::execution::rules), writes the record and
//! appends its events in one transaction; recovery fails the execution's unresolved rounds
//! in that same transaction.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Error, ExecutionStatus, Result};
use sqlx::{PgConnection, Postgres, Transaction};
use time::OffsetDateTime;

use super::PgManagedInputStore;
use super::connect::{PgStoreOptions, Shared, open};
use super::error::db;
use super::feed;
use super::subscriptions::PgRows;
use super::tokens::PgTokenRows;
use m3_store::changes::{ChangePage, PruneChanges, Pruned};
use m3_store::execution::rules::{StagedWrite, append_step, change_step, check_append, errors};
use m3_store::signal::{Change, ChangeKind, ChangeSignal};
use m3_store::subscriptions::RowSubscriptionStore;
use m3_store::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, ExecutionChange, ExecutionEvent,
    ExecutionLease, ExecutionLeaseRef, ExecutionRecord, ExecutionStore, FinishExecution,
    ListExecutions, ManagedInputStore, NewExecution, RenewLeases, TerminalizeExpired, Terminalized,
};

/// The PostgreSQL [`ExecutionStore`]; its
/// [`managed_input_store`](ExecutionStore::managed_input_store) is a
/// [`PgManagedInputStore`] on the same pool and schema. Clones share the pool.
///
/// ```no_run
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::{ExecutionStore, NewExecution};
/// use m3_store_postgres::PgExecutionStore;
///
/// let store = PgExecutionStore::open("postgres://m3@localhost/m3?sslmode=disable").await?;
/// let record = store.create_execution(NewExecution::new(serde_json::json!({}))).await?;
/// assert_eq!(store.list_events(&record.execution_id, None).await?.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PgExecutionStore {
    shared: Arc<Shared>,
}

pub(super) type Tx = Transaction<'static, Postgres>;

impl PgExecutionStore {
    /// Opens (creating and migrating) the store `url` names (see [`PgStoreOptions`]).
    ///
    /// # Errors
    /// `invalid_argument` for a bad URL; `storage_error` when the server is unreachable or
    /// its schema is newer than this build.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(PgStoreOptions::from_url(url)?).await
    }

    /// Opens the store `options` describe.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(options: PgStoreOptions) -> Result<Self> {
        Ok(Self {
            shared: Arc::new(open(options).await?),
        })
    }

    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Whether this store object's change listener is connected and `LISTEN`ing now (it is
    /// started by the first [`subscribe`](ChangeSignal::subscribe) of its
    /// [`change_signal`](ExecutionStore::change_signal), and reconnects after a loss).
    pub fn is_listening_for_changes(&self) -> bool {
        self.shared.signal.is_listening()
    }

    /// This store's managed-input store.
    pub fn rounds(&self) -> PgManagedInputStore {
        PgManagedInputStore::from_shared(Arc::clone(&self.shared))
    }

    pub(super) async fn begin(&self) -> Result<Tx> {
        self.shared
            .pool
            .begin()
            .await
            .map_err(db("cannot begin a transaction"))
    }

    /// Locks execution `id` in `tx`: its record and the operation's time.
    pub(super) async fn lock(
        &self,
        tx: &mut Tx,
        id: &str,
    ) -> Result<(ExecutionRecord, OffsetDateTime)> {
        let row = locked_row(tx, id).await?;
        let (stored, server_now) = row.ok_or_else(|| errors::not_found(id))?;
        Ok((decode(&stored)?, self.shared.now(server_now)))
    }

    /// Locks the row of `id` if there is one: its record (`None`: no such execution) and
    /// the store's now.
    pub(super) async fn lock_optional(
        &self,
        tx: &mut Tx,
        id: &str,
    ) -> Result<(Option<ExecutionRecord>, OffsetDateTime)> {
        let row = locked_row(tx, id).await?;
        let record = row.as_ref().map(|(stored, _)| decode(stored)).transpose()?;
        let now = match &row {
            Some((_, server_now)) => self.shared.now(*server_now),
            None => m3_store::store_now(self.shared.clock.as_ref()),
        };
        Ok((record, now))
    }

    /// Locks `id`, lets `step` change the record (marking it changed) and append events,
    /// and stores both if anything changed, in one transaction.
    pub(super) async fn mutate<T: Send>(
        &self,
        id: &str,
        step: impl FnOnce(&mut Pending, OffsetDateTime) -> Result<T> + Send,
    ) -> Result<T> {
        let mut tx = self.begin().await?;
        let (record, now) = self.lock(&mut tx, id).await?;
        let mut pending = Pending::new(record);
        let value = step(&mut pending, now)?;
        if pending.is_changed() {
            pending.store(&mut tx).await?;
            commit(tx).await?;
        }
        Ok(value)
    }
}

/// A record being changed and the events to append with it.
pub(super) type Pending = StagedWrite;

/// Writing a [`Pending`] change in the caller's transaction.
pub(super) trait Store {
    /// Writes the record and inserts the new events.
    async fn store(&self, conn: &mut PgConnection) -> Result<()>;
}

impl Store for Pending {
    async fn store(&self, conn: &mut PgConnection) -> Result<()> {
        save(conn, &self.record).await?;
        for event in self.events() {
            insert_event(conn, event).await?;
        }
        Ok(())
    }
}

pub(super) async fn locked_row(
    conn: &mut PgConnection,
    id: &str,
) -> Result<Option<(String, OffsetDateTime)>> {
    sqlx::query_as(
        "SELECT record_json, clock_timestamp() FROM m3rs_executions WHERE execution_id = $1 FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db("cannot read the execution"))
}

pub(super) async fn commit(tx: Tx) -> Result<()> {
    tx.commit().await.map_err(db("cannot commit the execution"))
}

pub(super) fn decode(stored: &str) -> Result<ExecutionRecord> {
    serde_json::from_str(stored)
        .map_err(|e| Error::storage(format!("stored execution record is invalid: {e}")))
}

pub(super) fn encode(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::storage(format!("cannot encode the execution: {e}")))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Writes every column of `record` over its row.
async fn save(conn: &mut PgConnection, record: &ExecutionRecord) -> Result<()> {
    sqlx::query(
        "UPDATE m3rs_executions SET lifecycle = $2, finished = $3, record_json = $4, \
         lease_token = $5, lease_expires_at = $6, updated_at = $7, cancel_requested_at = $8 \
         WHERE execution_id = $1",
    )
    .bind(&record.execution_id)
    .bind(record.lifecycle.as_str())
    .bind(record.is_finished())
    .bind(encode(record)?)
    .bind(record.lease.as_ref().map(|l| l.lease_token.as_str()))
    .bind(record.lease.as_ref().map(|l| l.expires_at))
    .bind(record.updated_at)
    // A column of its own so the change feed's trigger need not parse the record.
    .bind(record.cancel_requested_at)
    .execute(&mut *conn)
    .await
    .map_err(db("cannot write the execution"))?;
    Ok(())
}

pub(super) async fn insert_event(conn: &mut PgConnection, event: &ExecutionEvent) -> Result<()> {
    sqlx::query(
        "INSERT INTO m3rs_execution_events (execution_id, sequence, kind, payload_json, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&event.execution_id)
    .bind(to_i64(event.sequence))
    .bind(&event.kind)
    .bind(m3_types::canonical_json(&event.payload)?)
    .bind(event.timestamp)
    .execute(&mut *conn)
    .await
    .map_err(db("cannot append the execution event"))?;
    Ok(())
}

#[async_trait]
impl ExecutionStore for PgExecutionStore {
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        let done = self.do_create_execution(new).await;
        self.shared.announced(done, Change::of_execution).await
    }

    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>> {
        let stored: Option<String> =
            sqlx::query_scalar("SELECT record_json FROM m3rs_executions WHERE execution_id = $1")
                .bind(execution_id)
                .fetch_optional(&self.shared.pool)
                .await
                .map_err(db("cannot read the execution"))?;
        stored.as_deref().map(decode).transpose()
    }

    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record_json FROM m3rs_executions \
             WHERE ($1::text IS NULL OR lifecycle = $1) AND ($2::text IS NULL OR human_input = $2) \
             ORDER BY created_at, execution_id LIMIT $3",
        )
        .bind(query.lifecycle.map(ExecutionStatus::as_str))
        .bind(query.human_input.map(|h| h.as_str()))
        .bind(query.limit.map(i64::from))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db("cannot list the executions"))?;
        rows.iter().map(|stored| decode(stored)).collect()
    }

    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        let done = self.do_acquire_lease(request).await;
        self.shared
            .announced(done, |lease| {
                Change::new(lease.execution_id.clone(), ChangeKind::Execution)
            })
            .await
    }

    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
        let claimed = self.do_claim_queued(request).await?;
        if let Some(claimed) = &claimed {
            let change = Change::new(claimed.record.execution_id.clone(), ChangeKind::Execution);
            self.shared.signal.announce(&change).await;
        }
        Ok(claimed)
    }

    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
        self.do_renew_leases(&batch.leases, batch.ttl).await
    }

    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        let done = self.do_release_lease(lease).await;
        self.shared
            .announced(done, |()| {
                Change::new(lease.execution_id.clone(), ChangeKind::Execution)
            })
            .await
    }

    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
        let id = change.execution_id();
        let done = self.mutate(id, |pending, now| change_step(pending, &change, now));
        self.shared
            .announced(done.await, Change::of_execution)
            .await
    }

    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let (record, rounds_failed) = self.do_finish(request).await?;
        if rounds_failed > 0 {
            let rounds = Change::new(record.execution_id.clone(), ChangeKind::Round);
            self.shared.signal.announce(&rounds).await;
        }
        self.shared
            .announced(Ok(record), Change::of_execution)
            .await
    }

    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool> {
        let record = self.get_execution(execution_id).await?;
        let record = record.ok_or_else(|| errors::not_found(execution_id))?;
        Ok(record.is_cancel_requested())
    }

    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        check_append(&event)?;
        let id = event.execution_id.clone();
        self.mutate(&id, |pending, now| append_step(pending, event, now))
            .await
    }

    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>> {
        let rows: Vec<(String, i64, String, String, OffsetDateTime)> = sqlx::query_as(
            "SELECT execution_id, sequence, kind, payload_json, created_at FROM m3rs_execution_events \
             WHERE execution_id = $1 AND ($2::bigint IS NULL OR sequence > $2) ORDER BY sequence",
        )
        .bind(execution_id)
        .bind(after_sequence.map(to_i64))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db("cannot list the execution events"))?;
        rows.into_iter()
            .map(|(execution_id, sequence, kind, payload, timestamp)| {
                Ok(ExecutionEvent::new(
                    execution_id,
                    u64::try_from(sequence).unwrap_or_default(),
                    kind,
                    serde_json::from_str(&payload).map_err(|e| {
                        Error::storage(format!("stored event payload is invalid: {e}"))
                    })?,
                    timestamp,
                ))
            })
            .collect()
    }

    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
        // The expiry test runs in SQL, on the injected clock's time or else the server's.
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record_json FROM m3rs_executions \
             WHERE NOT finished AND lease_expires_at <= COALESCE($1, clock_timestamp()) \
             ORDER BY lease_expires_at, execution_id",
        )
        .bind(self.shared.injected_now())
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db("cannot list the expired leases"))?;
        rows.iter().map(|stored| decode(stored)).collect()
    }

    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
        let done = self.do_terminalize_expired(request).await?;
        if done.rounds_failed > 0 {
            let rounds = Change::new(done.record.execution_id.clone(), ChangeKind::Round);
            self.shared.signal.announce(&rounds).await;
        }
        self.shared
            .signal
            .announce(&Change::of_execution(&done.record))
            .await;
        Ok(done)
    }

    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        feed::read(&self.shared.pool, after, limit).await
    }

    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        feed::prune(&self.shared.pool, request).await
    }

    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        Ok(Arc::new(self.rounds()))
    }

    async fn subscription_store(
        &self,
    ) -> Result<Arc<dyn m3_store::subscriptions::SubscriptionStore>> {
        let rows = PgRows::new(self.shared.pool.clone(), Arc::clone(&self.shared.clock));
        Ok(Arc::new(RowSubscriptionStore::new(rows)))
    }

    async fn token_store(&self) -> Result<Arc<dyn m3_store::tokens::TokenStore>> {
        let rows = PgTokenRows::new(self.shared.pool.clone(), Arc::clone(&self.shared.clock));
        Ok(Arc::new(m3_store::tokens::RowTokenStore::new(rows)))
    }

    async fn worker_registry(&self) -> Result<Arc<dyn m3_store::workers::WorkerRegistry>> {
        let rows = crate::workers::PgWorkerRows::new(
            self.shared.pool.clone(),
            Arc::clone(&self.shared.clock),
        );
        Ok(Arc::new(m3_store::workers::RowWorkerRegistry::new(rows)))
    }

    async fn oauth_credential_rows(&self) -> Result<Arc<dyn m3_store::oauth::OAuthCredentialRows>> {
        Ok(Arc::new(super::oauth::PgOAuthRows::new(
            self.shared.pool.clone(),
        )))
    }

    async fn policy_store(&self) -> Result<Arc<dyn m3_store::policies::PolicyStore>> {
        let rows = super::policies::PgPolicyRows::new(
            self.shared.pool.clone(),
            Arc::clone(&self.shared.clock),
        );
        Ok(Arc::new(m3_store::policies::RowPolicyStore::new(rows)))
    }

    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool> {
        let round = m3_store::RoundRef::new(execution_id, round_id);
        let record = match self.rounds().get_round(&round).await? {
            Some(record) if record.status == m3_types::ManagedInputStatus::Pending => record,
            _ => return Ok(false),
        };
        let now = m3_store::store_now(self.shared.clock.as_ref());
        let change = m3_store::changes::rules::reminder_change(&record, reminder, now);
        let appended = super::policies::remind(&self.shared.pool, &change).await?;
        if appended {
            self.shared
                .signal
                .notify(&Change::new(execution_id, ChangeKind::Round));
        }
        Ok(appended)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// `LISTEN`/`NOTIFY` on the schema's channel (in-process only when
    /// [`PgStoreOptions::change_signal`] is off).
    fn change_signal(&self) -> Arc<dyn ChangeSignal> {
        Arc::clone(&self.shared.signal) as Arc<dyn ChangeSignal>
    }
}
