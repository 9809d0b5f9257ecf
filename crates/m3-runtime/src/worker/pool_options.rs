//! [`PoolOptions`]: how a [`WorkerPool`](super::WorkerPool) runs, with every default.

use std::time::Duration;

use super::sweep::SweepOptions;
use crate::spec::DEFAULT_LEASE;

/// Settings of a [`WorkerPool`](super::WorkerPool); every setter documents its default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolOptions {
    /// At most this many executions at once (`None`: no limit).
    pub concurrency: Option<usize>,
    /// Claim any queued execution of the store (`m3 worker`), not only those handed to
    /// [`WorkerPool::submit`](super::WorkerPool::submit).
    pub claim_queue: bool,
    /// The lease a claim takes before the execution's own lease applies.
    pub claim_lease: Duration,
    /// How long shutdown lets running executions finish before failing them closed.
    pub drain_timeout: Duration,
    /// The periodic recovery sweep (`None`: off).
    pub sweep: Option<SweepOptions>,
    /// How often an idle pool that claims the queue tries a claim without a wake-up: its
    /// one safety read per process, whatever the store's signal does.
    pub idle_poll: Duration,
    /// Buffer [`PoolEvent`](super::PoolEvent)s from the start, for the first [`WorkerPool::events`](super::WorkerPool::events) call (so
    /// a claim made at once is not missed); otherwise events are sent only while
    /// somebody subscribed.
    pub events_from_start: bool,
    /// How often the pool renews its entry in the store's worker registry (`None`: it
    /// does not register).
    pub heartbeat: Option<Duration>,
    /// Take executions other workers hand over and claim nothing new (`m3 worker
    /// --handover-only`: the successor in a rolling deploy). Needs a `heartbeat`: only a
    /// registered worker is offered executions. Default false.
    pub handover_only: bool,
}

/// Default `m3 worker` concurrency.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Default drain timeout.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Default heartbeat of a pool's entry in the worker registry.
pub const DEFAULT_WORKER_HEARTBEAT: Duration = Duration::from_secs(10);
/// Default idle poll of the queue: the store signal's short fallback (1 s).
pub const DEFAULT_IDLE_POLL: Duration = m3_store::signal::DEFAULT_FALLBACK_POLL;

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            concurrency: None,
            claim_queue: false,
            claim_lease: DEFAULT_LEASE,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            sweep: Some(SweepOptions::default()),
            idle_poll: DEFAULT_IDLE_POLL,
            events_from_start: false,
            heartbeat: None,
            handover_only: false,
        }
    }
}

impl PoolOptions {
    /// The settings of `m3 worker`: claims the whole queue, [`DEFAULT_CONCURRENCY`] at once,
    /// registered in the store's worker registry.
    pub fn queue_worker() -> Self {
        Self {
            concurrency: Some(DEFAULT_CONCURRENCY),
            claim_queue: true,
            heartbeat: Some(DEFAULT_WORKER_HEARTBEAT),
            ..Self::default()
        }
    }

    /// At most `n` executions at once (default: no limit; `m3 worker`: 16). Zero is one.
    #[must_use]
    pub fn concurrency(mut self, n: Option<usize>) -> Self {
        self.concurrency = n.map(|n| n.max(1));
        self
    }

    /// Whether to claim any queued execution (default false).
    #[must_use]
    pub fn claim_queue(mut self, yes: bool) -> Self {
        self.claim_queue = yes;
        self
    }

    /// The claim's lease (default 30 s).
    #[must_use]
    pub fn claim_lease(mut self, lease: Duration) -> Self {
        self.claim_lease = lease.max(Duration::from_millis(100));
        self
    }

    /// The drain timeout (default 30 s).
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The recovery sweep (default: every 15 s, no queue age).
    #[must_use]
    pub fn sweep(mut self, sweep: Option<SweepOptions>) -> Self {
        self.sweep = sweep;
        self
    }

    /// Whether events are buffered from the start (default false).
    #[must_use]
    pub fn events_from_start(mut self, yes: bool) -> Self {
        self.events_from_start = yes;
        self
    }

    /// The idle poll of the queue (default 1 s, at least 1 ms).
    #[must_use]
    pub fn idle_poll(mut self, poll: Duration) -> Self {
        self.idle_poll = poll.max(Duration::from_millis(1));
        self
    }

    /// How often the pool renews its worker-registry entry (at least 10 ms; `None`, the
    /// default: it does not register; [`PoolOptions::queue_worker`]: every 10 s). A worker silent for six heartbeats (and at least a
    /// minute) is pruned from the registry by the others.
    #[must_use]
    pub fn heartbeat(mut self, every: Option<Duration>) -> Self {
        self.heartbeat = every.map(|every| every.max(Duration::from_millis(10)));
        self
    }

    /// Only takes handed-over executions; claims nothing from the queue.
    #[must_use]
    pub fn handover_only(mut self, yes: bool) -> Self {
        self.handover_only = yes;
        if yes {
            self.claim_queue = false;
        }
        self
    }
}
