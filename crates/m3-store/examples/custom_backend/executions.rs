//! [`ExecutionStore`] for [`DirectoryStore`]: one JSON file per execution, holding its
//! record, its canonical spec and its whole event log.
//!
//! The file is the backend's [`ExecutionSlot`]: each mutation reads it under the exclusive
//! lock, lets the shared step of [`rules`] check and change it (the record, the events
//! appended), and stages it if the step changed it. Keeping the log in the execution's file
//! makes a change and its event one atomic rename; the price is that an append rewrites the
//! whole log (fine for an example; a real backend would append to a log file and keep the
//! last sequence in the record). `finish` and `terminalize_expired` fail the execution's
//! unresolved rounds in the same commit (a journal of several files). No step here appends
//! change records: [`DirectoryStore::write`] does, for whatever a step staged (`feed.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use m3_store::changes::{ChangePage, PruneChanges, Pruned};
use m3_store::execution::rules::{
    self, Acquire, ExecutionSlot, ROUND_CLOSED_AT_FINISH, TerminalData, acquire_token, append_step,
    change_step, check_acquire, check_append, check_release, claim_step, created_payload,
    created_record, errors, finish_step, finished_payload, granted_lease, lease_expiry, lease_step,
    release_step, renew_step, require_non_empty, terminalize_step, terminalized_payload,
    to_canonical,
};
use m3_store::managed_input::rules::Decision;
use m3_store::signal::{Announce, Change, ChangeKind, ChangeSignal};
use m3_store::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, EVENT_EXECUTION_CREATED,
    ExecutionChange, ExecutionEvent, ExecutionLease, ExecutionLeaseRef, ExecutionRecord,
    ExecutionStore, FinishExecution, ListExecutions, ManagedInputStore, NewExecution, RenewLeases,
    RoundRef, TerminalizeExpired, Terminalized,
};
use m3_types::{Clock, Cursor, Result, new_id};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::files::{Locked, id_too_long};
use crate::rounds::fail_unresolved;
use crate::store::DirectoryStore;

/// An execution's file: the record, the canonical JSON of the spec it was created with
/// (what a replayed create is compared with), and the event log.
#[derive(Debug, Serialize, Deserialize)]
struct ExecutionFile {
    /// The execution's record.
    record: ExecutionRecord,
    /// Canonical JSON of the spec it was created with.
    spec_json: String,
    /// The event log, in sequence order (`events[i].sequence == i`).
    events: Vec<ExecutionEvent>,
    /// Whether a step changed the file since it was read (it must then be written).
    #[serde(skip)]
    changed: bool,
}

impl ExecutionSlot for ExecutionFile {
    fn record(&self) -> &ExecutionRecord {
        &self.record
    }

    fn record_mut(&mut self) -> &mut ExecutionRecord {
        self.changed = true;
        &mut self.record
    }

    fn append_event(&mut self, kind: &str, payload: Value, now: OffsetDateTime) -> ExecutionEvent {
        let sequence = self.events.len() as u64;
        let event = ExecutionEvent::new(&self.record.execution_id, sequence, kind, payload, now);
        self.events.push(event.clone());
        self.record.sequence = sequence;
        self.changed = true;
        event
    }
}

/// The execution file at `path`, if there is one.
///
/// # Errors
/// `storage_error` if it cannot be read, or (reason `stored_record_invalid`) decoded.
fn read_file(locked: &Locked<'_>, path: &Path, id: &str) -> Result<Option<ExecutionFile>> {
    locked.read_json(path, |_| errors::corrupt(id, "execution file"))
}

/// The execution `id` with its path, if it exists.
///
/// # Errors
/// As [`read_file`].
fn read_execution(locked: &Locked<'_>, id: &str) -> Result<Option<(PathBuf, ExecutionFile)>> {
    let Some(path) = locked.dir().execution_path(id) else {
        return Ok(None);
    };
    Ok(read_file(locked, &path, id)?.map(|file| (path, file)))
}

/// Every stored execution, with its path.
///
/// # Errors
/// As [`read_file`].
fn read_all(locked: &Locked<'_>) -> Result<Vec<(PathBuf, ExecutionFile)>> {
    let mut all = Vec::new();
    for path in locked.dir().execution_files()? {
        if let Some(file) = read_file(locked, &path, &path.display().to_string())? {
            all.push((path, file));
        }
    }
    Ok(all)
}

/// Stages `file` if a step changed it.
///
/// # Errors
/// `storage_error` if it does not encode.
fn stage_if_changed(locked: &mut Locked<'_>, path: &Path, file: &ExecutionFile) -> Result<()> {
    if file.changed {
        locked.stage(path, file)?;
    }
    Ok(())
}

/// The oldest (by creation time, then id) order of executions.
fn oldest_first(a: &ExecutionRecord, b: &ExecutionRecord) -> std::cmp::Ordering {
    (a.created_at, &a.execution_id).cmp(&(b.created_at, &b.execution_id))
}

impl DirectoryStore {
    /// Runs `step` on the stored execution `id` (which must exist) under the exclusive
    /// lock, and commits the file if the step changed it.
    ///
    /// # Errors
    /// `not_found` if there is no such execution; `step`'s error; `storage_error`.
    async fn with_existing<T, F>(&self, id: &str, step: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut ExecutionFile, &mut Locked<'_>, OffsetDateTime) -> Result<T>
            + Send
            + 'static,
    {
        let id = id.to_owned();
        self.write(move |locked, now| {
            let (path, mut file) =
                read_execution(locked, &id)?.ok_or_else(|| errors::not_found(&id))?;
            let value = step(&mut file, locked, now)?;
            stage_if_changed(locked, &path, &file)?;
            Ok(value)
        })
        .await
    }

    /// Runs `read` on the stored execution `id` (which must exist) under the shared lock.
    ///
    /// # Errors
    /// `not_found` if there is no such execution; `storage_error`.
    async fn read_existing<T, F>(&self, id: &str, read: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&ExecutionFile) -> T + Send + 'static,
    {
        let id = id.to_owned();
        self.read(move |locked, _| match read_execution(locked, &id)? {
            Some((_, file)) => Ok(read(&file)),
            None => Err(errors::not_found(&id)),
        })
        .await
    }

    /// Stores a new execution, or answers a replay of the same create.
    async fn insert_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        let id = new.execution_id.clone().unwrap_or_else(new_id);
        require_non_empty(&id, "execution_id")?;
        let spec_json = to_canonical(&new.spec)?;
        self.write(move |locked, now| {
            let path = locked.dir().execution_path(&id).ok_or_else(id_too_long)?;
            if let Some(stored) = read_file(locked, &path, &id)? {
                if stored.spec_json == spec_json && stored.record.human_input == new.human_input {
                    return Ok(stored.record);
                }
                return Err(errors::id_conflict(&id));
            }
            let human_input = new.human_input;
            let mut file = ExecutionFile {
                record: created_record(&id, new, now),
                spec_json,
                events: Vec::new(),
                changed: true,
            };
            file.append_event(EVENT_EXECUTION_CREATED, created_payload(human_input), now);
            locked.stage(&path, &file)?;
            Ok(file.record)
        })
        .await
    }
}

#[async_trait::async_trait]
impl ExecutionStore for DirectoryStore {
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord> {
        self.insert_execution(new)
            .await
            .announce(self.signal(), Change::of_execution)
    }

    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>> {
        let id = execution_id.to_owned();
        self.read(move |locked, _| Ok(read_execution(locked, &id)?.map(|(_, file)| file.record)))
            .await
    }

    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>> {
        self.read(move |locked, _| {
            let mut records: Vec<ExecutionRecord> = read_all(locked)?
                .into_iter()
                .map(|(_, file)| file.record)
                .filter(|r| query.lifecycle.is_none_or(|l| r.lifecycle == l))
                .filter(|r| query.human_input.is_none_or(|h| r.human_input == h))
                .collect();
            records.sort_by(oldest_first);
            if let Some(limit) = query.limit {
                records.truncate(limit as usize);
            }
            Ok(records)
        })
        .await
    }

    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease> {
        let token = acquire_token(&request)?;
        self.write(move |locked, now| {
            let id = request.execution_id.as_str();
            let expires_at = lease_expiry(now, request.ttl)?;
            let (path, mut file) =
                read_execution(locked, id)?.ok_or_else(|| errors::not_found(id))?;
            if let Acquire::Held(lease) =
                check_acquire(&file.record, &request.owner_id, &token, now)?
            {
                return Ok((lease, false));
            }
            let token_taken = read_all(locked)?.iter().any(|(_, other)| {
                other
                    .record
                    .lease
                    .as_ref()
                    .is_some_and(|lease| lease.lease_token == token)
            });
            if token_taken {
                return Err(errors::lease_token_in_use(id));
            }
            let lease = granted_lease(id, request.owner_id.clone(), token, expires_at);
            let lease = lease_step(&mut file, lease, now);
            locked.stage(&path, &file)?;
            Ok((lease, true))
        })
        .await
        .map(|(lease, granted)| {
            if granted {
                announce(self.signal(), &lease.execution_id, ChangeKind::Execution);
            }
            lease
        })
    }

    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>> {
        self.write(move |locked, now| {
            let (expires_at, token) = rules::check_claim_request(&request, now)?;
            let only = request.execution_id.as_deref();
            let oldest = read_all(locked)?
                .into_iter()
                .filter(|(_, file)| rules::is_claimable(&file.record, only))
                .min_by(|(_, a), (_, b)| oldest_first(&a.record, &b.record));
            let Some((path, mut file)) = oldest else {
                return Ok(None);
            };
            let lease = claim_step(&mut file, &request.owner_id, token, expires_at, now);
            locked.stage(&path, &file)?;
            Ok(Some(ClaimedExecution::new(file.record, lease)))
        })
        .await
        .inspect(|claimed| {
            if let Some(claimed) = claimed {
                announce(
                    self.signal(),
                    &claimed.record.execution_id,
                    ChangeKind::Execution,
                );
            }
        })
    }

    /// The whole batch in one commit (one journal): all renewed or, on a storage error,
    /// none.
    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>> {
        self.write(move |locked, now| {
            let expires_at = lease_expiry(now, batch.ttl)?;
            let mut outcomes = Vec::with_capacity(batch.leases.len());
            for lease in &batch.leases {
                let mut read = read_execution(locked, &lease.execution_id)?;
                let slot = read.as_mut().map(|(_, file)| file);
                let outcome = renew_step(slot, lease, expires_at, now);
                if let (Ok(_), Some((path, file))) = (&outcome, &read) {
                    locked.stage(path, file)?;
                }
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
        .await
    }

    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()> {
        let lease = lease.clone();
        let id = lease.execution_id.clone();
        let released = self
            .write(move |locked, now| {
                let mut read = read_execution(locked, &lease.execution_id)?;
                let record = read.as_ref().map(|(_, file)| &file.record);
                let decided = check_release(record, &lease, now)?;
                if let (Decision::Apply, Some((path, file))) = (decided, read.as_mut()) {
                    release_step(file, now);
                    locked.stage(path, file)?;
                    return Ok(true);
                }
                Ok(false)
            })
            .await?;
        if released {
            announce(self.signal(), &id, ChangeKind::Execution);
        }
        Ok(())
    }

    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord> {
        let id = change.execution_id().to_owned();
        self.with_existing(&id, move |file, _, now| change_step(file, &change, now))
            .await
            .announce(self.signal(), Change::of_execution)
    }

    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord> {
        let requested = TerminalData::of_request(&request)?;
        let payload = finished_payload(&request)?;
        let id = request.execution_id.clone();
        self.with_existing(&id, move |file, locked, now| {
            // The terminal data is derived from the finished record read (`None`), as the
            // shipped persistent backends do.
            let (decided, record) = finish_step(file, None, &requested, &request, payload, now)?;
            let mut rounds_failed = 0;
            if decided == Decision::Apply {
                let id = &request.execution_id;
                rounds_failed = fail_unresolved(locked, id, ROUND_CLOSED_AT_FINISH, now)?;
            }
            Ok((record, rounds_failed))
        })
        .await
        .announce(self.signal(), |(record, rounds_failed)| {
            if *rounds_failed > 0 {
                announce(self.signal(), &record.execution_id, ChangeKind::Round);
            }
            Change::of_execution(record)
        })
        .map(|(record, _)| record)
    }

    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool> {
        self.read_existing(execution_id, |file| file.record.is_cancel_requested())
            .await
    }

    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent> {
        check_append(&event)?;
        let id = event.execution_id.clone();
        self.with_existing(&id, move |file, _, now| append_step(file, event, now))
            .await
    }

    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>> {
        let id = execution_id.to_owned();
        self.read(move |locked, _| {
            let Some((_, file)) = read_execution(locked, &id)? else {
                return Ok(Vec::new());
            };
            Ok(file
                .events
                .into_iter()
                .filter(|e| after_sequence.is_none_or(|after| e.sequence > after))
                .collect())
        })
        .await
    }

    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>> {
        self.read(move |locked, now| {
            let mut expired: Vec<ExecutionRecord> = read_all(locked)?
                .into_iter()
                .map(|(_, file)| file.record)
                .filter(|r| {
                    !r.is_finished() && r.lease.as_ref().is_some_and(|l| l.is_expired_at(now))
                })
                .collect();
            expired.sort_by_key(|r| {
                (
                    r.lease.as_ref().map(|l| l.expires_at),
                    r.execution_id.clone(),
                )
            });
            Ok(expired)
        })
        .await
    }

    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized> {
        let payload = terminalized_payload(&request)?;
        let id = request.lease.execution_id.clone();
        self.with_existing(&id, move |file, locked, now| {
            terminalize_step(file, &request, payload, now)?;
            let id = &request.lease.execution_id;
            let rounds_failed = fail_unresolved(locked, id, &request.reason, now)?;
            Ok(Terminalized::new(file.record.clone(), rounds_failed))
        })
        .await
        .announce(self.signal(), |done| {
            if done.rounds_failed > 0 {
                announce(self.signal(), &done.record.execution_id, ChangeKind::Round);
            }
            Change::of_execution(&done.record)
        })
    }

    /// The feed file under the shared lock: a read never sees half a commit, since every
    /// commit (change and records alike) happens under the exclusive lock.
    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        self.read(move |locked, _| crate::feed::read(locked, after, limit))
            .await
    }

    /// Under the exclusive lock, like any mutation: the feed file is rewritten without the
    /// removed records (a dry run writes nothing).
    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned> {
        self.write(move |locked, _| crate::feed::prune(locked, request))
            .await
    }

    /// The shared rules over this directory's `subscriptions.json` (`subscriptions.rs`).
    async fn subscription_store(
        &self,
    ) -> Result<Arc<dyn m3_store::subscriptions::SubscriptionStore>> {
        Ok(Arc::new(
            m3_store::subscriptions::RowSubscriptionStore::new(self.clone()),
        ))
    }

    /// The shared rules over this directory's `tokens.json` (`tokens.rs`).
    async fn token_store(&self) -> Result<Arc<dyn m3_store::tokens::TokenStore>> {
        Ok(Arc::new(m3_store::tokens::RowTokenStore::new(self.clone())))
    }

    /// The shared rules over this directory's `workers.json` (`workers.rs`).
    async fn worker_registry(&self) -> Result<Arc<dyn m3_store::workers::WorkerRegistry>> {
        Ok(Arc::new(m3_store::workers::RowWorkerRegistry::new(
            self.clone(),
        )))
    }

    /// The shared rules over this directory's `policies.json` (`policies.rs`).
    async fn policy_store(&self) -> Result<Arc<dyn m3_store::policies::PolicyStore>> {
        Ok(Arc::new(m3_store::policies::RowPolicyStore::new(
            self.clone(),
        )))
    }

    /// Once per round and fraction, with `reminders.json` (`policies.rs`).
    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool> {
        let appended = self
            .remind(RoundRef::new(execution_id, round_id), reminder)
            .await?;
        if appended {
            announce(self.signal(), execution_id, ChangeKind::Round);
        }
        Ok(appended)
    }

    /// The same object: executions and rounds live in the same directory.
    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>> {
        Ok(Arc::new(self.clone()))
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock_arc()
    }

    /// The directory's datagram signal, the same object on every call.
    fn change_signal(&self) -> Arc<dyn ChangeSignal> {
        self.signal_arc()
    }
}

/// Announces a change of `kind` to execution `id` (after its commit).
fn announce(signal: &dyn ChangeSignal, id: &str, kind: ChangeKind) {
    signal.notify(&Change::new(id, kind));
}
