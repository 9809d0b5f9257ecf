//! A pool's entry in the store's worker registry: announced when the pool starts, renewed
//! every heartbeat (`draining` as soon as the pool stops claiming), retired when it stops.
//! Each heartbeat also prunes the workers silent for six heartbeats (at least a minute).
//! A registry error is logged and tried again at the next heartbeat: the registry says who
//! is alive, it never stops a worker.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::ExecutionStore;
use m3_store::workers::{NewWorker, WorkerState};
use m3_types::Result;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The shortest silence after which a worker is pruned.
const MIN_SILENCE: Duration = Duration::from_secs(60);

/// How many heartbeats a worker may miss before the others prune it.
const MISSED_HEARTBEATS: u32 = 6;

/// How long a stopping pool waits for its entry to be retired: a store that is busy (a
/// writer holding SQLite's lock) must not hold up the stop; the entry is then pruned as
/// silent later.
const RETIRE_WAIT: Duration = Duration::from_secs(2);

/// The running registration of one pool.
#[derive(Debug)]
pub(super) struct Registration {
    task: Mutex<Option<JoinHandle<()>>>,
    stop: CancellationToken,
}

impl Registration {
    /// Registers `worker_id` on `store` every `every` (nothing when `None`); `draining` is
    /// cancelled when the pool stops claiming.
    pub(super) fn start(
        store: Arc<dyn ExecutionStore>,
        worker_id: &str,
        every: Option<Duration>,
        handover_only: bool,
        draining: CancellationToken,
    ) -> Self {
        let stop = CancellationToken::new();
        let task = every.map(|every| {
            let new = NewWorker::new(worker_id, host_name(), std::process::id())
                .handover_only(handover_only);
            tokio::spawn(keep_registered(store, new, every, draining, stop.clone()))
        });
        Self {
            task: Mutex::new(task),
            stop,
        }
    }

    /// Retires the entry and waits until it is gone, the attempt failed, or
    /// [`RETIRE_WAIT`] passed (then the entry is left to be pruned).
    pub(super) async fn retire(&self) {
        self.stop.cancel();
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut task) = task
            && tokio::time::timeout(RETIRE_WAIT, &mut task).await.is_err()
        {
            task.abort();
            tracing::warn!("the store is busy: the worker's registry entry is left to be pruned");
        }
    }
}

/// This host's name, as the registry shows it.
fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

async fn keep_registered(
    store: Arc<dyn ExecutionStore>,
    new: NewWorker,
    every: Duration,
    draining: CancellationToken,
    stop: CancellationToken,
) {
    let mut registered = false;
    loop {
        let state = if draining.is_cancelled() {
            WorkerState::Draining
        } else {
            WorkerState::Running
        };
        if let Err(error) = beat(&*store, &new, state, &mut registered, every).await {
            tracing::warn!(%error, worker_id = %new.worker_id, "cannot renew the worker's registry entry; trying again");
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = draining.cancelled(), if state == WorkerState::Running => {}
            () = stop.cancelled() => break,
        }
    }
    let retired = async { store.worker_registry().await?.retire(&new.worker_id).await };
    if let Err(error) = retired.await {
        tracing::warn!(%error, worker_id = %new.worker_id, "cannot retire the worker's registry entry");
    }
}

/// One heartbeat: announce (again, when the entry was pruned), renew, prune the silent.
async fn beat(
    store: &dyn ExecutionStore,
    new: &NewWorker,
    state: WorkerState,
    registered: &mut bool,
    every: Duration,
) -> Result<()> {
    let registry = store.worker_registry().await?;
    let renewed = *registered && registry.heartbeat(&new.worker_id, state).await?.is_some();
    if !renewed {
        registry.announce(new.clone()).await?;
        if state == WorkerState::Draining {
            registry.heartbeat(&new.worker_id, state).await?;
        }
        *registered = true;
    }
    let silence = (every * MISSED_HEARTBEATS).max(MIN_SILENCE);
    registry.prune_workers(silence).await?;
    Ok(())
}
