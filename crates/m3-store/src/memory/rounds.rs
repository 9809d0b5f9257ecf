//! [`MemoryManagedInputStore`]: every round in one map behind one mutex.
//!
//! Each operation takes the lock, reads the round, asks the shared
//! [`rules`](crate::managed_input::rules) what to do, and stores the record they give: the
//! lock makes each operation atomic and serializable, and no lock is held across an
//! `.await`. This is the shortest correct backend of the contract.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use m3_types::{Clock, ManagedInputRecord, Result, SystemClock};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::feed::MemoryFeed;
use crate::changes::rules::round_change;
use crate::managed_input::rules::{
    self, RoundWrite, apply_recovery_failure, prepare_create, replay_create, require_round,
    require_text, round_index_taken, stored_invalid,
};
use crate::signal::{Announce, Change, ChangeHub, ChangeKind};
use crate::{
    CreateRound, LeaseRef, ManagedInputStore, PendingPage, PendingQuery, RenewRoundLeases,
    RoundChange, RoundRef, RoundScan, UnreadableRound,
};

/// One stored round: the record (or why it cannot be read), its redacted projection and
/// who answered it.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) record: std::result::Result<ManagedInputRecord, String>,
    pub(crate) redacted: std::result::Result<Option<Map<String, Value>>, String>,
    pub(crate) answered_by: Option<m3_types::Actor>,
    /// The deadline reminders appended for the round, by fraction key.
    pub(crate) reminded: Vec<String>,
}

type Key = (String, String);

/// The in-memory [`ManagedInputStore`]: complete, concurrency-safe, and gone when the last
/// clone is dropped. Clones share the rounds.
///
/// ```
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::ManagedInputStore;
/// use m3_store::memory::MemoryManagedInputStore;
///
/// let store = MemoryManagedInputStore::new();
/// assert!(store.list_rounds("exec-1").await?.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryManagedInputStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    clock: Arc<dyn Clock>,
    rounds: Mutex<BTreeMap<Key, Slot>>,
    /// Where each committed change is announced (shared with the execution store).
    hub: ChangeHub,
    /// Where each change's record is appended (shared with the execution store).
    feed: MemoryFeed,
}

impl Default for MemoryManagedInputStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryManagedInputStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on `clock` (any timezone-aware clock; times are kept in UTC).
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self::with_shared(clock, ChangeHub::new(), MemoryFeed::default())
    }

    /// An empty store on `clock` announcing its changes on `hub` and recording them in
    /// `feed`.
    pub(crate) fn with_shared(clock: Arc<dyn Clock>, hub: ChangeHub, feed: MemoryFeed) -> Self {
        Self {
            inner: Arc::new(Inner {
                clock,
                rounds: Mutex::new(BTreeMap::new()),
                hub,
                feed,
            }),
        }
    }

    /// The store's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    fn now(&self) -> OffsetDateTime {
        crate::store_now(self.inner.clock.as_ref())
    }

    /// Appends a `round.deadline_approaching` record for the pending round, once per
    /// fraction (see [`ExecutionStore::remind_deadline`](crate::ExecutionStore::remind_deadline)).
    pub(crate) fn remind(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> bool {
        let now = self.now();
        let mut rounds = self.lock();
        let Some(slot) = rounds.get_mut(&(execution_id.to_owned(), round_id.to_owned())) else {
            return false;
        };
        let fraction = reminder.fraction_key();
        let Ok(record) = &slot.record else {
            return false;
        };
        if record.status != m3_types::ManagedInputStatus::Pending
            || slot.reminded.contains(&fraction)
        {
            return false;
        }
        let change = crate::changes::rules::reminder_change(record, reminder, now);
        slot.reminded.push(fraction);
        self.inner.feed.append([change]);
        true
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, BTreeMap<Key, Slot>> {
        self.inner
            .rounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads a round that must exist and decode, applies `step` to it, and stores what
    /// `step` returns (the new record, and a new redacted projection if any) under the same
    /// lock: the read-decide-write every mutation is made of. `None` leaves the round as it is.
    fn update(
        &self,
        round: &RoundRef,
        step: impl FnOnce(&ManagedInputRecord, OffsetDateTime) -> Result<Option<RoundWrite>>,
    ) -> Result<ManagedInputRecord> {
        let now = self.now();
        let record = {
            let mut rounds = self.lock();
            let slot = rounds
                .get_mut(&key(round))
                .ok_or_else(|| rules::missing_round(round))?;
            let current = slot.record.clone().map_err(stored_invalid)?;
            let Some(write) = step(&current, now)? else {
                return Ok(current);
            };
            let redacted = write
                .redacted_json
                .as_deref()
                .map(serde_json::from_str::<Map<String, Value>>)
                .transpose()
                .map_err(|e| stored_invalid(e.to_string()))?;
            slot.record = Ok(write.record.clone());
            self.inner.feed.append(write.change_record(Some(&current)));
            if let Some(redacted) = redacted {
                slot.redacted = Ok(Some(redacted));
                slot.answered_by = write.actor.clone();
            }
            write.record
        };
        self.announce_round(&round.execution_id);
        Ok(record)
    }

    /// `renew` of one round in the locked map, without announcing the change (lease
    /// renewals: nobody waits for them).
    fn renew_locked(
        rounds: &mut BTreeMap<Key, Slot>,
        item: (&RoundRef, &LeaseRef),
        lease_duration: Duration,
        now: OffsetDateTime,
    ) -> Result<ManagedInputRecord> {
        let slot = rounds.get_mut(&key(item.0));
        let read = slot
            .as_ref()
            .map(|s| s.record.clone().map_err(stored_invalid));
        let record = rules::renew_item(item, lease_duration, read, now)?;
        if let Some(slot) = slot {
            slot.record = Ok(record.clone());
        }
        Ok(record)
    }

    /// Tells waiters that a round of `execution_id` changed.
    pub(crate) fn announce_round(&self, execution_id: &str) {
        self.inner
            .hub
            .publish(&Change::new(execution_id, ChangeKind::Round));
    }

    /// Fails every unresolved round of `execution_id` with `recovery_unavailable` and
    /// `message`, without the round leases (the execution lease is authoritative); the
    /// caller holds the execution store's lock, so recovery is one atomic step.
    pub(crate) fn fail_unresolved(
        &self,
        execution_id: &str,
        message: &str,
        now: OffsetDateTime,
    ) -> u64 {
        let mut failed = 0;
        for ((execution, _), slot) in self.lock().iter_mut() {
            if execution != execution_id {
                continue;
            }
            if let Ok(record) = &slot.record
                && rules::UNRESOLVED.contains(&record.status)
            {
                let failed_record = apply_recovery_failure(record, message, now);
                self.inner
                    .feed
                    .append(round_change(Some(record), &failed_record));
                slot.record = Ok(failed_record);
                failed += 1;
            }
        }
        failed
    }
}

fn key(round: &RoundRef) -> Key {
    (round.execution_id.clone(), round.round_id.clone())
}

#[async_trait]
impl ManagedInputStore for MemoryManagedInputStore {
    async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let execution_id = request.pending.execution_id.clone();
        self.insert_round(request).announce(&self.inner.hub, |_| {
            Change::new(execution_id, ChangeKind::Round)
        })
    }

    async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>> {
        require_round(round)?;
        self.lock()
            .get(&key(round))
            .map(|slot| slot.record.clone().map_err(stored_invalid))
            .transpose()
    }

    async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan> {
        require_text(execution_id, "execution_id")?;
        let mut scan = RoundScan::default();
        for ((execution, round_id), slot) in self.lock().iter() {
            if execution != execution_id {
                continue;
            }
            match &slot.record {
                Ok(record) => scan.rounds.push(record.clone()),
                Err(why) => scan.unreadable.push(UnreadableRound::new(
                    round_id.clone(),
                    stored_invalid(why.clone()),
                )),
            }
        }
        scan.rounds.sort_by_key(|record| record.round_index);
        Ok(scan)
    }

    async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage> {
        query.validate()?;
        let pending: Vec<ManagedInputRecord> = self
            .lock()
            .values()
            .filter_map(|slot| slot.record.as_ref().ok())
            .filter(|record| record.status == m3_types::ManagedInputStatus::Pending)
            .cloned()
            .collect();
        Ok(query.select(pending))
    }

    /// The whole batch under one lock: one atomic step.
    async fn renew_leases(
        &self,
        batch: RenewRoundLeases,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        rules::require_lease_duration(batch.lease_duration)?;
        let now = self.now();
        let mut rounds = self.lock();
        Ok(batch
            .leases
            .iter()
            .map(|(round, lease)| {
                Self::renew_locked(&mut rounds, (round, lease), batch.lease_duration, now)
            })
            .collect())
    }

    async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord> {
        self.update(change.round(), |current, now| change.write(current, now))
    }

    async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64> {
        require_text(execution_id, "execution_id")?;
        require_text(message, "message")?;
        let failed = self.fail_unresolved(execution_id, message, self.now());
        self.announce_round(execution_id);
        Ok(failed)
    }

    async fn answered_by(&self, round: &RoundRef) -> Result<Option<m3_types::Actor>> {
        require_round(round)?;
        Ok(self
            .lock()
            .get(&key(round))
            .and_then(|slot| slot.answered_by.clone()))
    }

    async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>> {
        require_round(round)?;
        match self.lock().get(&key(round)) {
            None => Ok(None),
            Some(slot) => slot.redacted.clone().map_err(|why| {
                m3_types::Error::managed_input_validation(
                    "stored redacted response projection is invalid",
                )
                .with_reason(m3_types::Reason::StoredRecordInvalid)
                .with_detail("why", why)
            }),
        }
    }
}

impl MemoryManagedInputStore {
    /// Stores a new round (or answers a replay), under the lock.
    fn insert_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        let round = new.round();
        let now = self.now();
        let mut rounds = self.lock();
        if let Some(slot) = rounds.get(&key(&round)) {
            return replay_create(slot.record.clone().map_err(stored_invalid)?, &new);
        }
        let index_taken = rounds.iter().any(|((execution, _), slot)| {
            *execution == round.execution_id
                && slot
                    .record
                    .as_ref()
                    .is_ok_and(|r| r.round_index == new.request.round_index)
        });
        if index_taken {
            return Err(round_index_taken(&new));
        }
        let record = new.record_at(now)?;
        self.inner.feed.append(round_change(None, &record));
        rounds.insert(
            key(&round),
            Slot {
                record: Ok(record.clone()),
                redacted: Ok(None),
                answered_by: None,
                reminded: Vec::new(),
            },
        );
        Ok(record)
    }
}
