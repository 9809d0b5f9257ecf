//! The worker's background tasks: execution-lease heartbeat and cancel-flag watch.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::signal::Topic;
use m3_store::{ExecutionLeaseRef, ExecutionStore};
use m3_types::Error;
use tokio_util::sync::CancellationToken;

use crate::lease::{Held, LeaseKeeper};

/// The error that ended the heartbeat, for the worker to report.
#[derive(Debug, Default)]
pub(super) struct LostError(Mutex<Option<Error>>);

impl LostError {
    pub(super) fn take(&self) -> Option<Error> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Registers the execution lease with the worker's [`LeaseKeeper`] (renewed about every
/// `every`, batched with the worker's other leases); when the lease is lost or expires,
/// records the error and cancels `lost`. Ends when `stop` is cancelled.
pub(super) fn spawn_heartbeat(
    keeper: &LeaseKeeper,
    executions: Arc<dyn ExecutionStore>,
    lease: ExecutionLeaseRef,
    ttl: Duration,
    every: Duration,
    lost: CancellationToken,
    stop: CancellationToken,
) -> Arc<LostError> {
    let slot = Arc::new(LostError::default());
    let out = Arc::clone(&slot);
    let held = Held::Execution {
        store: executions,
        lease: lease.clone(),
    };
    let mut holding = keeper.hold(held, ttl, every);
    tokio::spawn(async move {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = holding.ended() => ended,
        };
        drop(holding);
        if stop.is_cancelled() {
            return;
        }
        let error = match ended {
            Err(error) => error,
            Ok(_) => return,
        };
        tracing::warn!(execution.id = %lease.execution_id, %error, "execution lease renewal failed");
        let reason = if error.is_conflict() {
            "lease loss"
        } else {
            "lease renewal failure"
        };
        *slot.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(
            Error::managed_input_recovery(format!(
                "managed interaction cannot be resumed safely after {reason}"
            ))
            .with_detail("cause", error.to_string()),
        );
        lost.cancel();
    });
    out
}

/// Reads the durable cancel flag whenever the store signals a change of the
/// execution (and at the signal's slow fallback poll), and cancels `cancel`
/// when it is set (by any process). Ends when `stop` is cancelled.
pub(super) fn spawn_cancel_poll(
    executions: Arc<dyn ExecutionStore>,
    execution_id: String,
    cancel: CancellationToken,
    stop: CancellationToken,
) {
    let mut changes = executions
        .change_signal()
        .subscribe(Topic::Execution(execution_id.clone()));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
            }
            match executions.is_cancel_requested(&execution_id).await {
                Ok(true) => {
                    cancel.cancel();
                    return;
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::debug!(execution.id = %execution_id, %error, "cancel poll failed")
                }
            }
        }
    });
}
