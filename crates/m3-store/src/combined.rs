//! [`CombinedStore`]: executions in one backend, managed-input rounds in another.

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Result};

use crate::changes::{ChangePage, PruneChanges, Pruned};
use crate::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, ExecutionChange, ExecutionEvent,
    ExecutionLease, ExecutionLeaseRef, ExecutionRecord, ExecutionStore, FinishExecution,
    ListExecutions, ManagedInputStore, NewExecution, RenewLeases, TerminalizeExpired, Terminalized,
};

/// An [`ExecutionStore`] whose executions live in `executions` and whose managed-input
/// rounds live in a separate (for example custom) [`ManagedInputStore`].
///
/// Every execution operation is the inner store's. [`managed_input_store`] returns
/// `rounds`, and [`terminalize_expired`] and `finish` finish the execution in `executions`,
/// then fail the execution's unresolved rounds in `rounds` with
/// [`ManagedInputStore::fail_unresolved_rounds`]. The two steps are two transactions of two
/// backends: a crash between them leaves the execution finished and its rounds unresolved,
/// and nothing resumes them (a finished execution delivers no answer); the next recovery
/// of a store built on one backend has no such gap.
///
/// [`managed_input_store`]: ExecutionStore::managed_input_store
/// [`terminalize_expired`]: ExecutionStore::terminalize_expired
#[derive(Debug, Clone)]
pub struct CombinedStore {
    executions: Arc<dyn ExecutionStore>,
    rounds: Arc<dyn ManagedInputStore>,
}

impl CombinedStore {
    /// Executions in `executions`, rounds in `rounds` (which should read the same clock).
    pub fn new(executions: Arc<dyn ExecutionStore>, rounds: Arc<dyn ManagedInputStore>) -> Self {
        Self { executions, rounds }
    }
}

#[async_trait]
impl ExecutionStore for CombinedStore {
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        self.executions.create_execution(new).await
    }

    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>> {
        self.executions.get_execution(execution_id).await
    }

    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
        self.executions.list_executions(query).await
    }

    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        self.executions.acquire_lease(request).await
    }

    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
        self.executions.claim_queued(request).await
    }

    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
        self.executions.renew_leases(batch).await
    }

    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        self.executions.release_lease(lease).await
    }

    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
        self.executions.write_execution(change).await
    }

    /// The execution store's feed: rounds appear in it when the round store writes to the
    /// same feed (one database); otherwise only the execution records do.
    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        self.executions.read_changes(after, limit).await
    }

    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        self.executions.prune_changes(request).await
    }

    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let execution_id = request.execution_id.clone();
        let record = self.executions.finish(request).await?;
        // Also on an idempotent repeat: it completes a finish whose second step failed.
        self.rounds
            .fail_unresolved_rounds(
                &execution_id,
                crate::execution::rules::ROUND_CLOSED_AT_FINISH,
            )
            .await?;
        Ok(record)
    }

    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool> {
        self.executions.is_cancel_requested(execution_id).await
    }

    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        self.executions.append_event(event).await
    }

    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>> {
        self.executions
            .list_events(execution_id, after_sequence)
            .await
    }

    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
        self.executions.list_expired_leases().await
    }

    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
        let execution_id = request.lease.execution_id.clone();
        let reason = request.reason.clone();
        let mut done = self.executions.terminalize_expired(request).await?;
        done.rounds_failed += self
            .rounds
            .fail_unresolved_rounds(&execution_id, &reason)
            .await?;
        Ok(done)
    }

    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        Ok(Arc::clone(&self.rounds))
    }

    /// The execution backend's (it owns the feed the subscriptions read).
    async fn subscription_store(&self) -> Result<Arc<dyn crate::subscriptions::SubscriptionStore>> {
        self.executions.subscription_store().await
    }

    /// The execution backend's.
    async fn token_store(&self) -> Result<Arc<dyn crate::tokens::TokenStore>> {
        self.executions.token_store().await
    }

    async fn worker_registry(&self) -> Result<Arc<dyn crate::workers::WorkerRegistry>> {
        self.executions.worker_registry().await
    }

    /// The execution backend's.
    async fn oauth_credential_rows(&self) -> Result<Arc<dyn crate::oauth::OAuthCredentialRows>> {
        self.executions.oauth_credential_rows().await
    }

    /// The execution backend's.
    async fn policy_store(&self) -> Result<Arc<dyn crate::policies::PolicyStore>> {
        self.executions.policy_store().await
    }

    /// The execution backend's (it owns the feed): a round kept only in `rounds` is
    /// unknown to it, and gets no reminder.
    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool> {
        self.executions
            .remind_deadline(execution_id, round_id, reminder)
            .await
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.executions.clock()
    }

    /// The execution backend's signal: changes of the separate round store reach waiters
    /// through it only if that backend announces them there; otherwise waiters on rounds
    /// see them at the next fallback poll.
    fn change_signal(&self) -> Arc<dyn crate::signal::ChangeSignal> {
        self.executions.change_signal()
    }

    fn is_persistent(&self) -> bool {
        self.executions.is_persistent()
    }
}
