//! How a coordinator ends a round that cannot be answered: the failure it records
//! (the recovery path for a lost lease, else `fail` with the error's code), the
//! budget it counts, and the turn it resumes.

use m3_store::{LeaseRef, RoundFailure, RoundRef};
use m3_types::{Error, Result, RoundFailureCode, messages};

use super::lifecycle::{Active, Coordinator};
use crate::lease::round as renewal;

impl Coordinator {
    /// Why the wait ended with the round still pending (a handover, or parking), if it did.
    pub(crate) fn released(&self) -> Option<super::lifecycle::Release> {
        self.lock().released.clone()
    }

    /// Fails the active round (if any) with `error`.
    pub(crate) async fn fail_round(&self, error: &Error) {
        self.fail_active(error).await;
    }

    /// Closes the coordinator: later rounds are refused and the active round,
    /// if any, fails with `error`.
    pub(crate) async fn close(&self, error: &Error) {
        self.lock().closed = true;
        self.fail_active(error).await;
    }

    /// Fails the active round (if any) with `error`, counts it against the budget and
    /// resumes the turn.
    pub(super) async fn fail_active(&self, error: &Error) {
        let Some(active) = self.lock().active.take() else {
            return;
        };
        if self.lock().released.is_some() {
            // The successor holds the round now; dropping `active` stops this worker's
            // renewal of its lease.
            return;
        }
        let Active {
            round,
            lease,
            round_index,
            recovery,
            renewal: guard,
            ..
        } = active;
        drop(guard);
        let lost = recovery.take().is_some();
        if let Err(e) = self.record_failure(&round, &lease, error, lost).await {
            tracing::warn!(round.id = %round.round_id, error = %e, "could not record the round failure");
        }
        self.lock().rounds += 1;
        tracing::info!(round.id = %round.round_id, round_index, code = error.code(), "managed elicitation round failed");
        self.resume_running_turn().await;
    }

    /// Writes the round's failure: the recovery path for a recovery error or a lost lease
    /// (`lost`), else `fail` with the error's code and a fixed message.
    async fn record_failure(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        error: &Error,
        lost: bool,
    ) -> Result<()> {
        if lost || error.is_recovery() {
            return self
                .retrying("fail_recovery", |_| {
                    renewal::fail_recovery(&*self.store, round, lease, error.message())
                })
                .await;
        }
        let message = if error.is_cancelled() {
            messages::ELICITATION_CANCELLED
        } else if error.is_timeout() {
            messages::ELICITATION_TIMED_OUT
        } else {
            "managed-input lifecycle failed"
        };
        let failure = RoundFailure::new(RoundFailureCode::of_error(error).as_str(), message);
        let failed = self
            .retrying("fail", |_| self.store.fail(round, lease, failure.clone()))
            .await;
        match failed {
            Ok(_) => Ok(()),
            Err(e) if e.is_state() => Ok(()), // already resolved or failed
            Err(e) => Err(e),
        }
    }
}
