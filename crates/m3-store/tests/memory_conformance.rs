//! Both conformance suites against the in-memory backend.

use std::sync::Arc;

use m3_store::conformance::execution::{self, ExecutionBackend};
use m3_store::conformance::{Backend, case_count, run_all};
use m3_store::memory::{MemoryExecutionStore, MemoryManagedInputStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_managed_input_store_passes_the_managed_input_suite() {
    let report = run_all(|clock| async move {
        let store = MemoryManagedInputStore::with_clock(clock);
        Ok(Backend::new(
            Arc::new(store.clone()),
            Arc::new(store.clone()),
            Arc::new(store),
        ))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), case_count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_execution_store_passes_the_execution_suite() {
    let report = execution::run_all(|clock| async move {
        let store = MemoryExecutionStore::with_clock(clock);
        Ok(ExecutionBackend::new(
            Arc::new(store.clone()),
            Arc::new(store),
        ))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), execution::CASES.len());
}

/// Rewording every error message of a backend fails no conformance case: the suites
/// assert codes and reasons only. `Reworded` is the memory backend with each error's
/// message replaced (code, details and reason kept).
mod reworded {
    use std::sync::Arc;

    use async_trait::async_trait;
    use m3_store::conformance::execution::{self, ExecutionBackend};
    use m3_store::conformance::{Backend, run_all};
    use m3_store::memory::{MemoryExecutionStore, MemoryManagedInputStore};
    use m3_store::{
        AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, CreateRound, ExecutionChange,
        ExecutionEvent, ExecutionLease, ExecutionLeaseRef, ExecutionRecord, ExecutionStore,
        FinishExecution, ListExecutions, ManagedInputStore, NewExecution, PendingPage,
        PendingQuery, RenewLeases, RenewRoundLeases, RoundChange, RoundRef, RoundScan,
        TerminalizeExpired, Terminalized,
    };
    use m3_store::{ChangePage, PruneChanges, Pruned};
    use m3_types::{Clock, Cursor, Error, ManagedInputRecord, Result};
    use serde_json::{Map, Value};

    /// The same error with the message "reworded: <code>".
    fn reword(error: Error) -> Error {
        let mut out = Error::from_code(error.error_code(), format!("reworded: {}", error.code()));
        for (key, value) in error.details() {
            out = out.with_detail(key, value.clone());
        }
        out
    }

    fn r<T>(result: Result<T>) -> Result<T> {
        result.map_err(reword)
    }

    #[derive(Debug, Clone)]
    struct Reworded<S>(S);

    #[async_trait]
    impl ManagedInputStore for Reworded<MemoryManagedInputStore> {
        async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
            r(self.0.create_round(request).await)
        }
        async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>> {
            r(self.0.get_round(round).await)
        }
        async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan> {
            r(self.0.scan_rounds(execution_id).await)
        }
        async fn renew_leases(
            &self,
            batch: RenewRoundLeases,
        ) -> Result<Vec<Result<ManagedInputRecord>>> {
            let outcomes = r(self.0.renew_leases(batch).await)?;
            Ok(outcomes.into_iter().map(r).collect())
        }
        async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage> {
            r(self.0.pending_page(query).await)
        }
        async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord> {
            r(self.0.write_round(change).await)
        }
        async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64> {
            r(self.0.fail_unresolved_rounds(execution_id, message).await)
        }
        async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>> {
            r(self.0.redacted_responses(round).await)
        }
        async fn answered_by(&self, round: &RoundRef) -> Result<Option<m3_types::Actor>> {
            r(self.0.answered_by(round).await)
        }
    }

    #[async_trait]
    impl ExecutionStore for Reworded<MemoryExecutionStore> {
        async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
            r(self.0.create_execution(new).await)
        }
        async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>> {
            r(self.0.get_execution(id).await)
        }
        async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
            r(self.0.list_executions(query).await)
        }
        async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
            r(self.0.acquire_lease(request).await)
        }
        async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
            r(self.0.claim_queued(request).await)
        }
        async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
            let outcomes = r(self.0.renew_leases(batch).await)?;
            Ok(outcomes.into_iter().map(r).collect())
        }
        async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
            r(self.0.release_lease(lease).await)
        }
        async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
            r(self.0.write_execution(change).await)
        }
        async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
            r(self.0.finish(request).await)
        }
        async fn is_cancel_requested(&self, id: &str) -> Result<bool> {
            r(self.0.is_cancel_requested(id).await)
        }
        async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
            r(self.0.append_event(event).await)
        }
        async fn list_events(&self, id: &str, after: Option<u64>) -> Result<Vec<ExecutionEvent>> {
            r(self.0.list_events(id, after).await)
        }
        async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
            r(self.0.list_expired_leases().await)
        }
        async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
            r(self.0.terminalize_expired(request).await)
        }
        async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
            r(self.0.read_changes(after, limit).await)
        }
        async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
            r(self.0.prune_changes(request).await)
        }
        async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
            Ok(Arc::new(Reworded(self.0.rounds().clone())))
        }
        async fn subscription_store(
            &self,
        ) -> Result<Arc<dyn m3_store::subscriptions::SubscriptionStore>> {
            self.0.subscription_store().await
        }
        async fn token_store(&self) -> Result<Arc<dyn m3_store::tokens::TokenStore>> {
            self.0.token_store().await
        }
        async fn worker_registry(&self) -> Result<Arc<dyn m3_store::workers::WorkerRegistry>> {
            self.0.worker_registry().await
        }

        async fn policy_store(&self) -> Result<Arc<dyn m3_store::policies::PolicyStore>> {
            self.0.policy_store().await
        }
        async fn remind_deadline(
            &self,
            execution_id: &str,
            round_id: &str,
            reminder: m3_types::DeadlineReminder,
        ) -> Result<bool> {
            r(self
                .0
                .remind_deadline(execution_id, round_id, reminder)
                .await)
        }
        fn clock(&self) -> Arc<dyn Clock> {
            self.0.clock()
        }
        fn is_persistent(&self) -> bool {
            self.0.is_persistent()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rewording_every_error_message_fails_no_case_of_either_suite() {
        let rounds = run_all(|clock| async move {
            let store = MemoryManagedInputStore::with_clock(clock);
            let reworded = Arc::new(Reworded(store.clone()));
            Ok(Backend::new(reworded.clone(), reworded, Arc::new(store)))
        })
        .await;
        assert!(rounds.is_success(), "{rounds}");
        let executions = execution::run_all(|clock| async move {
            let store = Arc::new(Reworded(MemoryExecutionStore::with_clock(clock)));
            Ok(ExecutionBackend::new(store.clone(), store))
        })
        .await;
        assert!(executions.is_success(), "{executions}");
        // The wrapper really changes the messages.
        let store = Reworded(MemoryManagedInputStore::new());
        let error = store.get_round(&RoundRef::new("", "r")).await.err();
        assert_eq!(
            error.map(|e| e.message().to_owned()).as_deref(),
            Some("reworded: managed_input_invalid")
        );
    }
}
