//! Round lease renewal and the recovery path taken when it fails.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::{LeaseRef, ManagedInputStore, RoundFailure, RoundRef};
use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result, RoundFailureCode};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::lease_renewal::{LeaseDeadline, renew_until_expiry};

/// Where the renewal task leaves a recovery error for the waiter.
#[derive(Debug, Default)]
pub(super) struct RecoverySlot {
    error: Mutex<Option<Error>>,
    notify: Notify,
}

impl RecoverySlot {
    fn set(&self, error: Error) {
        *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        self.notify.notify_one();
    }

    pub(super) fn take(&self) -> Option<Error> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(super) async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// Spawns the renewal task: every `every`, `renew` the round lease for `lease`.
/// A transient failure is retried while the lease is live; a lost or expired lease ends the
/// round `failed/recovery_unavailable` and wakes the waiter.
pub(super) fn spawn(
    store: Arc<dyn ManagedInputStore>,
    round: RoundRef,
    lease_ref: LeaseRef,
    lease: Duration,
    every: Duration,
    slot: Arc<RecoverySlot>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut deadline = LeaseDeadline::granted_now(lease);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let renewed = renew_until_expiry(&mut deadline, every, &stop, || {
                store.renew(&round, &lease_ref, lease)
            });
            let Some(renewed) = renewed.await else {
                return;
            };
            let message = match renewed {
                Ok(record) if is_recovery_failed(&record) => {
                    "managed interaction cannot be resumed safely after worker loss"
                }
                Ok(_) => continue,
                Err(error) if error.is_state() => match store.get_round(&round).await {
                    Ok(Some(record)) if is_recovery_failed(&record) => {
                        "managed interaction cannot be resumed safely after worker loss"
                    }
                    // The round advanced concurrently: the terminal transition owns shutdown.
                    _ => return,
                },
                Err(error) if error.is_conflict() => {
                    tracing::warn!(round.id = %round.round_id, %error, "round lease lost");
                    "managed interaction cannot be resumed safely after lease loss"
                }
                Err(error) => {
                    tracing::warn!(round.id = %round.round_id, %error, "round lease renewal failed");
                    "managed interaction cannot be resumed safely after lease renewal failure"
                }
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
            return;
        }
    });
}

fn is_recovery_failed(record: &ManagedInputRecord) -> bool {
    record.status == ManagedInputStatus::Failed
        && record.failure() == Some(RoundFailureCode::RecoveryUnavailable)
}

/// The reference's recovery path: `fail_recovery` (needs an expired lease); if
/// the lease is still live, `fail` with code `recovery_unavailable`; if that
/// raced with expiry, `fail_recovery` once more.
pub(super) async fn fail_recovery(
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
