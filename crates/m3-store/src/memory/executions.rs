//! [`MemoryExecutionStore`]: executions and their event logs in one map behind one mutex,
//! with its own [`MemoryManagedInputStore`].
//!
//! As for the rounds, each operation is one critical section that reads, asks the shared
//! [`rules`](crate::execution::rules), and writes. Recovery takes this store's lock and
//! then the rounds' lock, so the execution and its rounds change in one atomic step.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Result, SystemClock, new_id};
use serde_json::Value;
use time::OffsetDateTime;

use super::MemoryManagedInputStore;
use super::feed::MemoryFeed;
use super::policies::MemoryPolicyRows;
use super::subscriptions::MemoryRows;
use super::tokens::MemoryTokenRows;
use super::workers::MemoryWorkerRows;
use crate::changes::rules::execution_changes;
use crate::changes::{ChangePage, PruneChanges, Pruned};
use crate::execution::rules::{
    self, Acquire, ExecutionSlot, ROUND_CLOSED_AT_FINISH, TerminalData, acquire_token, append_step,
    change_step, check_acquire, check_append, check_release, claim_step, created_payload,
    created_record, errors, finish_step, finished_payload, granted_lease, lease_expiry, lease_step,
    release_step, renew_step, require_non_empty, terminalize_step, terminalized_payload,
    to_canonical,
};
use crate::managed_input::rules::Decision;
use crate::policies::RowPolicyStore;
use crate::signal::{Announce, Change, ChangeHub, ChangeKind, ChangeSignal};
use crate::subscriptions::{RowSubscriptionStore, SubscriptionStore};
use crate::tokens::RowTokenStore;
use crate::workers::RowWorkerRegistry;
use crate::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, ExecutionChange, ExecutionEvent,
    ExecutionLease, ExecutionLeaseRef, ExecutionRecord, ExecutionStore, FinishExecution,
    ListExecutions, ManagedInputStore, NewExecution, RenewLeases, TerminalizeExpired, Terminalized,
};

/// One stored execution: the record, its canonical spec, its terminal data and its log.
#[derive(Debug)]
struct Stored {
    record: ExecutionRecord,
    spec_json: String,
    terminal: Option<TerminalData>,
    events: Vec<ExecutionEvent>,
}

impl ExecutionSlot for Stored {
    fn record(&self) -> &ExecutionRecord {
        &self.record
    }

    fn record_mut(&mut self) -> &mut ExecutionRecord {
        &mut self.record
    }

    fn append_event(&mut self, kind: &str, payload: Value, now: OffsetDateTime) -> ExecutionEvent {
        let event = ExecutionEvent {
            execution_id: self.record.execution_id.clone(),
            sequence: self.events.len() as u64,
            kind: kind.to_owned(),
            payload,
            timestamp: now,
        };
        self.events.push(event.clone());
        self.record.sequence = event.sequence;
        event
    }
}

/// The in-memory [`ExecutionStore`]: complete and concurrency-safe, **not persistent**
/// ([`is_persistent`](ExecutionStore::is_persistent) is `false`), gone with its last
/// clone. The kit uses it when built without a store; managed input needs a persistent one.
///
/// ```
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::memory::MemoryExecutionStore;
/// use m3_store::{ExecutionStore, NewExecution};
///
/// let store = MemoryExecutionStore::new();
/// let record = store.create_execution(NewExecution::new(serde_json::json!({}))).await?;
/// assert_eq!(store.list_events(&record.execution_id, None).await?.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryExecutionStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    clock: Arc<dyn Clock>,
    executions: Mutex<BTreeMap<String, Stored>>,
    rounds: MemoryManagedInputStore,
    /// The in-process change signal of both stores.
    hub: ChangeHub,
    /// The change feed of both stores.
    feed: MemoryFeed,
    /// The webhook subscriptions.
    subscriptions: RowSubscriptionStore<MemoryRows>,
    /// The API tokens.
    tokens: RowTokenStore<MemoryTokenRows>,
    /// The worker registry.
    workers: RowWorkerRegistry<MemoryWorkerRows>,
    /// The sealed OAuth credentials.
    oauth: super::oauth::MemoryOAuthRows,
    /// The policies.
    policies: RowPolicyStore<MemoryPolicyRows>,
}

impl Default for MemoryExecutionStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryExecutionStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on `clock`; its managed-input store reads the same clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        let hub = ChangeHub::new();
        let feed = MemoryFeed::default();
        Self {
            inner: Arc::new(Inner {
                rounds: MemoryManagedInputStore::with_shared(
                    Arc::clone(&clock),
                    hub.clone(),
                    feed.clone(),
                ),
                subscriptions: RowSubscriptionStore::new(MemoryRows::new(
                    Arc::clone(&clock),
                    feed.clone(),
                )),
                tokens: RowTokenStore::new(MemoryTokenRows::new(Arc::clone(&clock))),
                workers: RowWorkerRegistry::new(MemoryWorkerRows::new(Arc::clone(&clock))),
                oauth: super::oauth::MemoryOAuthRows::default(),
                policies: RowPolicyStore::new(MemoryPolicyRows::new(Arc::clone(&clock))),
                clock,
                executions: Mutex::new(BTreeMap::new()),
                hub,
                feed,
            }),
        }
    }

    /// This store's managed-input store (the one
    /// [`managed_input_store`](ExecutionStore::managed_input_store) returns).
    pub fn rounds(&self) -> &MemoryManagedInputStore {
        &self.inner.rounds
    }

    fn now(&self) -> OffsetDateTime {
        crate::store_now(self.inner.clock.as_ref())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Stored>> {
        self.inner
            .executions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores a new execution (or answers a replay), under the lock.
    fn insert_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        let id = new.execution_id.clone().unwrap_or_else(new_id);
        require_non_empty(&id, "execution_id")?;
        let spec_json = to_canonical(&new.spec)?;
        let now = self.now();
        let mut executions = self.lock();
        if let Some(stored) = executions.get(&id) {
            if stored.spec_json == spec_json && stored.record.human_input == new.human_input {
                return Ok(stored.record.clone());
            }
            return Err(errors::id_conflict(&id));
        }
        let human_input = new.human_input;
        let mut stored = Stored {
            record: created_record(&id, new, now),
            spec_json,
            terminal: None,
            events: Vec::new(),
        };
        stored.append_event(
            crate::EVENT_EXECUTION_CREATED,
            created_payload(human_input),
            now,
        );
        let record = stored.record.clone();
        self.inner.feed.append(execution_changes(None, &record));
        executions.insert(id, stored);
        Ok(record)
    }

    /// Runs `step` on the stored execution `id`, which must exist.
    fn with_existing<T>(
        &self,
        id: &str,
        step: impl FnOnce(&mut Stored, OffsetDateTime) -> Result<T>,
    ) -> Result<T> {
        let now = self.now();
        let mut executions = self.lock();
        let stored = executions
            .get_mut(id)
            .ok_or_else(|| errors::not_found(id))?;
        let before = stored.record.clone();
        let done = step(stored, now)?;
        self.inner
            .feed
            .append(execution_changes(Some(&before), &stored.record));
        Ok(done)
    }
}

#[async_trait]
impl ExecutionStore for MemoryExecutionStore {
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        self.insert_execution(new)
            .announce(&self.inner.hub, Change::of_execution)
    }

    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>> {
        Ok(self.lock().get(execution_id).map(|s| s.record.clone()))
    }

    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
        let mut records: Vec<ExecutionRecord> = self
            .lock()
            .values()
            .map(|s| &s.record)
            .filter(|r| query.lifecycle.is_none_or(|l| r.lifecycle == l))
            .filter(|r| query.human_input.is_none_or(|h| r.human_input == h))
            .cloned()
            .collect();
        records
            .sort_by(|a, b| (a.created_at, &a.execution_id).cmp(&(b.created_at, &b.execution_id)));
        if let Some(limit) = query.limit {
            records.truncate(limit as usize);
        }
        Ok(records)
    }

    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        let token = acquire_token(&request)?;
        let id = request.execution_id.as_str();
        let now = self.now();
        let expires_at = lease_expiry(now, request.ttl)?;
        let mut executions = self.lock();
        let stored = executions.get(id).ok_or_else(|| errors::not_found(id))?;
        if let Acquire::Held(lease) = check_acquire(&stored.record, &request.owner_id, &token, now)?
        {
            return Ok(lease);
        }
        let token_taken = executions.values().any(|other| {
            other
                .record
                .lease
                .as_ref()
                .is_some_and(|lease| lease.lease_token == token)
        });
        if token_taken {
            return Err(errors::lease_token_in_use(id));
        }
        let stored = executions
            .get_mut(id)
            .ok_or_else(|| errors::not_found(id))?;
        let before = stored.record.clone();
        let lease = lease_step(
            stored,
            granted_lease(id, request.owner_id, token, expires_at),
            now,
        );
        self.inner
            .feed
            .append(execution_changes(Some(&before), &stored.record));
        self.inner
            .hub
            .publish(&Change::new(id, ChangeKind::Execution));
        Ok(lease)
    }

    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
        let now = self.now();
        let (expires_at, token) = rules::check_claim_request(&request, now)?;
        let only = request.execution_id.as_deref();
        let mut executions = self.lock();
        let oldest = executions
            .values_mut()
            .filter(|s| rules::is_claimable(&s.record, only))
            .min_by(|a, b| {
                (a.record.created_at, &a.record.execution_id)
                    .cmp(&(b.record.created_at, &b.record.execution_id))
            });
        let Some(stored) = oldest else {
            return Ok(None);
        };
        let before = stored.record.clone();
        let lease = claim_step(stored, &request.owner_id, token, expires_at, now);
        self.inner
            .feed
            .append(execution_changes(Some(&before), &stored.record));
        self.inner.hub.publish(&Change::new(
            stored.record.execution_id.clone(),
            ChangeKind::Execution,
        ));
        Ok(Some(ClaimedExecution {
            record: stored.record.clone(),
            lease,
        }))
    }

    /// The whole batch under one lock: one atomic step.
    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
        let now = self.now();
        let mut executions = self.lock();
        let expires_at = lease_expiry(now, batch.ttl)?;
        Ok(batch
            .leases
            .iter()
            .map(|lease| {
                renew_step(
                    executions.get_mut(&lease.execution_id),
                    lease,
                    expires_at,
                    now,
                )
            })
            .collect())
    }

    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        let now = self.now();
        let mut executions = self.lock();
        let stored = executions.get_mut(&lease.execution_id);
        let decided = check_release(stored.as_deref().map(|s| &s.record), lease, now)?;
        if let (Decision::Apply, Some(stored)) = (decided, stored) {
            let before = stored.record.clone();
            release_step(stored, now);
            self.inner
                .feed
                .append(execution_changes(Some(&before), &stored.record));
            self.inner.hub.publish(&Change::new(
                lease.execution_id.clone(),
                ChangeKind::Execution,
            ));
        }
        Ok(())
    }

    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
        self.with_existing(change.execution_id(), |stored, now| {
            change_step(stored, &change, now)
        })
        .announce(&self.inner.hub, Change::of_execution)
    }

    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let requested = TerminalData::of_request(&request)?;
        let payload = finished_payload(&request)?;
        self.with_existing(&request.execution_id, |stored, now| {
            let terminal = stored.terminal.clone();
            let (decided, record) = finish_step(
                stored,
                terminal.as_ref(),
                &requested,
                &request,
                payload,
                now,
            )?;
            let mut rounds_failed = 0;
            if decided == Decision::Apply {
                stored.terminal = Some(requested);
                // Under the execution store's lock: one atomic step with the finish.
                rounds_failed = self.inner.rounds.fail_unresolved(
                    &request.execution_id,
                    ROUND_CLOSED_AT_FINISH,
                    now,
                );
            }
            Ok((record, rounds_failed))
        })
        .announce(&self.inner.hub, |(record, rounds_failed)| {
            if *rounds_failed > 0 {
                self.inner.rounds.announce_round(&record.execution_id);
            }
            Change::of_execution(record)
        })
        .map(|(record, _)| record)
    }

    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool> {
        self.with_existing(execution_id, |stored, _| {
            Ok(stored.record.is_cancel_requested())
        })
    }

    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        check_append(&event)?;
        let id = event.execution_id.clone();
        self.with_existing(&id, |stored, now| append_step(stored, event, now))
    }

    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>> {
        Ok(self
            .lock()
            .get(execution_id)
            .map(|stored| {
                stored
                    .events
                    .iter()
                    .filter(|e| after_sequence.is_none_or(|after| e.sequence > after))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
        let now = self.now();
        let mut expired: Vec<ExecutionRecord> = self
            .lock()
            .values()
            .map(|s| &s.record)
            .filter(|r| !r.is_finished() && r.lease.as_ref().is_some_and(|l| l.is_expired_at(now)))
            .cloned()
            .collect();
        expired.sort_by_key(|r| {
            (
                r.lease.as_ref().map(|l| l.expires_at),
                r.execution_id.clone(),
            )
        });
        Ok(expired)
    }

    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
        let payload = terminalized_payload(&request)?;
        self.with_existing(&request.lease.execution_id, |stored, now| {
            terminalize_step(stored, &request, payload, now)?;
            stored.terminal = Some(TerminalData::of_record(&stored.record)?);
            let rounds_failed = self.inner.rounds.fail_unresolved(
                &request.lease.execution_id,
                &request.reason,
                now,
            );
            Ok(Terminalized {
                record: stored.record.clone(),
                rounds_failed,
            })
        })
        .announce(&self.inner.hub, |done| {
            if done.rounds_failed > 0 {
                self.inner.rounds.announce_round(&done.record.execution_id);
            }
            Change::of_execution(&done.record)
        })
    }

    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        self.inner.feed.read(after, limit)
    }

    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        Ok(self.inner.feed.prune(request))
    }

    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        Ok(Arc::new(self.inner.rounds.clone()))
    }

    async fn subscription_store(&self) -> Result<Arc<dyn SubscriptionStore>> {
        Ok(Arc::new(self.inner.subscriptions.clone()))
    }

    async fn token_store(&self) -> Result<Arc<dyn crate::tokens::TokenStore>> {
        Ok(Arc::new(self.inner.tokens.clone()))
    }

    async fn worker_registry(&self) -> Result<Arc<dyn crate::workers::WorkerRegistry>> {
        Ok(Arc::new(self.inner.workers.clone()))
    }

    async fn oauth_credential_rows(&self) -> Result<Arc<dyn crate::oauth::OAuthCredentialRows>> {
        Ok(Arc::new(self.inner.oauth.clone()))
    }

    async fn policy_store(&self) -> Result<Arc<dyn crate::policies::PolicyStore>> {
        Ok(Arc::new(self.inner.policies.clone()))
    }

    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool> {
        let appended = self.inner.rounds.remind(execution_id, round_id, reminder);
        if appended {
            self.inner.rounds.announce_round(execution_id);
        }
        Ok(appended)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// The in-process signal shared by both of this store's halves.
    fn change_signal(&self) -> Arc<dyn ChangeSignal> {
        Arc::new(self.inner.hub.clone())
    }

    fn is_persistent(&self) -> bool {
        false
    }
}
