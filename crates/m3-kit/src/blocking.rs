//! The blocking facade: [`McpTestKit`] owns a tokio runtime and wraps
//! [`AsyncMcpTestKit`], reqwest-style.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_runtime::{AgentSelection, RecoveryReport};
use m3_store::{ChangePage, ExecutionEvent, ExecutionStore};
use m3_types::{
    ChangeRecord, Cursor, Error, ExecutionResult, ExecutionState, PendingElicitationRound,
    ResponseMap, Result,
};
use tokio::runtime::Runtime;

use crate::agent::AsyncAgent;
use crate::handle::{AsyncExecutionHandle, RoundDiagnostics};
use crate::kit::{AsyncMcpTestKit, AsyncMcpTestKitBuilder, ExecutionSummary};
use crate::options::SubmitOptions;

/// The runtime and the async kit; dropping the last reference closes the kit
/// (cancelling its executions) and shuts the runtime down.
#[derive(Debug)]
struct Inner {
    runtime: Mutex<Option<Runtime>>,
    kit: AsyncMcpTestKit,
}

impl Inner {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        let handle = self
            .runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|rt| rt.handle().clone());
        match handle {
            Some(handle) => handle.block_on(future),
            None => runtime_gone(),
        }
    }
}

/// The blocking iterator of [`McpTestKit::changes`]: each `next` waits for the next
/// record; after an error it ends.
pub struct Changes {
    inner: Arc<Inner>,
    stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<ChangeRecord>> + Send>>,
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes").finish_non_exhaustive()
    }
}

impl Iterator for Changes {
    type Item = Result<ChangeRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        use futures_util::StreamExt;
        self.inner.block_on(self.stream.next())
    }
}

#[cold]
fn runtime_gone() -> ! {
    // Broken invariant: `Inner` only drops its runtime in `Drop`.
    #[expect(
        clippy::panic,
        reason = "the runtime is only taken in Drop; reaching this is a bug"
    )]
    {
        panic!("m3-kit runtime is gone")
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(runtime) = self
            .runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            let kit = self.kit.clone();
            let _ = runtime.block_on(kit.close());
            runtime.shutdown_timeout(Duration::from_secs(2));
        } else {
            runtime.shutdown_background();
        }
    }
}

/// The blocking test kit. It owns a multi-threaded tokio runtime (threads named
/// `m3-kit-runtime`) that also runs the executions' workers in the background.
///
/// # Panics
/// Every blocking method panics when called from inside an async runtime (use
/// [`AsyncMcpTestKit`] there), like `reqwest::blocking`.
#[derive(Debug, Clone)]
pub struct McpTestKit {
    inner: Arc<Inner>,
}

/// Builder of [`McpTestKit`]; it holds the async builder, so options are the same.
#[derive(Debug, Default)]
#[must_use]
pub struct McpTestKitBuilder {
    inner: AsyncMcpTestKitBuilder,
}

impl McpTestKitBuilder {
    /// See [`AsyncMcpTestKitBuilder::store`].
    pub fn store(self, store: impl ExecutionStore) -> Self {
        Self {
            inner: self.inner.store(store),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::actor`].
    pub fn actor(self, actor: m3_types::Actor) -> Self {
        Self {
            inner: self.inner.actor(actor),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::shared_store`].
    pub fn shared_store(self, store: Arc<dyn ExecutionStore>) -> Self {
        Self {
            inner: self.inner.shared_store(store),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::database`].
    pub fn database(self, url: impl AsRef<Path>) -> Self {
        Self {
            inner: self.inner.database(url),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::managed_input_store`].
    pub fn managed_input_store(self, rounds: Arc<dyn m3_store::ManagedInputStore>) -> Self {
        Self {
            inner: self.inner.managed_input_store(rounds),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::env`].
    pub fn env(self, env: BTreeMap<String, String>) -> Self {
        Self {
            inner: self.inner.env(env),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::round_limits`].
    pub fn round_limits(self, limits: m3_types::RoundLimits) -> Self {
        Self {
            inner: self.inner.round_limits(limits),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::oauth`].
    pub fn oauth(self, oauth: m3_runtime::oauth::OAuthContext) -> Self {
        Self {
            inner: self.inner.oauth(oauth),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::oauth_key`].
    pub fn oauth_key(
        self,
        key: m3_store::oauth::CredentialKey,
        previous: Option<m3_store::oauth::CredentialKey>,
    ) -> Self {
        Self {
            inner: self.inner.oauth_key(key, previous),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::recover_on_open`].
    pub fn recover_on_open(self, yes: bool) -> Self {
        Self {
            inner: self.inner.recover_on_open(yes),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::embedded_worker`].
    pub fn embedded_worker(self, yes: bool) -> Self {
        Self {
            inner: self.inner.embedded_worker(yes),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::worker_options`].
    pub fn worker_options(self, options: m3_runtime::PoolOptions) -> Self {
        Self {
            inner: self.inner.worker_options(options),
        }
    }

    /// See [`AsyncMcpTestKitBuilder::recovery_sweep`].
    pub fn recovery_sweep(self, sweep: Option<m3_runtime::SweepOptions>) -> Self {
        Self {
            inner: self.inner.recovery_sweep(sweep),
        }
    }

    /// Starts the runtime, opens the store and runs recovery.
    ///
    /// # Errors
    /// `storage_error` when the runtime cannot start or the store cannot open.
    ///
    /// # Panics
    /// When called from inside an async runtime.
    pub fn build(self) -> Result<McpTestKit> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("m3-kit-runtime")
            .enable_all()
            .build()
            .map_err(|e| Error::storage("cannot start the m3-kit runtime").with_source(e))?;
        let kit = runtime.block_on(self.inner.build())?;
        Ok(McpTestKit {
            inner: Arc::new(Inner {
                runtime: Mutex::new(Some(runtime)),
                kit,
            }),
        })
    }
}

impl McpTestKit {
    /// A builder.
    pub fn builder() -> McpTestKitBuilder {
        McpTestKitBuilder::default()
    }

    /// The async kit this one wraps.
    pub fn as_async(&self) -> &AsyncMcpTestKit {
        &self.inner.kit
    }

    /// The kit's execution store.
    pub fn store(&self) -> &Arc<dyn ExecutionStore> {
        self.inner.kit.store()
    }

    /// See [`AsyncMcpTestKit::agents`].
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::agents`].
    pub fn agents(
        &self,
        selections: impl IntoIterator<Item = AgentSelection>,
    ) -> Result<Vec<Agent>> {
        Ok(self
            .inner
            .kit
            .agents(selections)?
            .into_iter()
            .map(|agent| Agent {
                inner: Arc::clone(&self.inner),
                agent,
            })
            .collect())
    }

    /// See [`AsyncMcpTestKit::attach`].
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::attach`].
    pub fn attach(&self, execution_id: &str) -> Result<ExecutionHandle> {
        let handle = self.inner.block_on(self.inner.kit.attach(execution_id))?;
        Ok(ExecutionHandle {
            inner: Arc::clone(&self.inner),
            handle,
        })
    }

    /// See [`AsyncMcpTestKit::executions`].
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::executions`].
    pub fn executions(&self) -> Result<Vec<ExecutionSummary>> {
        self.inner.block_on(self.inner.kit.executions())
    }

    /// See [`AsyncMcpTestKit::read_changes`].
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::read_changes`].
    pub fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        self.inner
            .block_on(self.inner.kit.read_changes(after, limit))
    }

    /// The change feed as a blocking iterator: every record after `after`, then each new
    /// one as it commits (`next` blocks until one does). See [`AsyncMcpTestKit::changes`].
    ///
    /// ```
    /// # fn main() -> m3_kit::Result<()> {
    /// use m3_kit::{Cursor, McpTestKit};
    ///
    /// let kit = McpTestKit::builder().build()?;
    /// # let id = kit.store().clone();
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().map_err(|e| m3_kit::Error::storage(e.to_string()))?;
    /// # let created = runtime.block_on(id.create_execution(m3_store::NewExecution::new(serde_json::json!({}))))?;
    /// # runtime.block_on(id.request_cancel(&created.execution_id, None))?;
    /// for record in kit.changes(Cursor::START).take(1) {
    ///     let record = record?;
    ///     println!("{} {}", record.cursor, record.kind);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn changes(&self, after: Cursor) -> Changes {
        Changes {
            inner: Arc::clone(&self.inner),
            stream: Box::pin(self.inner.kit.changes(after)),
        }
    }

    /// See [`AsyncMcpTestKit::recover`].
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::recover`].
    pub fn recover(&self) -> Result<RecoveryReport> {
        self.inner.block_on(self.inner.kit.recover())
    }

    /// Cancels this kit's executions and waits for their outcome. Dropping the
    /// last kit, agent or handle does the same.
    ///
    /// # Errors
    /// As [`AsyncMcpTestKit::close`].
    pub fn close(self) -> Result<()> {
        self.inner.block_on(self.inner.kit.clone().close())
    }
}

/// Blocking twin of [`AsyncAgent`].
#[derive(Debug, Clone)]
pub struct Agent {
    inner: Arc<Inner>,
    agent: AsyncAgent,
}

impl Agent {
    /// See [`AsyncAgent::submit`].
    ///
    /// # Errors
    /// As [`AsyncAgent::submit`].
    pub fn submit(
        &self,
        prompt: impl Into<String>,
        options: SubmitOptions,
    ) -> Result<ExecutionHandle> {
        let handle = self.inner.block_on(self.agent.submit(prompt, options))?;
        Ok(ExecutionHandle {
            inner: Arc::clone(&self.inner),
            handle,
        })
    }
}

/// Blocking twin of [`AsyncExecutionHandle`].
#[derive(Debug, Clone)]
pub struct ExecutionHandle {
    inner: Arc<Inner>,
    handle: AsyncExecutionHandle,
}

impl ExecutionHandle {
    /// The execution id.
    pub fn execution_id(&self) -> &str {
        self.handle.execution_id()
    }

    /// The async handle this one wraps.
    pub fn as_async(&self) -> &AsyncExecutionHandle {
        &self.handle
    }

    /// See [`AsyncExecutionHandle::pending_elicitation`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::pending_elicitation`].
    pub fn pending_elicitation(&self) -> Result<Option<PendingElicitationRound>> {
        self.inner.block_on(self.handle.pending_elicitation())
    }

    /// See [`AsyncExecutionHandle::respond_elicitation`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::respond_elicitation`].
    pub fn respond_elicitation(
        &self,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<()> {
        self.inner.block_on(
            self.handle
                .respond_elicitation(round_id, responses, idempotency_key),
        )
    }

    /// See [`AsyncExecutionHandle::respond_elicitation_as`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::respond_elicitation`].
    pub fn respond_elicitation_as(
        &self,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
        actor: m3_types::Actor,
    ) -> Result<()> {
        self.inner.block_on(self.handle.respond_elicitation_as(
            round_id,
            responses,
            idempotency_key,
            actor,
        ))
    }

    /// See [`AsyncExecutionHandle::snapshot`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::snapshot`].
    pub fn snapshot(&self) -> Result<ExecutionState> {
        self.inner.block_on(self.handle.snapshot())
    }

    /// See [`AsyncExecutionHandle::result`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::result`].
    pub fn result(&self, timeout: Option<Duration>) -> Result<ExecutionResult> {
        self.inner.block_on(self.handle.result(timeout))
    }

    /// See [`AsyncExecutionHandle::cancel`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::cancel`].
    pub fn cancel(&self) -> Result<()> {
        self.inner.block_on(self.handle.cancel())
    }

    /// See [`AsyncExecutionHandle::events`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::events`].
    pub fn events(&self, after_sequence: Option<u64>) -> Result<Vec<ExecutionEvent>> {
        self.inner.block_on(self.handle.events(after_sequence))
    }

    /// See [`AsyncExecutionHandle::rounds`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::rounds`].
    pub fn rounds(&self) -> Result<Vec<RoundDiagnostics>> {
        self.inner.block_on(self.handle.rounds())
    }

    /// See [`AsyncExecutionHandle::wait_for_pending`].
    ///
    /// # Errors
    /// As [`AsyncExecutionHandle::wait_for_pending`].
    pub fn wait_for_pending(&self, timeout: Duration) -> Result<Option<PendingElicitationRound>> {
        self.inner.block_on(self.handle.wait_for_pending(timeout))
    }
}
