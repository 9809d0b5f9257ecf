//! One renewer for every lease a worker holds, in batches.
//!
//! A waiting execution holds two leases: its execution lease and its round's lease. Renewing
//! each on its own timer costs one write (one commit) per lease and period, which for a
//! worker with a thousand waiting executions is a steady load on an otherwise idle machine.
//! Here every lease is registered with one [`LeaseKeeper`] per worker, which renews all the
//! leases that are due within the next half period in one `renew_leases` call per store and
//! lease duration: a few commits per period however many executions wait.
//!
//! A registration ([`Holding`]) ends when its lease can no longer be kept: a refused renewal
//! (lost, expired, the row moved on), a transient failure that outlasted the lease, or a
//! renewal whose record says the round already failed closed. The owner decides what that
//! means; dropping the holding stops the renewals.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use m3_store::{
    ExecutionLease, ExecutionLeaseRef, ExecutionStore, LeaseRef, ManagedInputStore, RenewLeases,
    RenewRoundLeases, RoundRef,
};
use m3_types::{Error, ManagedInputRecord, Result};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::deadline::{LeaseDeadline, RETRY_PAUSE, is_transient};

/// A lease the keeper renews, with the store that granted it.
#[derive(Debug, Clone)]
pub(crate) enum Held {
    /// A round's lease.
    Round {
        store: Arc<dyn ManagedInputStore>,
        round: RoundRef,
        lease: LeaseRef,
    },
    /// An execution's worker lease.
    Execution {
        store: Arc<dyn ExecutionStore>,
        lease: ExecutionLeaseRef,
    },
}

/// What the last successful renewal returned.
#[derive(Debug)]
pub(crate) enum Renewed {
    /// The round, as renewed.
    Round(Box<ManagedInputRecord>),
    /// The execution lease (its new expiry is not needed).
    Execution,
}

/// Leases renewed together: same kind, same store object, same duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct BatchKey {
    round: bool,
    store: usize,
    ttl: Duration,
}

impl Held {
    fn batch_key(&self, ttl: Duration) -> BatchKey {
        let (round, store) = match self {
            Self::Round { store, .. } => (true, Arc::as_ptr(store).cast::<()>() as usize),
            Self::Execution { store, .. } => (false, Arc::as_ptr(store).cast::<()>() as usize),
        };
        BatchKey { round, store, ttl }
    }
}

/// A registered lease: when it is due, until when it is ours, whom to tell when it ends.
struct Entry {
    held: Held,
    ttl: Duration,
    every: Duration,
    deadline: LeaseDeadline,
    next_due: Instant,
    ended: Option<oneshot::Sender<Result<Renewed>>>,
}

#[derive(Default)]
struct Registry {
    entries: HashMap<u64, Entry>,
    next_id: u64,
    running: bool,
}

#[derive(Default)]
struct Shared {
    registry: Mutex<Registry>,
    /// Wakes the renewal task when a lease is registered (it may be due sooner).
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Renews the leases registered with it, in batches (see the module docs). Cheap to clone;
/// its task runs only while some lease is registered.
#[derive(Clone, Default)]
pub(crate) struct LeaseKeeper {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.shared.lock().entries.len();
        f.debug_struct("LeaseKeeper").field("held", &held).finish()
    }
}

/// A lease registered with a [`LeaseKeeper`]; dropping it stops the renewals.
pub(crate) struct Holding {
    id: u64,
    shared: Arc<Shared>,
    ended: oneshot::Receiver<Result<Renewed>>,
}

impl std::fmt::Debug for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holding").field("id", &self.id).finish()
    }
}

impl Holding {
    /// Waits until the lease can no longer be kept and says why: the refusing error, or the
    /// renewed record that showed the lease's work already ended.
    pub(crate) async fn ended(&mut self) -> Result<Renewed> {
        (&mut self.ended)
            .await
            .unwrap_or_else(|_| Err(Error::cancelled("lease renewal stopped")))
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.shared.lock().entries.remove(&self.id);
        // The task re-reads what is due, and ends when nothing is held.
        self.shared.changed.notify_one();
    }
}

impl LeaseKeeper {
    /// Renews `held` (granted `ttl` a moment ago) about every `every` from now on.
    pub(crate) fn hold(&self, held: Held, ttl: Duration, every: Duration) -> Holding {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut registry = self.shared.lock();
            let id = registry.next_id;
            registry.next_id += 1;
            registry.entries.insert(
                id,
                Entry {
                    held,
                    ttl,
                    every,
                    deadline: LeaseDeadline::granted_now(ttl),
                    next_due: Instant::now() + every,
                    ended: Some(tx),
                },
            );
            if !registry.running {
                registry.running = true;
                tokio::spawn(run(Arc::clone(&self.shared)));
            }
            id
        };
        self.shared.changed.notify_one();
        Holding {
            id,
            shared: Arc::clone(&self.shared),
            ended: rx,
        }
    }
}

/// The renewal task: sleeps until the earliest lease is due, renews every lease due within
/// the next half period in one call per batch, and ends when nothing is held.
async fn run(shared: Arc<Shared>) {
    loop {
        let Some(next) = next_due(&shared) else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = shared.changed.notified() => continue,
        }
        for (key, batch) in due_batches(&shared) {
            let started = Instant::now();
            let outcomes = renew_batch(key, &batch).await;
            settle(&shared, &batch, outcomes, started);
        }
    }
}

/// When the earliest held lease is due; `None` (and the task marked stopped) when none is held.
fn next_due(shared: &Shared) -> Option<Instant> {
    let mut registry = shared.lock();
    let next = registry.entries.values().map(|e| e.next_due).min();
    if next.is_none() {
        registry.running = false;
    }
    next
}

/// The leases to renew now: every lease due within half its period (renewing a little early
/// costs nothing and lets one call carry the leases of many executions), by batch.
fn due_batches(shared: &Shared) -> BTreeMap<BatchKey, Vec<(u64, Held)>> {
    let now = Instant::now();
    let mut batches: BTreeMap<BatchKey, Vec<(u64, Held)>> = BTreeMap::new();
    for (id, entry) in &shared.lock().entries {
        if entry.next_due <= now + entry.every / 2 {
            batches
                .entry(entry.held.batch_key(entry.ttl))
                .or_default()
                .push((*id, entry.held.clone()));
        }
    }
    batches
}

/// One `renew_leases` call for a batch; a failure of the whole call is every item's outcome.
async fn renew_batch(key: BatchKey, batch: &[(u64, Held)]) -> Vec<Result<Renewed>> {
    let outcome = match batch.first() {
        Some((_, Held::Round { store, .. })) => {
            let leases: Vec<(RoundRef, LeaseRef)> = batch
                .iter()
                .filter_map(|(_, held)| match held {
                    Held::Round { round, lease, .. } => Some((round.clone(), lease.clone())),
                    Held::Execution { .. } => None,
                })
                .collect();
            store
                .renew_leases(RenewRoundLeases::new(leases, key.ttl))
                .await
                .map(|all| map_ok(all, |record| Renewed::Round(Box::new(record))))
        }
        Some((_, Held::Execution { store, .. })) => {
            let leases: Vec<ExecutionLeaseRef> = batch
                .iter()
                .filter_map(|(_, held)| match held {
                    Held::Execution { lease, .. } => Some(lease.clone()),
                    Held::Round { .. } => None,
                })
                .collect();
            store
                .renew_leases(RenewLeases::new(leases, key.ttl))
                .await
                .map(|all| map_ok(all, |_: ExecutionLease| Renewed::Execution))
        }
        None => Ok(Vec::new()),
    };
    match outcome {
        Ok(outcomes) if outcomes.len() == batch.len() => outcomes,
        Ok(outcomes) => batch
            .iter()
            .map(|_| {
                Err(Error::storage(format!(
                    "lease renewal returned {} outcomes for {} leases",
                    outcomes.len(),
                    batch.len()
                )))
            })
            .collect(),
        Err(error) => batch
            .iter()
            .map(|_| Err(error.clone_without_source()))
            .collect(),
    }
}

fn map_ok<T>(all: Vec<Result<T>>, f: impl Fn(T) -> Renewed) -> Vec<Result<Renewed>> {
    all.into_iter().map(|outcome| outcome.map(&f)).collect()
}

/// Applies a batch's outcomes: a renewed lease is due again a period after the attempt; a
/// transient failure is retried soon while the lease may be live; anything else ends it.
fn settle(
    shared: &Shared,
    batch: &[(u64, Held)],
    outcomes: Vec<Result<Renewed>>,
    started: Instant,
) {
    let now = Instant::now();
    let mut registry = shared.lock();
    for ((id, _), outcome) in batch.iter().zip(outcomes) {
        // Dropped while its renewal was in flight: nothing to tell.
        let Some(entry) = registry.entries.get_mut(id) else {
            continue;
        };
        let pause = entry.every.min(RETRY_PAUSE);
        match outcome {
            Ok(renewed) if work_goes_on(&renewed) => {
                entry.deadline.renewed(started);
                entry.next_due = started + entry.every;
            }
            Err(error) if is_transient(&error) && !entry.deadline.expired_by(now + pause) => {
                crate::metrics::Metrics::global().record_lease_renewal_failure();
                tracing::warn!(%error, "lease renewal failed; retrying while the lease is live");
                entry.next_due = now + pause;
            }
            ended => {
                if ended.is_err() {
                    crate::metrics::Metrics::global().record_lease_renewal_failure();
                }
                if let Some(tx) = entry.ended.take() {
                    let _ = tx.send(ended);
                }
                // Not renewed again; the owner drops its holding when it has handled this.
                entry.next_due = far_future(now);
            }
        }
    }
}

/// Whether a renewed lease still protects live work: a round that recovery already failed
/// renews no more.
fn work_goes_on(renewed: &Renewed) -> bool {
    match renewed {
        Renewed::Round(record) => !record.is_recovery_failed(),
        Renewed::Execution => true,
    }
}

/// An instant no lease is due at (an ended entry waits there for its owner to drop it).
fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(86_400 * 365)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use m3_store::memory::MemoryExecutionStore;
    use m3_store::{AcquireLease, NewExecution};
    use serde_json::json;

    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    async fn leased(store: &Arc<dyn ExecutionStore>, n: usize) -> Vec<ExecutionLeaseRef> {
        let mut leases = Vec::new();
        for i in 0..n {
            let id = store
                .create_execution(NewExecution::new(json!({})))
                .await
                .unwrap()
                .execution_id;
            let lease = store
                .acquire_lease(AcquireLease::new(&id, format!("worker-{i}"), TTL))
                .await
                .unwrap();
            leases.push(lease.to_ref());
        }
        leases
    }

    fn entry(held: Held, every: Duration, due_in: Duration) -> Entry {
        let (tx, _rx) = oneshot::channel();
        Entry {
            held,
            ttl: TTL,
            every,
            deadline: LeaseDeadline::granted_now(TTL),
            next_due: Instant::now() + due_in,
            ended: Some(tx),
        }
    }

    #[tokio::test]
    async fn leases_due_within_half_a_period_share_one_batch() {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryExecutionStore::new());
        let other: Arc<dyn ExecutionStore> = Arc::new(MemoryExecutionStore::new());
        let leases = leased(&store, 3).await;
        let shared = Shared::default();
        let every = Duration::from_secs(10);
        {
            let mut registry = shared.lock();
            let held =
                |store: &Arc<dyn ExecutionStore>, lease: &ExecutionLeaseRef| Held::Execution {
                    store: Arc::clone(store),
                    lease: lease.clone(),
                };
            registry
                .entries
                .insert(0, entry(held(&store, &leases[0]), every, Duration::ZERO));
            registry
                .entries
                .insert(1, entry(held(&store, &leases[1]), every, every / 3));
            // Due later than half a period from now: not renewed yet.
            registry
                .entries
                .insert(2, entry(held(&store, &leases[2]), every, every));
            // Another store object: its own batch.
            registry
                .entries
                .insert(3, entry(held(&other, &leases[0]), every, Duration::ZERO));
        }
        let batches = due_batches(&shared);
        let mut sizes: Vec<usize> = batches.values().map(Vec::len).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![1, 2]);
    }

    #[tokio::test]
    async fn every_held_lease_is_renewed_and_dropping_the_holdings_stops_the_task() {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryExecutionStore::new());
        let leases = leased(&store, 20).await;
        let before = store
            .get_execution(&leases[0].execution_id)
            .await
            .unwrap()
            .unwrap();
        let keeper = LeaseKeeper::default();
        let every = Duration::from_millis(40);
        let holdings: Vec<Holding> = leases
            .iter()
            .map(|lease| {
                let held = Held::Execution {
                    store: Arc::clone(&store),
                    lease: lease.clone(),
                };
                keeper.hold(held, TTL, every)
            })
            .collect();
        tokio::time::sleep(every * 4).await;
        for lease in &leases {
            let now = store
                .get_execution(&lease.execution_id)
                .await
                .unwrap()
                .unwrap();
            let renewed = now.lease.unwrap().expires_at;
            assert!(
                renewed > before.lease.clone().unwrap().expires_at,
                "{lease:?} not renewed"
            );
        }
        drop(holdings);
        tokio::time::sleep(every).await;
        assert!(
            !keeper.shared.lock().running,
            "the task ends when nothing is held"
        );
        assert!(keeper.shared.lock().entries.is_empty());
    }

    #[tokio::test]
    async fn a_lost_lease_ends_its_holding_with_the_refusal() {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryExecutionStore::new());
        let leases = leased(&store, 2).await;
        store.release_lease(&leases[0]).await.unwrap();
        let keeper = LeaseKeeper::default();
        let every = Duration::from_millis(20);
        let hold = |lease: &ExecutionLeaseRef| {
            let held = Held::Execution {
                store: Arc::clone(&store),
                lease: lease.clone(),
            };
            keeper.hold(held, TTL, every)
        };
        let mut lost = hold(&leases[0]);
        let mut kept = hold(&leases[1]);
        let ended = tokio::time::timeout(Duration::from_secs(5), lost.ended())
            .await
            .unwrap();
        assert!(matches!(ended, Err(error) if !is_transient(&error)));
        // The other lease of the same batch goes on.
        let still = tokio::time::timeout(every * 5, kept.ended()).await;
        assert!(still.is_err(), "the live lease must not end");
    }

    #[test]
    fn a_transient_failure_is_retried_soon_and_ends_only_when_the_lease_would_expire() {
        let shared = Shared::default();
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryExecutionStore::new());
        let lease = ExecutionLeaseRef::new("e", "w", "t");
        let held = Held::Execution { store, lease };
        let every = Duration::from_secs(10);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (tx, mut rx) = oneshot::channel();
            let mut live = entry(held.clone(), every, Duration::ZERO);
            live.ended = Some(tx);
            shared.lock().entries.insert(7, live);
            let batch = vec![(7, held.clone())];
            let busy = || vec![Err(Error::storage("database is locked"))];
            settle(&shared, &batch, busy(), Instant::now());
            let next = shared.lock().entries[&7].next_due;
            assert!(
                next <= Instant::now() + RETRY_PAUSE,
                "retried within the pause"
            );
            assert!(
                rx.try_recv().is_err(),
                "a transient failure does not end a live lease"
            );
            // The lease would be gone by the next attempt: the failure ends it.
            shared.lock().entries.get_mut(&7).unwrap().deadline =
                LeaseDeadline::granted_now(Duration::from_millis(10));
            settle(&shared, &batch, busy(), Instant::now());
            assert!(matches!(rx.try_recv(), Ok(Err(error)) if error.is_storage()));
        });
    }
}
