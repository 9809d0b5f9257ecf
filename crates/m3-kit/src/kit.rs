//! [`AsyncMcpTestKit`] and its builder.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use m3_runtime::{
    AgentSelection, PoolOptions, RecoveryReport, ResponseNotifier, SweepOptions, Worker,
    WorkerPool, spawn_sweep,
};
use m3_store::oauth::{CredentialKey, SealedOAuthCredentials};
use m3_store::{
    ChangePage, CombinedStore, ExecutionStore, ListExecutions, ManagedInputStore, PruneChanges,
    Pruned,
};
use m3_types::{
    Actor, ActorSurface, ChangeRecord, Cursor, Error, ExecutionState, HumanInput,
    ManagedInputStatus, PendingElicitationRound, Result, RoundLimits,
};
use tokio_util::sync::CancellationToken;

use crate::agent::AsyncAgent;
use crate::handle::AsyncExecutionHandle;
use crate::shared::KitInner;

/// The async test kit: submits agent executions, runs them in background
/// workers, and gives handles to read and answer their elicitation rounds.
///
/// Cheap to clone (an `Arc` inside). Build it with [`AsyncMcpTestKit::builder`];
/// opening a kit on a store runs [`recover`](Self::recover) first.
///
/// ```no_run
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_kit::AsyncMcpTestKit;
/// let kit = AsyncMcpTestKit::builder().database("executions.sqlite").build().await?;
/// // kit.agents([...])?[0].submit(...).await?
/// kit.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AsyncMcpTestKit {
    pub(crate) inner: Arc<KitInner>,
}

/// Summary of one stored execution, from [`AsyncMcpTestKit::executions`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ExecutionSummary {
    /// Lifecycle, outcome and timestamps.
    pub state: ExecutionState,
    /// `fail` or `managed`.
    pub human_input: HumanInput,
    /// How many rounds are `pending`.
    pub pending_rounds: usize,
}

impl AsyncMcpTestKit {
    /// A builder; without a store the kit uses a fresh in-memory store, which
    /// is not persistent (managed input is then refused).
    pub fn builder() -> AsyncMcpTestKitBuilder {
        AsyncMcpTestKitBuilder::default()
    }

    /// The kit's execution store.
    pub fn store(&self) -> &Arc<dyn ExecutionStore> {
        &self.inner.store
    }

    /// A subscription to the store's change signal for `topic`: await
    /// [`changed`](m3_store::signal::ChangeSubscription::changed), then re-read (it wakes
    /// after each matching commit of any process, and at least every second).
    pub fn change_subscription(
        &self,
        topic: m3_store::signal::Topic,
    ) -> m3_store::signal::ChangeSubscription {
        self.inner.store.change_signal().subscribe(topic)
    }

    /// Whether the store outlives the kit (a store or path was given).
    pub fn is_persistent(&self) -> bool {
        self.inner.persistent
    }

    /// Agents for `selections`, in order.
    ///
    /// # Errors
    /// `invalid_argument` for an invalid selection (a malformed script, a codex
    /// selection without a model).
    pub fn agents(
        &self,
        selections: impl IntoIterator<Item = AgentSelection>,
    ) -> Result<Vec<AsyncAgent>> {
        selections
            .into_iter()
            .map(|selection| {
                selection.validate()?;
                Ok(AsyncAgent {
                    kit: Arc::clone(&self.inner),
                    selection,
                })
            })
            .collect()
    }

    /// A handle for an execution submitted by any process (to read its rounds,
    /// respond, wait or cancel).
    ///
    /// An id with no execution record but with rounds in the managed-input store (rounds
    /// another implementation of M3 wrote, such as the Python one, sf-m3, on a shared
    /// database) gets a managed handle too: its rounds can be read and answered (through the
    /// store, under the round's own lease, as the Python handle does), while the
    /// execution-level calls (`snapshot`, `result`, `cancel`) say `not_found`.
    ///
    /// # Errors
    /// `not_found` for an id with neither an execution record nor rounds;
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn attach(&self, execution_id: &str) -> Result<AsyncExecutionHandle> {
        let human_input = match self.inner.store.get_execution(execution_id).await? {
            Some(record) => record.human_input,
            None if self.has_rounds(execution_id).await? => HumanInput::Managed,
            None => {
                return Err(
                    Error::not_found(format!("execution '{execution_id}' does not exist"))
                        .with_detail("execution_id", execution_id),
                );
            }
        };
        Ok(AsyncExecutionHandle::new(
            Arc::clone(&self.inner),
            execution_id.to_owned(),
            human_input,
        ))
    }

    /// Whether the managed-input store holds any round of `execution_id` (readable or not).
    async fn has_rounds(&self, execution_id: &str) -> Result<bool> {
        if execution_id.is_empty() {
            return Ok(false);
        }
        let scan = self
            .inner
            .store
            .managed_input_store()
            .await?
            .scan_rounds(execution_id)
            .await?;
        Ok(!(scan.rounds.is_empty() && scan.unreadable.is_empty()))
    }

    /// Every stored execution, oldest first.
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn executions(&self) -> Result<Vec<ExecutionSummary>> {
        self.executions_where(ListExecutions::new()).await
    }

    /// The stored executions that `query` selects (lifecycle, human input,
    /// limit), oldest first.
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn executions_where(&self, query: ListExecutions) -> Result<Vec<ExecutionSummary>> {
        let records = self.inner.store.list_executions(query).await?;
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            let pending_rounds = if record.human_input == HumanInput::Managed {
                let store = self.inner.store.managed_input_store().await?;
                store
                    .list_rounds(&record.execution_id)
                    .await?
                    .iter()
                    .filter(|r| r.status == ManagedInputStatus::Pending)
                    .count()
            } else {
                0
            };
            out.push(ExecutionSummary {
                state: record.state(),
                human_input: record.human_input,
                pending_rounds,
            });
        }
        Ok(out)
    }

    /// The store's change feed: up to `limit` records after `after`, oldest first
    /// (`docs/changes.md`). Keep the page's `next` and read again from it: a reader that
    /// resumes from the last cursor it processed sees every record exactly once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> m3_kit::Result<()> {
    /// use m3_kit::{AsyncMcpTestKit, Cursor};
    ///
    /// let kit = AsyncMcpTestKit::builder().build().await?;
    /// let page = kit.read_changes(Cursor::START, 100).await?;
    /// assert!(page.records.is_empty());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`ExecutionStore::read_changes`]: `invalid_argument` for a bad page size or a
    /// cursor beyond the newest record, `cursor_expired` behind what retention removed,
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        self.inner.store.read_changes(after, limit).await
    }

    /// Retention of the change feed: removes (or, with
    /// [`PruneChanges::dry_run`], counts) the records older than `request.before`, and
    /// nothing else (`docs/changes.md`).
    ///
    /// # Errors
    /// As [`ExecutionStore::prune_changes`].
    pub async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        self.inner.store.prune_changes(request).await
    }

    /// Who answers when an answer names nobody (see [`AsyncMcpTestKitBuilder::actor`]).
    pub fn actor(&self) -> &Actor {
        &self.inner.actor
    }

    /// "Now" on the store's clock (what the store stamps its changes with).
    pub fn now(&self) -> time::OffsetDateTime {
        m3_store::store_now(self.inner.store.clock().as_ref())
    }

    /// The change feed as a live stream: every record after `after`, then each new one as
    /// it commits, in any process on the store ([`m3_store::changes::follow`]). The stream
    /// does not end by itself; an error ends it after it is yielded (resume from the last
    /// record you processed).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> m3_kit::Result<()> {
    /// use futures_util::StreamExt;
    /// use m3_kit::{AsyncMcpTestKit, Cursor};
    ///
    /// let kit = AsyncMcpTestKit::builder().build().await?;
    /// let mut changes = Box::pin(kit.changes(Cursor::START));
    /// # let id = kit.store().create_execution(m3_store::NewExecution::new(serde_json::json!({}))).await?.execution_id;
    /// # kit.store().request_cancel(&id, None).await?;
    /// if let Some(record) = changes.next().await {
    ///     let record = record?;
    ///     println!("{} {} {}", record.cursor, record.kind, record.execution_id);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn changes(
        &self,
        after: Cursor,
    ) -> impl futures_util::Stream<Item = Result<ChangeRecord>> + Send + 'static {
        m3_store::changes::follow(Arc::clone(&self.inner.store), after)
    }

    /// The inbox: every pending round of every execution, oldest first
    /// (by creation time, then round id).
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn pending_rounds(&self) -> Result<Vec<PendingElicitationRound>> {
        Ok(self
            .pending_rounds_in_context()
            .await?
            .into_iter()
            .map(|pending| pending.round)
            .collect())
    }

    /// [`pending_rounds`](Self::pending_rounds), each with its context: the operation's
    /// arguments and the agent's prompt, redacted (what the page shows above a form and
    /// `m3 pending` prints).
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn pending_rounds_in_context(&self) -> Result<Vec<crate::PendingRound>> {
        let records = self
            .inner
            .store
            .list_executions(ListExecutions::new())
            .await?;
        let mut pending = Vec::new();
        for record in records {
            if record.human_input != HumanInput::Managed || record.is_finished() {
                continue;
            }
            let store = self.inner.store.managed_input_store().await?;
            pending.extend(
                store
                    .list_rounds(&record.execution_id)
                    .await?
                    .into_iter()
                    .filter(|r| r.status == ManagedInputStatus::Pending)
                    .map(|r| crate::PendingRound::of(r, &record.spec)),
            );
        }
        pending.sort_by(|a, b| {
            (a.round.created_at, &a.round.round_id).cmp(&(b.round.created_at, &b.round.round_id))
        });
        Ok(pending)
    }

    /// Terminalizes executions whose worker lease expired (see
    /// [`m3_runtime::recover`]).
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Dropped mid-way, some executions may already be terminalized (each one in its own
    /// transaction); running it again finishes the rest and reports only those.
    pub async fn recover(&self) -> Result<RecoveryReport> {
        m3_runtime::recover(&*self.inner.store).await
    }

    /// Cancels the executions this kit runs and waits for their workers to
    /// record the outcome (`cancelled`).
    ///
    /// # Errors
    /// None today; the `Result` leaves room for cleanup failures.
    ///
    /// # Cancel safety
    ///
    /// Not meant for `select!`: dropped mid-way, background workers may still be stopping; the kit
    /// is consumed either way.
    pub async fn close(self) -> Result<()> {
        if let Some(pool) = &self.inner.pool {
            pool.close().await;
        }
        self.inner.sweep_stop.cancel();
        Ok(())
    }

    /// The embedded worker pool (`None` for a kit built with `embedded_worker(false)`).
    pub fn worker_pool(&self) -> Option<&WorkerPool> {
        self.inner.pool.as_ref()
    }
}

/// Recovery at open is best-effort: a store that cannot take a write now (another process
/// holds the write lock past the busy timeout) is opened anyway, so reading never fails
/// because of it; the next open or an explicit [`AsyncMcpTestKit::recover`] catches up.
async fn recover_best_effort(kit: &AsyncMcpTestKit) -> Result<()> {
    match kit.recover().await {
        Ok(report) if !report.executions.is_empty() => {
            tracing::info!(
                count = report.executions.len(),
                "recovered executions on open"
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(error) if error.is_storage() => {
            tracing::warn!(%error, "recovery on open skipped: the store cannot be written now");
            Ok(())
        }
        Err(error) => Err(error),
    }
}

/// Builder of [`AsyncMcpTestKit`]; every setter documents its default.
#[derive(Debug, Default)]
#[must_use]
pub struct AsyncMcpTestKitBuilder {
    store: Option<Arc<dyn ExecutionStore>>,
    url: Option<String>,
    rounds: Option<Arc<dyn ManagedInputStore>>,
    env: BTreeMap<String, String>,
    skip_recovery: bool,
    no_embedded_worker: bool,
    pool: Option<PoolOptions>,
    sweep: Option<Option<SweepOptions>>,
    round_limits: RoundLimits,
    oauth: Option<m3_runtime::oauth::OAuthContext>,
    oauth_keys: Option<(CredentialKey, Option<CredentialKey>)>,
    actor: Option<Actor>,
}

impl AsyncMcpTestKitBuilder {
    /// Uses `store` (default: a fresh in-memory store, which is not persistent, so managed
    /// input is refused).
    pub fn store(mut self, store: impl ExecutionStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Uses an already shared store.
    pub fn shared_store(mut self, store: Arc<dyn ExecutionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Opens the store `url` names when building ([`open_store`](crate::open_store):
    /// `memory:`, a backend URL such as `sqlite://PATH` or, with feature `postgres`,
    /// `postgres://...`, or a plain database path).
    pub fn database(mut self, url: impl AsRef<Path>) -> Self {
        self.url = Some(url.as_ref().to_string_lossy().into_owned());
        self
    }

    /// Keeps managed-input rounds in `rounds` instead of the execution store's own
    /// managed-input store (executions stay in the execution store; recovery fails the
    /// unresolved rounds of `rounds`, see [`CombinedStore`]).
    pub fn managed_input_store(mut self, rounds: Arc<dyn ManagedInputStore>) -> Self {
        self.rounds = Some(rounds);
        self
    }

    /// Environment added to every server process (default: empty; a binding's
    /// own `env` wins, and nothing else is inherited).
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }

    /// Bounds on every round a server sends to this kit's embedded worker (default
    /// [`RoundLimits::new`]: 16 requests, 8 KiB message, 32 KiB schema, 64 KiB per
    /// request). A round over one fails its operation with `protocol_error` before it is
    /// stored. Nesting depth and answer size are fixed bounds (see [`m3_types::limits`]).
    pub fn round_limits(mut self, limits: RoundLimits) -> Self {
        self.round_limits = limits;
        self
    }

    /// Where the embedded worker keeps the OAuth tokens of HTTP servers and who is shown
    /// an authorization URL (default [`OAuthContext::new`](m3_runtime::oauth::OAuthContext::new):
    /// tokens in memory, nobody to show a URL to; see `docs/oauth.md`).
    pub fn oauth(mut self, oauth: m3_runtime::oauth::OAuthContext) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Keep the OAuth tokens of HTTP servers in the store, sealed with `key` (and opened
    /// with `previous` too, during a key rotation), so every worker on the store shares
    /// them. A store that cannot keep them (`unsupported`) leaves them in memory.
    pub fn oauth_key(mut self, key: CredentialKey, previous: Option<CredentialKey>) -> Self {
        self.oauth_keys = Some((key, previous));
        self
    }

    /// Who answers when an answer names nobody ([`respond_elicitation`], [`respond_round`]):
    /// recorded with the response, shown wherever the round is read, carried by the
    /// `round.answered` change record (default: the operating-system user running the
    /// process, surface `kit`; see [`Actor::of_process_user`]).
    ///
    /// [`respond_elicitation`]: crate::AsyncExecutionHandle::respond_elicitation
    /// [`respond_round`]: AsyncMcpTestKit::respond_round
    pub fn actor(mut self, actor: Actor) -> Self {
        self.actor = Some(actor);
        self
    }

    /// Whether opening runs [`AsyncMcpTestKit::recover`] (default true).
    pub fn recover_on_open(mut self, yes: bool) -> Self {
        self.skip_recovery = !yes;
        self
    }

    /// Whether the kit runs its own submissions in an embedded worker (default true). With
    /// `false` the kit only queues: any `m3 worker` (or other kit's pool that claims the
    /// queue) on the store runs them. Either way the kit sweeps recovery periodically.
    pub fn embedded_worker(mut self, yes: bool) -> Self {
        self.no_embedded_worker = !yes;
        self
    }

    /// The embedded worker's settings (default [`PoolOptions::default`]: no concurrency
    /// limit, only the kit's own submissions, the default recovery sweep). With
    /// `claim_queue(true)` the kit also runs executions queued by other processes.
    pub fn worker_options(mut self, options: PoolOptions) -> Self {
        self.pool = Some(options);
        self
    }

    /// The periodic recovery sweep (default: every 15 s, half the default lease; `None`: no
    /// sweep, recovery runs only on open and through [`AsyncMcpTestKit::recover`]). Overrides
    /// the sweep of [`worker_options`](Self::worker_options).
    pub fn recovery_sweep(mut self, sweep: Option<SweepOptions>) -> Self {
        self.sweep = Some(sweep);
        self
    }

    /// Opens the store and runs recovery (best-effort: skipped when the store cannot be
    /// written now, for example while another process holds its write lock).
    ///
    /// # Errors
    /// `storage_error` (and the store's open errors).
    ///
    /// # Cancel safety
    ///
    /// Dropped mid-way, nothing is left open; recovery on open may have terminalized some
    /// executions (idempotent, see `recover`).
    pub async fn build(self) -> Result<AsyncMcpTestKit> {
        let mut store: Arc<dyn ExecutionStore> = match (self.store, self.url) {
            (Some(store), _) => store,
            (None, Some(url)) => crate::open_store(&url).await?,
            (None, None) => crate::open_store("memory:").await?,
        };
        if let Some(rounds) = self.rounds {
            store = Arc::new(CombinedStore::new(store, rounds));
        }
        let persistent = store.is_persistent();
        let notifier = ResponseNotifier::new();
        let mut options = self.pool.unwrap_or_default();
        if let Some(sweep) = self.sweep {
            options = options.sweep(sweep);
        }
        let sweep_stop = CancellationToken::new();
        let pool = if self.no_embedded_worker {
            if let Some(sweep) = options.sweep.clone() {
                spawn_sweep(Arc::clone(&store), sweep, sweep_stop.clone());
            }
            None
        } else {
            let mut worker = Worker::new(Arc::clone(&store), Arc::clone(&notifier), self.env)
                .with_round_limits(self.round_limits);
            if let Some(oauth) = oauth_context(&store, self.oauth, self.oauth_keys).await? {
                worker = worker.with_oauth(oauth);
            }
            Some(WorkerPool::start(worker, options)?)
        };
        let kit = AsyncMcpTestKit {
            inner: Arc::new(KitInner {
                store,
                persistent,
                notifier,
                pool,
                sweep_stop,
                actor: self
                    .actor
                    .unwrap_or_else(|| Actor::of_process_user(ActorSurface::Kit)),
            }),
        };
        if !self.skip_recovery {
            recover_best_effort(&kit).await?;
        }
        Ok(kit)
    }
}

/// The worker's OAuth context: `oauth` (or the default), its tokens in the store sealed
/// with `keys` when given and the store keeps credentials.
async fn oauth_context(
    store: &Arc<dyn ExecutionStore>,
    oauth: Option<m3_runtime::oauth::OAuthContext>,
    keys: Option<(CredentialKey, Option<CredentialKey>)>,
) -> Result<Option<m3_runtime::oauth::OAuthContext>> {
    let Some((key, previous)) = keys else {
        return Ok(oauth);
    };
    let rows = match store.oauth_credential_rows().await {
        Ok(rows) => rows,
        Err(error) if error.error_code() == m3_types::ErrorCode::Unsupported => {
            tracing::info!("this store keeps no OAuth credentials; tokens stay in memory");
            return Ok(oauth);
        }
        Err(error) => return Err(error),
    };
    let mut sealed = SealedOAuthCredentials::new(rows, key);
    if let Some(previous) = previous {
        sealed = sealed.with_previous_key(previous);
    }
    let tokens = Arc::new(m3_runtime::StoreOAuthTokens::new(sealed));
    Ok(Some(oauth.unwrap_or_default().with_store(tokens)))
}
