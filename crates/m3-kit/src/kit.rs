//! [`AsyncMcpTestKit`] and its builder.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use m3_runtime::{AgentSelection, RecoveryReport, ResponseNotifier, Worker};
use m3_store::{CombinedStore, ExecutionStore, ListExecutions, ManagedInputStore};
use m3_types::{
    Error, ExecutionState, HumanInput, ManagedInputStatus, PendingElicitationRound, Result,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::AsyncAgent;
use crate::handle::AsyncExecutionHandle;

/// Shared state of a kit, its agents and handles.
#[derive(Debug)]
pub(crate) struct KitInner {
    pub(crate) store: Arc<dyn ExecutionStore>,
    pub(crate) persistent: bool,
    pub(crate) worker: Worker,
    pub(crate) notifier: Arc<ResponseNotifier>,
    pub(crate) tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
    pub(crate) local: Mutex<HashMap<String, CancellationToken>>,
}

impl KitInner {
    /// The local cancellation token of an execution this kit runs.
    pub(crate) fn local_token(&self, execution_id: &str) -> Option<CancellationToken> {
        self.local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(execution_id)
            .cloned()
    }

    /// Starts the worker for `execution_id` in the background.
    pub(crate) fn spawn_worker(self: &Arc<Self>, execution_id: &str) {
        let token = self.shutdown.child_token();
        self.local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(execution_id.to_owned(), token.clone());
        let inner = Arc::clone(self);
        let id = execution_id.to_owned();
        self.tasks.spawn(async move {
            if let Err(error) = inner.worker.run(&id, token).await {
                tracing::warn!(execution.id = %id, %error, "execution worker ended with an error");
            }
            inner
                .local
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
    }
}

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
    pub fn changes(&self, topic: m3_store::signal::Topic) -> m3_store::signal::ChangeSubscription {
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
    /// # Errors
    /// `not_found` for an unknown id;
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn attach(&self, execution_id: &str) -> Result<AsyncExecutionHandle> {
        let record = self
            .inner
            .store
            .get_execution(execution_id)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!("execution '{execution_id}' does not exist"))
                    .with_detail("execution_id", execution_id)
            })?;
        Ok(AsyncExecutionHandle::new(
            Arc::clone(&self.inner),
            execution_id.to_owned(),
            record.human_input,
        ))
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
                    .map(|r| r.pending),
            );
        }
        pending.sort_by(|a, b| (a.created_at, &a.round_id).cmp(&(b.created_at, &b.round_id)));
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
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        Ok(())
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

    /// Opens the store `url` names when building ([`m3_store::open`]: `memory:`, a
    /// backend URL such as `sqlite://PATH`, or a plain database path).
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

    /// Whether opening runs [`AsyncMcpTestKit::recover`] (default true).
    pub fn recover_on_open(mut self, yes: bool) -> Self {
        self.skip_recovery = !yes;
        self
    }

    /// Opens the store and runs recovery.
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
            (None, Some(url)) => m3_store::open(&url).await?,
            (None, None) => m3_store::open("memory:").await?,
        };
        if let Some(rounds) = self.rounds {
            store = Arc::new(CombinedStore::new(store, rounds));
        }
        let persistent = store.is_persistent();
        let notifier = ResponseNotifier::new();
        let worker = Worker::new(Arc::clone(&store), Arc::clone(&notifier), self.env);
        let kit = AsyncMcpTestKit {
            inner: Arc::new(KitInner {
                store,
                persistent,
                worker,
                notifier,
                tasks: TaskTracker::new(),
                shutdown: CancellationToken::new(),
                local: Mutex::new(HashMap::new()),
            }),
        };
        if !self.skip_recovery {
            let report = kit.recover().await?;
            if !report.executions.is_empty() {
                tracing::info!(
                    count = report.executions.len(),
                    "recovered executions on open"
                );
            }
        }
        Ok(kit)
    }
}
