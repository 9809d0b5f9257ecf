//! [`WorkerPool`]: claims queued executions and runs them, at most N at once (an execution
//! waiting for input counts), each under its own renewed lease; sweeps recovery
//! periodically; stops claiming and drains on shutdown, then fails the rest closed.
//! `m3 worker` and the kit's embedded worker are both a pool.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use m3_store::signal::{ChangeSubscription, Topic};
use m3_store::{ClaimQueued, ClaimedExecution, ExecutionRecord, ExecutionStore};
use m3_types::{ExecutionOutcome, Result};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::adoption::{Found, watch_handovers};
use super::limits::raise_open_files_limit;
use super::park::ParkedIndex;
use super::pool_options::PoolOptions;
use super::registration::Registration;
use super::runner::{Stops, Worker};
use super::sweep::spawn_sweep;
use super::wait::wait_for_queued;

/// How often a pool looks for parked executions that are due (a deadline, a reminder, a
/// policy, the execution timeout) or lost their lease.
const PARKED_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// What a pool reports as it works (see [`WorkerPool::events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolEvent {
    /// The pool claimed an execution and starts running it.
    Claimed {
        /// The execution.
        execution_id: String,
        /// The lease owner (this pool's worker id).
        owner_id: String,
    },
    /// A round of an execution this pool runs became pending: stored, the execution
    /// `waiting_for_input` (ids only, never the request or response values).
    RoundPending {
        /// The execution.
        execution_id: String,
        /// The round.
        round_id: String,
    },
    /// An execution this pool ran finished (its outcome as stored), or ended with an error
    /// (the lease was lost: recovery terminalizes it).
    Finished {
        /// The execution.
        execution_id: String,
        /// The stored outcome, when the worker recorded one.
        outcome: Option<ExecutionOutcome>,
        /// The error code of the run, when it ended without recording an outcome.
        error_code: Option<String>,
    },
    /// This pool stopped and handed a waiting execution to another live worker.
    HandedOver {
        /// The execution.
        execution_id: String,
        /// The worker that holds it now.
        successor: String,
    },
    /// Another worker handed this pool an execution; it goes on with it.
    Adopted {
        /// The execution.
        execution_id: String,
    },
    /// An execution's round waits: the execution is parked (nothing but its leases and an
    /// index entry in memory) until the round is answered.
    Parked {
        /// The execution.
        execution_id: String,
        /// The round it waits on.
        round_id: String,
    },
    /// A parked execution runs again (its round was answered, or something is due).
    Resumed {
        /// The execution.
        execution_id: String,
    },
}

/// One running execution's local tokens.
#[derive(Debug, Clone)]
pub(super) struct Local {
    cancel: CancellationToken,
    drained: CancellationToken,
    handover: CancellationToken,
}

impl Local {
    pub(super) fn stops(&self, park: bool) -> Stops {
        Stops {
            cancel: self.cancel.clone(),
            drained: self.drained.clone(),
            handover: self.handover.clone(),
            park,
        }
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) worker: Worker,
    pub(super) store: Arc<dyn ExecutionStore>,
    pub(super) options: PoolOptions,
    pub(super) owner_id: String,
    pub(super) slots: Option<Arc<Semaphore>>,
    pub(super) wanted: Mutex<VecDeque<String>>,
    pub(super) wake: Notify,
    pub(super) local: Mutex<HashMap<String, Local>>,
    pub(super) tasks: TaskTracker,
    pub(super) claiming: CancellationToken,
    pub(super) stopped: CancellationToken,
    pub(super) events: Arc<Mutex<Option<mpsc::UnboundedSender<PoolEvent>>>>,
    /// The receiver buffering from the start (`events_from_start`), until taken.
    pub(super) first_events: Mutex<Option<mpsc::UnboundedReceiver<PoolEvent>>>,
    /// The pool's entry in the store's worker registry.
    pub(super) registration: Registration,
    /// Executions this pool handed to another worker.
    pub(super) handed_over: Mutex<Vec<String>>,
    /// Executions parked until their round is answered.
    pub(super) parked: ParkedIndex,
}

/// Claims and runs queued executions (cheap to clone).
#[derive(Debug, Clone)]
pub struct WorkerPool {
    pub(super) inner: Arc<Inner>,
}

/// What [`WorkerPool::shutdown`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Executions that finished during the drain timeout.
    pub finished: usize,
    /// Executions failed closed after it.
    pub failed_closed: Vec<String>,
    /// Executions handed to another live worker during it.
    pub handed_over: Vec<String>,
}

impl WorkerPool {
    /// Starts a pool of `worker` on its store: raises the open-files limit for the
    /// concurrency, starts the claim loop and the recovery sweep.
    ///
    /// # Errors
    /// `invalid_argument` (reason `open_files_limit`) when the concurrency cannot fit the
    /// hard open-files limit.
    pub fn start(worker: Worker, options: PoolOptions) -> Result<Self> {
        raise_open_files_limit(options.concurrency)?;
        let store = Arc::clone(worker.store());
        let (events, first_events) = if options.events_from_start {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let events = Arc::new(Mutex::new(events));
        let worker = worker.with_round_pending(round_pending_hook(Arc::clone(&events)));
        let owner_id = format!("m3-worker:{}", m3_types::new_id());
        let claiming = CancellationToken::new();
        let registration = Registration::start(
            Arc::clone(&store),
            &owner_id,
            options.heartbeat,
            options.handover_only,
            claiming.clone(),
        );
        let pool = Self {
            inner: Arc::new(Inner {
                slots: options.concurrency.map(|n| Arc::new(Semaphore::new(n))),
                owner_id,
                worker,
                store,
                options,
                wanted: Mutex::new(VecDeque::new()),
                wake: Notify::new(),
                local: Mutex::new(HashMap::new()),
                tasks: TaskTracker::new(),
                claiming,
                registration,
                handed_over: Mutex::new(Vec::new()),
                parked: ParkedIndex::default(),
                stopped: CancellationToken::new(),
                events,
                first_events: Mutex::new(first_events),
            }),
        };
        if let Some(sweep) = pool.inner.options.sweep.clone() {
            let stop = pool.inner.stopped.clone();
            spawn_sweep(Arc::clone(&pool.inner.store), sweep, stop);
        }
        let claimer = pool.clone();
        tokio::spawn(async move { claimer.claim_loop().await });
        if pool.inner.options.heartbeat.is_some() {
            let adopter = pool.clone();
            tokio::spawn(async move { adopter.adopt_loop().await });
        }
        Ok(pool)
    }

    /// This pool's worker id: the owner of every lease it holds.
    pub fn owner_id(&self) -> &str {
        &self.inner.owner_id
    }

    /// A stream of [`PoolEvent`]s: from the start on the first call when the pool was
    /// started with `events_from_start`, else from now on (one subscriber; a new call
    /// replaces it).
    pub fn events(&self) -> mpsc::UnboundedReceiver<PoolEvent> {
        if let Some(first) = lock(&self.inner.first_events).take() {
            return first;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        *lock(&self.inner.events) = Some(tx);
        rx
    }

    /// Asks the pool to run queued execution `execution_id` (claimed by id, before the rest
    /// of the queue, as soon as a slot is free). Its local cancellation token exists at once.
    pub fn submit(&self, execution_id: &str) {
        self.local_entry(execution_id);
        lock(&self.inner.wanted).push_back(execution_id.to_owned());
        self.inner.wake.notify_one();
    }

    /// Wakes an idle claim loop (something was queued).
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// The local cancellation token of an execution this pool was given or runs.
    pub fn local_token(&self, execution_id: &str) -> Option<CancellationToken> {
        lock(&self.inner.local)
            .get(execution_id)
            .map(|l| l.cancel.clone())
    }

    /// How many executions run now (a parked one, waiting for its answer with nothing in
    /// memory but its leases, counts).
    pub fn running(&self) -> usize {
        lock(&self.inner.local).len() + self.inner.parked.len()
    }

    /// Stops claiming, lets running executions finish for the drain timeout, then fails the
    /// rest closed exactly as recovery would, and stops the sweep.
    pub async fn shutdown(&self) -> DrainReport {
        self.shutdown_or(std::future::pending()).await
    }

    /// [`WorkerPool::shutdown`], cut short when `force` completes first (a second stop
    /// signal): what still runs then is failed closed at once.
    pub async fn shutdown_or(&self, force: impl std::future::Future<Output = ()>) -> DrainReport {
        self.inner.claiming.cancel();
        self.inner.tasks.close();
        // A parked execution comes back to be handed over (or drained) like a running one.
        for entry in self.inner.parked.take_all() {
            self.spawn_resume(entry);
        }
        if self.inner.options.heartbeat.is_some() {
            // A registered worker hands what waits on a transferable round to a live one.
            for local in lock(&self.inner.local).values() {
                local.handover.cancel();
            }
        }
        let before = self.running();
        let drained = tokio::select! {
            finished = tokio::time::timeout(self.inner.options.drain_timeout, self.inner.tasks.wait()) => finished.is_ok(),
            () = force => false,
        };
        let mut report = DrainReport::default();
        if !drained {
            let rest: Vec<(String, Local)> = lock(&self.inner.local)
                .iter()
                .map(|(id, l)| (id.clone(), l.clone()))
                .collect();
            for (id, local) in rest {
                local.drained.cancel();
                report.failed_closed.push(id);
            }
            self.inner.tasks.wait().await;
        }
        report.handed_over = std::mem::take(&mut *lock(&self.inner.handed_over));
        let moved = report.failed_closed.len() + report.handed_over.len();
        report.finished = before.saturating_sub(moved);
        self.inner.stopped.cancel();
        self.inner.registration.retire().await;
        report
    }

    /// Stops claiming, cancels every running execution (outcome `cancelled`) and waits for
    /// their workers to record it (a kit closing).
    pub async fn close(&self) {
        self.inner.claiming.cancel();
        for local in lock(&self.inner.local).values() {
            local.cancel.cancel();
        }
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.stopped.cancel();
        self.inner.registration.retire().await;
    }

    pub(super) fn local_entry(&self, execution_id: &str) -> Local {
        let local = lock(&self.inner.local)
            .entry(execution_id.to_owned())
            .or_insert_with(|| Local {
                // Not a child of `claiming`: a drain stops claiming but lets executions run.
                cancel: CancellationToken::new(),
                drained: CancellationToken::new(),
                handover: CancellationToken::new(),
            })
            .clone();
        // A run that starts while a registered pool stops (one that was parking when the
        // stop came) is handed over like the others.
        if self.inner.claiming.is_cancelled() && self.inner.options.heartbeat.is_some() {
            local.handover.cancel();
        }
        local
    }

    async fn claim_loop(self) {
        let mut queue = self
            .inner
            .options
            .claim_queue
            .then(|| self.inner.store.change_signal().subscribe(Topic::Queue));
        loop {
            let permit = match &self.inner.slots {
                Some(slots) => tokio::select! {
                    permit = Arc::clone(slots).acquire_owned() => match permit {
                        Ok(permit) => Some(permit),
                        Err(_) => return,
                    },
                    () = self.inner.claiming.cancelled() => return,
                },
                None => None,
            };
            let Some(claimed) = self.next_claimed(queue.as_mut()).await else {
                return;
            };
            self.spawn_run(claimed, permit);
        }
    }

    /// Waits for the next claimed execution; `None` once claiming stopped.
    async fn next_claimed(
        &self,
        mut queue: Option<&mut ChangeSubscription>,
    ) -> Option<ClaimedExecution> {
        loop {
            if self.inner.claiming.is_cancelled() {
                return None;
            }
            match self.claim_one().await {
                Ok(Some(claimed)) => return Some(claimed),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "claiming a queued execution failed"),
            }
            tokio::select! {
                () = self.inner.wake.notified() => {}
                () = wait_for_queued(queue.as_deref_mut(), self.inner.options.idle_poll) => {}
                () = self.inner.claiming.cancelled() => return None,
            }
        }
    }

    /// Claims the first wanted execution that is still queued, else (with `claim_queue`)
    /// the oldest queued one.
    async fn claim_one(&self) -> Result<Option<ClaimedExecution>> {
        let ttl = self.inner.options.claim_lease;
        loop {
            let next = lock(&self.inner.wanted).pop_front();
            let Some(id) = next else { break };
            let request = ClaimQueued::new(&self.inner.owner_id, ttl).only(&id);
            match self.inner.store.claim_queued(request).await {
                Ok(Some(claimed)) => return Ok(Some(claimed)),
                // Claimed by another worker, or no longer queued.
                Ok(None) => {
                    lock(&self.inner.local).remove(&id);
                }
                Err(error) => {
                    lock(&self.inner.wanted).push_front(id);
                    return Err(error);
                }
            }
        }
        if !self.inner.options.claim_queue {
            return Ok(None);
        }
        let request = ClaimQueued::new(&self.inner.owner_id, ttl);
        self.inner.store.claim_queued(request).await
    }

    fn spawn_run(&self, claimed: ClaimedExecution, permit: Option<OwnedSemaphorePermit>) {
        let id = claimed.record.execution_id.clone();
        let local = self.local_entry(&id);
        self.emit(PoolEvent::Claimed {
            execution_id: id.clone(),
            owner_id: self.inner.owner_id.clone(),
        });
        let pool = self.clone();
        self.inner.tasks.spawn(async move {
            let ended = pool
                .inner
                .worker
                .run_claimed_stoppable(claimed, local.stops(pool.parks()))
                .await;
            pool.ended(&id, ended, permit).await;
        });
    }

    /// Reports how a run of `id` ended and frees its slot.
    /// Takes the executions other workers hand to this one, as they are handed over
    /// ([`watch_handovers`]), until the pool stops claiming.
    async fn adopt_loop(self) {
        let (found, mut handed) = mpsc::unbounded_channel();
        let stop = self.inner.claiming.clone();
        let watcher = watch_handovers(
            Arc::clone(&self.inner.store),
            self.inner.owner_id.clone(),
            found,
            stop.clone(),
        );
        tokio::spawn(watcher);
        let mut due = tokio::time::interval(PARKED_CHECK);
        loop {
            let found = tokio::select! {
                found = handed.recv() => match found {
                    Some(found) => found,
                    None => return,
                },
                _ = due.tick() => {
                    self.wake_parked(None);
                    continue;
                }
                () = stop.cancelled() => return,
            };
            let record = match found {
                Found::Handed(record) => *record,
                Found::Touched(id) => {
                    self.wake_parked(Some(&id));
                    continue;
                }
            };
            if lock(&self.inner.local).contains_key(&record.execution_id) {
                continue;
            }
            // A handed-over execution is this worker's already: it runs even over the
            // concurrency limit rather than be left to expire.
            let permit = self
                .inner
                .slots
                .as_ref()
                .and_then(|slots| Arc::clone(slots).try_acquire_owned().ok());
            self.spawn_adopted(record, permit);
        }
    }

    fn spawn_adopted(&self, record: ExecutionRecord, permit: Option<OwnedSemaphorePermit>) {
        let id = record.execution_id.clone();
        let local = self.local_entry(&id);
        self.emit(PoolEvent::Adopted {
            execution_id: id.clone(),
        });
        let pool = self.clone();
        let span = crate::telemetry::execution_span(&id);
        self.inner.tasks.spawn(
            async move {
                let ended = pool
                    .inner
                    .worker
                    .run_adopted(record, local.stops(pool.parks()), true)
                    .await;
                pool.ended(&id, ended, permit).await;
            }
            .instrument(span),
        );
    }

    pub(super) fn emit(&self, event: PoolEvent) {
        send(&self.inner.events, event);
    }
}

/// Sends `event` to the current subscriber, if any.
fn send(events: &Mutex<Option<mpsc::UnboundedSender<PoolEvent>>>, event: PoolEvent) {
    if let Some(tx) = lock(events).as_ref() {
        let _ = tx.send(event);
    }
}

/// The worker's hook that reports a pending round as [`PoolEvent::RoundPending`].
fn round_pending_hook(
    events: Arc<Mutex<Option<mpsc::UnboundedSender<PoolEvent>>>>,
) -> crate::coordinator::RoundPendingHook {
    crate::coordinator::RoundPendingHook::new(move |execution_id, round_id| {
        send(
            &events,
            PoolEvent::RoundPending {
                execution_id: execution_id.to_owned(),
                round_id: round_id.to_owned(),
            },
        );
    })
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
