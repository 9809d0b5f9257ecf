//! A round lease kept by the [`LeaseKeeper`] for the coordinator, and the recovery path
//! taken when it cannot be kept.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::{LeaseRef, ManagedInputStore, RoundFailure, RoundRef};
use m3_types::{Error, ManagedInputStatus, Result, RoundFailureCode};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::keeper::{Held, LeaseKeeper, Renewed};

/// Where the renewal task leaves a recovery error for the waiter.
#[derive(Debug, Default)]
pub(crate) struct RecoverySlot {
    error: Mutex<Option<Error>>,
    notify: Notify,
}

impl RecoverySlot {
    fn set(&self, error: Error) {
        *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        self.notify.notify_one();
    }

    pub(crate) fn take(&self) -> Option<Error> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// Registers the round lease with the worker's [`LeaseKeeper`] (which renews it about every
/// `every`, in one batch with the worker's other leases) and spawns the task that waits for
/// it to end: a lost or expired lease, or a renewal failure that outlasted it, ends the round
/// `failed/recovery_unavailable` and wakes the waiter. Ends quietly when `stop` is cancelled.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn(
    keeper: &LeaseKeeper,
    store: Arc<dyn ManagedInputStore>,
    round: RoundRef,
    lease_ref: LeaseRef,
    lease: Duration,
    every: Duration,
    slot: Arc<RecoverySlot>,
    stop: CancellationToken,
) {
    let held = Held::Round {
        store: Arc::clone(&store),
        round: round.clone(),
        lease: lease_ref.clone(),
    };
    let mut holding = keeper.hold(held, lease, every);
    tokio::spawn(async move {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = holding.ended() => ended,
        };
        drop(holding);
        let Some(message) = loss_message(&*store, &round, ended).await else {
            return;
        };
        if stop.is_cancelled() {
            return;
        }
        if let Err(error) = fail_recovery(&*store, &round, &lease_ref, message).await {
            tracing::warn!(round.id = %round.round_id, %error, "could not record recovery failure");
            slot.set(Error::managed_input_recovery(
                "managed input recovery could not be committed",
            ));
        } else {
            slot.set(
                Error::managed_input_recovery(message)
                    .with_detail("round_id", round.round_id.clone()),
            );
        }
    });
}

/// Why the round cannot go on, from how its lease ended; `None` when the round advanced
/// concurrently (the terminal transition owns shutdown).
async fn loss_message(
    store: &dyn ManagedInputStore,
    round: &RoundRef,
    ended: Result<Renewed>,
) -> Option<&'static str> {
    const WORKER_LOSS: &str = "managed interaction cannot be resumed safely after worker loss";
    match ended {
        Ok(_) => Some(WORKER_LOSS),
        Err(error) if error.is_state() => match store.get_round(round).await {
            Ok(Some(record)) if record.is_recovery_failed() => Some(WORKER_LOSS),
            _ => None,
        },
        Err(error) if error.is_conflict() => {
            tracing::warn!(round.id = %round.round_id, %error, "round lease lost");
            Some("managed interaction cannot be resumed safely after lease loss")
        }
        Err(error) => {
            tracing::warn!(round.id = %round.round_id, %error, "round lease renewal failed");
            Some("managed interaction cannot be resumed safely after lease renewal failure")
        }
    }
}

/// The reference's recovery path: `fail_recovery` (needs an expired lease); if
/// the lease is still live, `fail` with code `recovery_unavailable`; if that
/// raced with expiry, `fail_recovery` once more.
pub(crate) async fn fail_recovery(
    store: &dyn ManagedInputStore,
    round: &RoundRef,
    lease: &LeaseRef,
    message: &str,
) -> Result<()> {
    let message = if message.is_empty() {
        "managed input recovery is unavailable"
    } else {
        message
    };
    if store
        .fail_recovery(round, &lease.lease_token, message)
        .await
        .is_ok()
    {
        return Ok(());
    }
    if already_failed(store, round).await {
        return Ok(());
    }
    if store
        .fail(
            round,
            lease,
            RoundFailure::new(RoundFailureCode::RecoveryUnavailable.as_str(), message),
        )
        .await
        .is_ok()
    {
        return Ok(());
    }
    match store
        .fail_recovery(round, &lease.lease_token, message)
        .await
    {
        Ok(_) => Ok(()),
        Err(_) if already_failed(store, round).await => Ok(()),
        Err(error) => Err(error),
    }
}

async fn already_failed(store: &dyn ManagedInputStore, round: &RoundRef) -> bool {
    matches!(store.get_round(round).await, Ok(Some(r)) if r.status == ManagedInputStatus::Failed)
}
