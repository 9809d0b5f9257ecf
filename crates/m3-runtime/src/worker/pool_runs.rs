//! How a pool's runs end: reported and their slot freed, handed over, or parked (kept as
//! leases and an index entry) and brought back from the store.

use m3_types::Result;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::park::ParkedEntry;
use super::pool::{PoolEvent, WorkerPool, lock};
use super::released::{Parked, RunEnd};

impl WorkerPool {
    /// Whether a run started now parks a long wait (a registered worker that still claims).
    pub(super) fn parks(&self) -> bool {
        self.inner.options.heartbeat.is_some() && !self.inner.claiming.is_cancelled()
    }

    /// Reports how a run of `id` ended and frees its slot, or keeps it parked.
    pub(super) async fn ended(
        &self,
        id: &str,
        ended: Result<RunEnd>,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let id = id.to_owned();
        let event = match ended {
            Ok(RunEnd::Parked(parked)) => {
                lock(&self.inner.local).remove(&id);
                // A parked execution holds no files, tasks or connections: its slot is free
                // for another while it waits.
                drop(permit);
                self.keep_parked(*parked).await;
                return;
            }
            Ok(RunEnd::Record(record)) if !record.is_finished() => {
                lock(&self.inner.handed_over).push(id.clone());
                PoolEvent::HandedOver {
                    execution_id: id.clone(),
                    successor: record.lease.map(|l| l.owner_id).unwrap_or_default(),
                }
            }
            Ok(RunEnd::Record(record)) => PoolEvent::Finished {
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
            outcome,
            error_code,
            ..
        } = &event
        {
            let label = outcome
                .map(|outcome| outcome.as_str().to_owned())
                .or_else(|| error_code.clone())
                .unwrap_or_default();
            crate::metrics::Metrics::global().count_worker_execution(&label);
        }
        lock(&self.inner.local).remove(&id);
        drop(permit);
        self.emit(event);
    }

    /// Keeps `parked`'s leases and indexes it; brings it back at once if the pool began to
    /// stop meanwhile (it is then handed over like a running one).
    async fn keep_parked(&self, parked: Parked) {
        let hold = match self.inner.worker.hold_parked(&parked).await {
            Ok(hold) => hold,
            Err(error) => {
                // Nobody renews its leases: recovery fails it closed when they expire.
                tracing::warn!(execution.id = %parked.lease.execution_id, %error, "cannot keep a parked execution's leases");
                return;
            }
        };
        let id = parked.lease.execution_id.clone();
        self.emit(PoolEvent::Parked {
            execution_id: id.clone(),
            round_id: parked.round_id().to_owned(),
        });
        self.inner.parked.insert(ParkedEntry { parked, hold });
        if self.inner.claiming.is_cancelled()
            && let Some(entry) = self.inner.parked.take(&id)
        {
            self.spawn_resume(entry);
        }
    }

    /// Brings parked executions back: those touched on the feed (`touched`), and those due.
    pub(super) fn wake_parked(&self, touched: Option<&str>) {
        if let Some(id) = touched {
            if let Some(entry) = self.inner.parked.take(id) {
                self.spawn_resume(entry);
            }
            return;
        }
        let now = m3_store::store_now(self.inner.store.clock().as_ref());
        let (due, lost) = self.inner.parked.take_due(now);
        for id in lost {
            tracing::warn!(execution.id = %id, "a parked execution lost its lease; recovery ends it");
        }
        for entry in due {
            self.spawn_resume(entry);
        }
    }

    /// Runs a parked execution again from the store.
    pub(super) fn spawn_resume(&self, entry: ParkedEntry) {
        let id = entry.parked.lease.execution_id.clone();
        let local = self.local_entry(&id);
        self.emit(PoolEvent::Resumed {
            execution_id: id.clone(),
        });
        let pool = self.clone();
        let span = crate::telemetry::execution_span(&id);
        self.inner.tasks.spawn(
            async move {
                let ParkedEntry { hold, .. } = entry;
                // Its answer is delivered at once: over the concurrency limit if need be.
                let permit = pool
                    .inner
                    .slots
                    .as_ref()
                    .and_then(|slots| std::sync::Arc::clone(slots).try_acquire_owned().ok());
                let record = pool.inner.store.get_execution(&id).await;
                // The run renews both leases from here on.
                drop(hold);
                let ended = match record {
                    Ok(Some(record)) => {
                        let stops = local.stops(pool.parks());
                        pool.inner.worker.run_adopted(record, stops, false).await
                    }
                    Ok(None) => Err(m3_types::Error::not_found("a parked execution is gone")),
                    Err(error) => Err(error),
                };
                pool.ended(&id, ended, permit).await;
            }
            .instrument(span),
        );
    }
}
