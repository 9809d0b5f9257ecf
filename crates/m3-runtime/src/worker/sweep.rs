//! Continuous recovery: every worker (and a long-lived kit) sweeps the store periodically,
//! so an execution whose worker vanished is terminalized (its unresolved rounds failed
//! `recovery_unavailable`) within its lease plus one sweep interval, without anybody
//! reopening the store; optionally, executions queued longer than a maximum age are failed.

use std::sync::Arc;
use std::time::Duration;

use m3_store::{ExecutionStore, FinishExecution, ListExecutions};
use m3_types::{Error, ExecutionOutcome, ExecutionStatus, Result};
use tokio_util::sync::CancellationToken;

use crate::recovery::{RecoveryReport, recover};
use crate::spec::DEFAULT_LEASE;

/// Detail `reason` of the error an execution fails with when it waited in the queue longer
/// than [`SweepOptions::max_queue_age`] (code `timeout`, outcome `timed_out`).
pub const QUEUE_AGE_EXCEEDED: &str = "queue_age_exceeded";

/// How often and what a sweep does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepOptions {
    /// Time between sweeps (default: half the default lease, 15 s).
    pub every: Duration,
    /// Fail executions queued (unclaimed) for longer than this (default: off).
    pub max_queue_age: Option<Duration>,
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self {
            every: DEFAULT_LEASE / 2,
            max_queue_age: None,
        }
    }
}

impl SweepOptions {
    /// Sweeps every `every` (a zero interval is raised to 10 ms).
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(10));
        self
    }

    /// Fails executions that waited longer than `age` in the queue.
    #[must_use]
    pub fn max_queue_age(mut self, age: Option<Duration>) -> Self {
        self.max_queue_age = age;
        self
    }
}

/// One sweep: [`recover`], then the queue-age check when configured. Returns what recovery
/// terminalized and how many queued executions were failed for their age.
///
/// # Errors
/// `storage_error`.
pub async fn sweep_once(
    store: &dyn ExecutionStore,
    options: &SweepOptions,
) -> Result<(RecoveryReport, usize)> {
    let report = recover(store).await?;
    let aged = match options.max_queue_age {
        Some(age) => fail_aged(store, age).await?,
        None => 0,
    };
    Ok((report, aged))
}

/// Fails every still-unclaimed queued execution created more than `age` ago; one that a
/// worker claims meanwhile is left to it (the unleased finish refuses a leased execution).
async fn fail_aged(store: &dyn ExecutionStore, age: Duration) -> Result<usize> {
    let now = m3_store::store_now(store.clock().as_ref());
    let oldest = time::Duration::try_from(age)
        .ok()
        .and_then(|age| now.checked_sub(age));
    let Some(cutoff) = oldest else {
        return Ok(0);
    };
    let queued = store
        .list_executions(ListExecutions::new().with_lifecycle(ExecutionStatus::Queued))
        .await?;
    let mut failed = 0;
    for record in queued
        .iter()
        .filter(|r| r.lease.is_none() && r.created_at < cutoff)
    {
        let error = Error::timeout(format!(
            "execution waited longer than the maximum queue age of {} s without a worker",
            age.as_secs_f64()
        ))
        .with_detail("reason", QUEUE_AGE_EXCEEDED);
        let request = FinishExecution::new(&record.execution_id, ExecutionOutcome::TimedOut)
            .with_error(error.to_error_info());
        match store.finish(request).await {
            Ok(_) => failed += 1,
            Err(e) if e.is_conflict() || e.is_state() || e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(failed)
}

/// Sweeps `store` every `options.every` until `stop` is cancelled (the first sweep after
/// one interval). Errors are logged, never fatal: the next sweep tries again.
pub fn spawn_sweep(
    store: Arc<dyn ExecutionStore>,
    options: SweepOptions,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = options.every;
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match sweep_once(&*store, &options).await {
                Ok((report, aged)) => {
                    if !report.executions.is_empty() || aged > 0 {
                        tracing::info!(recovered = report.executions.len(), aged, "recovery sweep");
                    }
                }
                Err(error) => tracing::warn!(%error, "recovery sweep failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use m3_store::memory::MemoryExecutionStore;
    use m3_store::{ExecutionStore, NewExecution};
    use m3_types::{ExecutionOutcome, ExecutionStatus, ManualClock};

    use super::*;

    #[tokio::test]
    async fn the_queue_age_fails_only_executions_that_waited_longer_and_is_off_by_default() {
        let clock =
            ManualClock::new(time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000));
        let store = MemoryExecutionStore::with_clock(Arc::new(clock.clone()));
        let queue = |store: MemoryExecutionStore| async move {
            let id = store
                .create_execution(NewExecution::new(serde_json::json!({})))
                .await
                .unwrap()
                .execution_id;
            store
                .transition(&id, ExecutionStatus::Queued, None)
                .await
                .unwrap();
            id
        };
        let old = queue(store.clone()).await;
        clock.advance_std(Duration::from_secs(50));
        let young = queue(store.clone()).await;
        clock.advance_std(Duration::from_secs(20));
        let (_, aged) = sweep_once(&store, &SweepOptions::default()).await.unwrap();
        assert_eq!(aged, 0, "off by default");
        let options = SweepOptions::default().max_queue_age(Some(Duration::from_secs(60)));
        let (_, aged) = sweep_once(&store, &options).await.unwrap();
        assert_eq!(aged, 1);
        let failed = store.get_execution(&old).await.unwrap().unwrap();
        assert_eq!(failed.outcome, Some(ExecutionOutcome::TimedOut));
        let error = failed.error.unwrap();
        assert_eq!(error.code.as_str(), "timeout");
        assert_eq!(error.details["reason"], QUEUE_AGE_EXCEEDED);
        let waiting = store.get_execution(&young).await.unwrap().unwrap();
        assert_eq!(waiting.lifecycle, ExecutionStatus::Queued);
    }
}
