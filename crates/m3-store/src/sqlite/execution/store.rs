//! [`SqliteExecutionStore`]: opening, reads, leases, and the trait impl.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Error, Result, new_id, timestamp};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteSynchronous;
use time::OffsetDateTime;
use tokio::sync::OnceCell;
use tracing::instrument;

use super::probe::SqliteProbe;
use super::rows::{event_from_row, execution_from_row, select_execution};
use super::schema;
use super::writes::fetch;
use crate::ExecutionChange;
use crate::ExecutionStore;
use crate::changes::{ChangePage, PruneChanges, Pruned};
use crate::execution::record::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, ExecutionEvent, ExecutionLease,
    ExecutionLeaseRef, ExecutionRecord, FinishExecution, ListExecutions, NewExecution, RenewLeases,
    TerminalizeExpired, Terminalized,
};
use crate::execution::rules::change_step;
use crate::execution::rules::errors as error;
use crate::policies::{PolicyStore, RowPolicyStore};
use crate::signal::datagram::DatagramSignal;
use crate::signal::{Announce, Change, ChangeKind, ChangeProbe, ChangeSignal};
use crate::sqlite::SqliteStoreOptions;
use crate::sqlite::connect::{WriteTx, begin_write, open_pool};
use crate::sqlite::error::storage;
use crate::sqlite::feed;
use crate::sqlite::file::{WriteGate, write_gate};
use crate::sqlite::policies::SqlitePolicyRows;
use crate::sqlite::subscriptions::SqliteRows;
use crate::sqlite::tokens::SqliteTokenRows;
use crate::sqlite::workers::SqliteWorkerRows;
use crate::subscriptions::{RowSubscriptionStore, SubscriptionStore};
use crate::tokens::{RowTokenStore, TokenStore};
use crate::workers::{RowWorkerRegistry, WorkerRegistry};
use crate::{ManagedInputStore, SqliteManagedInputStore};

/// SQLite backend of [`ExecutionStore`].
///
/// One long-lived connection pool per object; cloning is cheap and clones
/// share the pool and the lazily resolved managed-input store. Several
/// objects (in one or several processes) may open the same file: every write
/// is a `BEGIN IMMEDIATE` transaction, so they serialize on SQLite's write
/// lock (waiting up to the busy timeout).
///
/// ```no_run
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::{ExecutionStore, NewExecution, SqliteExecutionStore};
///
/// let store = SqliteExecutionStore::open("/tmp/m3/m3.sqlite").await?;
/// let record = store
///     .create_execution(NewExecution::new(serde_json::json!({"prompt": "hi"})))
///     .await?;
/// assert_eq!(record.sequence, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteExecutionStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) path: PathBuf,
    pub(super) pool: SqlitePool,
    /// The file's in-process writer queue, shared with every store on the file.
    gate: Arc<WriteGate>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) managed: OnceCell<Arc<dyn ManagedInputStore>>,
    /// The webhook subscriptions, made (with their tables) on first use.
    subscriptions: OnceCell<Arc<dyn SubscriptionStore>>,
    /// The API tokens, made (with their table) on first use.
    tokens: OnceCell<Arc<dyn TokenStore>>,
    /// The worker registry, made (with its table) on first use.
    workers: OnceCell<Arc<dyn WorkerRegistry>>,
    /// The policies, made (with their table) on first use.
    policies: OnceCell<Arc<dyn PolicyStore>>,
    /// Where committed changes are announced (shared by every store on the file).
    pub(super) signal: Arc<DatagramSignal>,
    /// The connections' configured `synchronous`, for the managed-input store on the pool.
    pub(super) synchronous: SqliteSynchronous,
    /// The batched safety re-read of the file's execution waiters, attached to `signal`
    /// (which holds it weakly: it serves while this store lives).
    _probe: Arc<dyn ChangeProbe>,
}

impl SqliteExecutionStore {
    /// Opens (creating if needed) the execution store at `path` with default
    /// [`SqliteStoreOptions`].
    ///
    /// Creates missing parent directories and the file (mode `0600`) and the
    /// execution tables; never the managed-input tables (see
    /// [`ExecutionStore::managed_input_store`]).
    ///
    /// # Errors
    /// `managed_input_invalid` if the path is a symlink or not a regular file;
    /// `storage_error` if it cannot be created or opened.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteStoreOptions::new()).await
    }

    /// Opens the execution store at `path` with `options` (busy timeout,
    /// `synchronous`, pool size, clock).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteStoreOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() {
            return Err(Error::model_validation("database path must not be empty"));
        }
        let (pool, canonical) = open_pool(&path, &options).await?;
        let signal = DatagramSignal::for_database(&canonical, options.get_change_signal());
        let probe: Arc<dyn ChangeProbe> = Arc::new(SqliteProbe { pool: pool.clone() });
        signal.attach_probe(&probe);
        let store = Self {
            inner: Arc::new(Inner {
                path,
                pool,
                gate: write_gate(&canonical),
                clock: Arc::clone(options.get_clock()),
                managed: OnceCell::new(),
                subscriptions: OnceCell::new(),
                tokens: OnceCell::new(),
                workers: OnceCell::new(),
                policies: OnceCell::new(),
                signal,
                synchronous: options.get_synchronous(),
                _probe: probe,
            }),
        };
        let mut reader = store
            .inner
            .pool
            .acquire()
            .await
            .map_err(|e| storage("cannot acquire an execution-store connection", e))?;
        if !schema::is_current(&mut reader).await? {
            drop(reader);
            let mut write = store.begin_write().await?;
            let result = schema::initialize(&mut write).await;
            write.finish(result).await?;
        }
        tracing::debug!(path = %store.inner.path.display(), "opened execution store");
        Ok(store)
    }

    /// The database file this store uses.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The store's connection pool (shared with the lazily resolved
    /// managed-input store).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    pub(super) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Queues behind this process's other writers on the file (of either store), then opens
    /// `BEGIN IMMEDIATE`.
    pub(super) async fn begin_write(&self) -> Result<WriteTx> {
        begin_write(&self.inner.pool, &self.inner.gate).await
    }

    /// "Now" from the clock, in UTC, truncated to the stored microsecond
    /// precision (so returned values equal what a later read yields).
    pub(super) fn now(&self) -> OffsetDateTime {
        crate::store_now(self.inner.clock.as_ref())
    }
}

#[async_trait]
impl ExecutionStore for SqliteExecutionStore {
    #[instrument(skip_all, fields(execution.id), err)]
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        let execution_id = new.execution_id.clone().unwrap_or_else(new_id);
        tracing::Span::current().record("execution.id", execution_id.as_str());
        self.create(execution_id, new)
            .await
            .announce(self.signal(), Change::of_execution)
    }

    #[instrument(skip(self), err)]
    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>> {
        let mut conn = self.acquire().await?;
        fetch(&mut conn, execution_id).await
    }

    #[instrument(skip(self), err)]
    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
        let limit = query.limit.map_or(-1_i64, i64::from);
        let rows = sqlx::query(select_execution!(
            "WHERE (?1 IS NULL OR e.lifecycle = ?1) AND (?2 IS NULL OR e.human_input = ?2)
             ORDER BY e.created_at, e.id LIMIT ?3"
        ))
        .bind(query.lifecycle.map(|l| l.as_str()))
        .bind(query.human_input.map(|h| h.as_str()))
        .bind(limit)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(|e| storage("could not list executions", e))?;
        listed_executions(&rows)
    }

    #[instrument(skip_all, fields(execution.id = %request.execution_id, owner.id = %request.owner_id), err)]
    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        self.do_acquire_lease(request)
            .await
            .announce(self.signal(), |lease| {
                Change::new(lease.execution_id.clone(), ChangeKind::Execution)
            })
    }

    #[instrument(skip_all, fields(owner.id = %request.owner_id), err)]
    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
        let claimed = self.do_claim_queued(request).await;
        if let Ok(Some(claimed)) = &claimed {
            self.signal().notify(&Change::new(
                claimed.record.execution_id.clone(),
                ChangeKind::Execution,
            ));
        }
        claimed
    }

    #[instrument(skip_all, fields(leases = batch.leases.len()), err)]
    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
        self.renew_batch(&batch.leases, batch.ttl).await
    }

    #[instrument(skip_all, fields(execution.id = %lease.execution_id, owner.id = %lease.owner_id), err)]
    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        self.do_release_lease(lease)
            .await
            .announce(self.signal(), |()| {
                Change::new(lease.execution_id.clone(), ChangeKind::Execution)
            })
    }

    #[instrument(skip_all, fields(execution.id = %change.execution_id()), err)]
    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
        self.mutate(change.execution_id(), self.now(), |staged, now| {
            change_step(staged, &change, now)
        })
        .await
        .announce(self.signal(), Change::of_execution)
    }

    #[instrument(skip_all, fields(execution.id = %request.execution_id), err)]
    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let (record, rounds_failed) = self.do_finish(request).await?;
        if rounds_failed > 0 {
            let rounds = Change::new(record.execution_id.clone(), ChangeKind::Round);
            self.inner.signal.notify(&rounds);
        }
        Ok(record).announce(self.signal(), Change::of_execution)
    }

    #[instrument(skip(self), err)]
    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool> {
        let requested: Option<bool> = sqlx::query_scalar(
            "SELECT cancel_requested_at IS NOT NULL FROM m3rs_executions WHERE id = ?",
        )
        .bind(execution_id)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(|e| storage("could not read the cancel flag", e))?;
        requested.ok_or_else(|| error::not_found(execution_id))
    }

    #[instrument(skip_all, fields(execution.id = %event.execution_id, kind = %event.kind), err)]
    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        self.do_append_event(event).await
    }

    #[instrument(skip(self), err)]
    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>> {
        let after = match after_sequence {
            None => -1,
            Some(after) => i64::try_from(after).unwrap_or(i64::MAX),
        };
        let rows = sqlx::query(
            "SELECT execution_id, sequence, kind, payload_json, created_at
             FROM m3rs_execution_events WHERE execution_id = ? AND sequence > ?
             ORDER BY sequence",
        )
        .bind(execution_id)
        .bind(after)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(|e| storage("could not list events", e))?;
        rows.iter().map(event_from_row).collect()
    }

    #[instrument(skip(self), err)]
    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
        let now = self.now();
        let rows = sqlx::query(select_execution!(
            "WHERE e.finished_at IS NULL AND e.lease_token IS NOT NULL AND e.lease_expires_at <= ?
             ORDER BY e.lease_expires_at, e.id"
        ))
        .bind(timestamp::format(now))
        .fetch_all(&self.inner.pool)
        .await
        .map_err(|e| storage("could not list expired leases", e))?;
        Ok(recoverable_executions(&rows))
    }

    #[instrument(skip_all, fields(execution.id = %request.lease.execution_id), err)]
    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
        self.do_terminalize_expired(request)
            .await
            .announce(self.signal(), |done| {
                if done.rounds_failed > 0 {
                    self.inner.signal.notify(&Change::new(
                        done.record.execution_id.clone(),
                        ChangeKind::Round,
                    ));
                }
                Change::of_execution(&done.record)
            })
    }

    #[instrument(skip(self), err)]
    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        feed::read(&self.inner.pool, after, limit).await
    }

    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        let mut write = self.begin_write().await?;
        let result = feed::prune(&mut write, request).await;
        write.finish(result).await
    }

    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        self.inner().managed_input_store().await
    }

    async fn subscription_store(&self) -> Result<Arc<dyn SubscriptionStore>> {
        let inner = self.inner();
        let store = inner
            .subscriptions
            .get_or_try_init(|| async {
                let rows = SqliteRows::open(inner.pool.clone(), Arc::clone(&inner.clock)).await?;
                Ok::<_, Error>(
                    Arc::new(RowSubscriptionStore::new(rows)) as Arc<dyn SubscriptionStore>
                )
            })
            .await?;
        Ok(Arc::clone(store))
    }

    async fn worker_registry(&self) -> Result<Arc<dyn WorkerRegistry>> {
        let inner = self.inner();
        let registry = inner
            .workers
            .get_or_try_init(|| async {
                let rows =
                    SqliteWorkerRows::open(inner.pool.clone(), Arc::clone(&inner.clock)).await?;
                Ok::<_, Error>(Arc::new(RowWorkerRegistry::new(rows)) as Arc<dyn WorkerRegistry>)
            })
            .await?;
        Ok(Arc::clone(registry))
    }

    async fn token_store(&self) -> Result<Arc<dyn TokenStore>> {
        let inner = self.inner();
        let store = inner
            .tokens
            .get_or_try_init(|| async {
                let rows =
                    SqliteTokenRows::open(inner.pool.clone(), Arc::clone(&inner.clock)).await?;
                Ok::<_, Error>(Arc::new(RowTokenStore::new(rows)) as Arc<dyn TokenStore>)
            })
            .await?;
        Ok(Arc::clone(store))
    }

    async fn oauth_credential_rows(&self) -> Result<Arc<dyn crate::oauth::OAuthCredentialRows>> {
        let rows = crate::sqlite::oauth::SqliteOAuthRows::open(self.inner().pool.clone()).await?;
        Ok(Arc::new(rows))
    }

    async fn policy_store(&self) -> Result<Arc<dyn PolicyStore>> {
        let inner = self.inner();
        let store = inner
            .policies
            .get_or_try_init(|| async {
                let rows =
                    SqlitePolicyRows::open(inner.pool.clone(), Arc::clone(&inner.clock)).await?;
                Ok::<_, Error>(Arc::new(RowPolicyStore::new(rows)) as Arc<dyn PolicyStore>)
            })
            .await?;
        Ok(Arc::clone(store))
    }

    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool> {
        let rounds = self.managed_input_store().await?;
        let round = crate::RoundRef::new(execution_id, round_id);
        let record = match rounds.get_round(&round).await? {
            Some(record) if record.status == m3_types::ManagedInputStatus::Pending => record,
            _ => return Ok(false),
        };
        let change = crate::changes::rules::reminder_change(&record, reminder, self.now());
        let mut write = self.begin_write().await?;
        let result = crate::sqlite::reminders::remind(&mut write, &change).await;
        let appended = write.finish(result).await?;
        if appended {
            self.inner
                .signal
                .notify(&Change::new(execution_id, ChangeKind::Round));
        }
        Ok(appended)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// The file's signal: a Unix datagram to each waiting process after each commit
    /// (in-process only when [`SqliteStoreOptions::change_signal`] is off).
    fn change_signal(&self) -> Arc<dyn ChangeSignal> {
        Arc::clone(&self.inner.signal) as Arc<dyn ChangeSignal>
    }
}

/// Every row, decoded, for a listing someone reads: the first unreadable row fails the
/// listing with its `storage_error` (`stored_record_invalid`, naming the execution and the
/// column), as on PostgreSQL. A listing never leaves a row out without saying so.
fn listed_executions(rows: &[sqlx::sqlite::SqliteRow]) -> Result<Vec<ExecutionRecord>> {
    rows.iter().map(execution_from_row).collect()
}

/// The rows that decode, for recovery: each one that does not is reported (a warning
/// naming it) and skipped, so one bad row never stops recovery of the others (it cannot
/// be recovered without its lease columns anyway; listings report it, see
/// [`listed_executions`]).
fn recoverable_executions(rows: &[sqlx::sqlite::SqliteRow]) -> Vec<ExecutionRecord> {
    rows.iter()
        .filter_map(|row| match execution_from_row(row) {
            Ok(record) => Some(record),
            Err(error) => {
                tracing::warn!(%error, details = ?error.details(), "skipped an unreadable execution row");
                None
            }
        })
        .collect()
}

impl SqliteExecutionStore {
    fn signal(&self) -> &dyn ChangeSignal {
        self.inner.signal.as_ref()
    }

    async fn acquire(&self) -> Result<sqlx::pool::PoolConnection<sqlx::Sqlite>> {
        self.inner
            .pool
            .acquire()
            .await
            .map_err(|e| storage("could not acquire a connection", e))
    }
}

impl Inner {
    /// The managed-input store, created (with its tables, on its own first operation) the
    /// first time it is asked for, on the same file, pool, clock and signal: never when the
    /// execution store is opened and never when an execution is created, so a store that
    /// never runs managed work never gains the managed-input tables. Concurrent first
    /// callers share one initialization.
    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        let store = self
            .managed
            .get_or_try_init(|| async {
                let store = SqliteManagedInputStore::from_pool_with_signal(
                    self.pool.clone(),
                    Arc::clone(&self.clock),
                    Arc::clone(&self.signal),
                    self.synchronous,
                );
                tracing::debug!(path = %self.path.display(), "resolved the managed-input store");
                Ok::<_, Error>(Arc::new(store) as Arc<dyn ManagedInputStore>)
            })
            .await?;
        Ok(Arc::clone(store))
    }
}
