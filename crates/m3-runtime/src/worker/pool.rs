//! [`WorkerPool`]: claims queued executions and runs them, at most N at once (an execution
//! waiting for input counts), each under its own renewed lease; sweeps recovery
//! periodically; stops claiming and drains on shutdown, then fails the rest closed.
//! `m3 worker` and the kit's embedded worker are both a pool.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use m3_store::signal::{ChangeSubscription, Topic};
use m3_store::{ClaimQueued, ClaimedExecution, ExecutionStore};
use m3_types::{ExecutionOutcome, Result};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::limits::raise_open_files_limit;
use super::pool_options::PoolOptions;
use super::registration::Registration;
use super::runner::Worker;
use super::sweep::spawn_sweep;
use super::wait::wait_for_queued;

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
}

/// One running execution's local tokens.
#[derive(Debug, Clone)]
struct Local {
    cancel: CancellationToken,
    drained: CancellationToken,
}

#[derive(Debug)]
struct Inner {
    worker: Worker,
    store: Arc<dyn ExecutionStore>,
    options: PoolOptions,
    owner_id: String,
    slots: Option<Arc<Semaphore>>,
    wanted: Mutex<VecDeque<String>>,
    wake: Notify,
    local: Mutex<HashMap<String, Local>>,
    tasks: TaskTracker,
    claiming: CancellationToken,
    stopped: CancellationToken,
    events: Arc<Mutex<Option<mpsc::UnboundedSender<PoolEvent>>>>,
    /// The receiver buffering from the start (`events_from_start`), until taken.
    first_events: Mutex<Option<mpsc::UnboundedReceiver<PoolEvent>>>,
    /// The pool's entry in the store's worker registry.
    registration: Registration,
}

/// Claims and runs queued executions (cheap to clone).
#[derive(Debug, Clone)]
pub struct WorkerPool {
    inner: Arc<Inner>,
}

/// What [`WorkerPool::shutdown`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Executions that finished during the drain timeout.
    pub finished: usize,
    /// Executions failed closed after it.
    pub failed_closed: Vec<String>,
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

    /// How many executions run now.
    pub fn running(&self) -> usize {
        lock(&self.inner.local).len()
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
        report.finished = before.saturating_sub(report.failed_closed.len());
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

    fn local_entry(&self, execution_id: &str) -> Local {
        lock(&self.inner.local)
            .entry(execution_id.to_owned())
            .or_insert_with(|| Local {
                // Not a child of `claiming`: a drain stops claiming but lets executions run.
                cancel: CancellationToken::new(),
                drained: CancellationToken::new(),
            })
            .clone()
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
                .run_claimed(claimed, local.cancel, local.drained)
                .await;
            let event = match ended {
                Ok(record) => PoolEvent::Finished {
                    execution_id: id.clone(),
                    outcome: record.outcome,
                    error_code: None,
                },
                Err(error) => {
                    tracing::warn!(execution.id = %id, %error, "execution worker ended with an error");
                    PoolEvent::Finished {
                        execution_id: id.clone(),
                        outcome: None,
                        error_code: Some(error.code().to_owned()),
                    }
                }
            };
            if let PoolEvent::Finished {
                outcome, error_code, ..
            } = &event
            {
                let label = outcome
                    .map(|outcome| outcome.as_str().to_owned())
                    .or_else(|| error_code.clone())
                    .unwrap_or_default();
                crate::metrics::Metrics::global().count_worker_execution(&label);
            }
            lock(&pool.inner.local).remove(&id);
            drop(permit);
            pool.emit(event);
        });
    }

    fn emit(&self, event: PoolEvent) {
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
