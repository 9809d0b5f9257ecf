//! The wait for a round's answer: woken by this process's responders, the store's change
//! signal, a lost lease and the deadline; acting on due reminders and policies; released
//! for a handover or parking.

use std::time::Duration;

use m3_store::{LeaseRef, RoundRef};
use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};
use time::OffsetDateTime;

use super::lifecycle::{Coordinator, PARK_AFTER, Release};
use super::notify::{Waiters, sleep_at_most};
use super::records;
use super::unattended::{Acted, Unattended};
use crate::lease::round::RecoverySlot;
use crate::store_retry::{Backoff, is_connection_lost};

/// How often a wait with a deadline looks at the store's clock again.
const DEADLINE_RECHECK: Duration = Duration::from_secs(1);

impl Coordinator {
    /// Waits for the round's response: wakes on this process's responders, the store's
    /// change signal, a lost lease and the deadline, and re-reads the round each time.
    ///
    /// A read that lost its database connection (a server restart) is repeated with
    /// backoff for as long as the round's lease is kept: the lease keeper rides out the
    /// same outage and ends the wait (through `recovery`) only once the lease is gone.
    pub(super) async fn await_response(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        deadline: Option<OffsetDateTime>,
        mut waiters: Waiters<'_>,
        recovery: &RecoverySlot,
        unattended: &mut Unattended,
    ) -> Result<ManagedInputRecord> {
        let mut backoff = Backoff::default();
        let transferable = self.lock().active.as_ref().is_some_and(|a| a.transferable);
        let park_at = tokio::time::Instant::now() + PARK_AFTER;
        // After a lost connection: re-read after this pause, not at the next wake-up.
        let mut reread_after: Option<Duration> = None;
        loop {
            let budget = self.wait_budget(round, deadline, unattended.next_due())?;
            if budget.is_zero() {
                // A reminder or a policy is due (always before the deadline, checked above).
                match unattended
                    .act(&self.executions, &self.store, lease, self.now())
                    .await
                {
                    Ok(Acted::Answered(record)) => return Ok(*record),
                    Ok(Acted::Waiting) => continue,
                    Err(error) if is_connection_lost(&error) => {
                        let pause = backoff.next_pause();
                        tracing::warn!(%error, ?pause, "lost the database connection while a reminder or policy was due; trying again");
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Err(error) => return Err(error),
                }
            }
            let timer_only = tokio::select! {
                () = waiters.local.notified() => false,
                _ = waiters.changes.changed() => false,
                () = recovery.notified() => false,
                () = self.settings.handover.cancelled(), if transferable => {
                    self.lock().released = Some(Release::HandOver);
                    return Err(Error::cancelled("the round's execution is handed to another worker"));
                }
                () = tokio::time::sleep_until(park_at), if transferable && self.settings.park => {
                    let wake_at = deadline.into_iter().chain(unattended.next_due()).min();
                    let (round, lease) = (round.clone(), lease.clone());
                    self.lock().released = Some(Release::Park { round, lease, wake_at });
                    return Err(Error::cancelled("the round's execution is parked until it is answered"));
                }
                () = sleep_at_most(budget.min(reread_after.unwrap_or(Duration::MAX))) => reread_after.is_none(),
            };
            if timer_only {
                // Nothing changed: only the deadline needs a look, at the top.
                continue;
            }
            if let Some(error) = recovery.take() {
                return Err(error);
            }
            let record = match self.store.get_round(round).await {
                Err(error) if is_connection_lost(&error) => {
                    let pause = backoff.next_pause();
                    tracing::warn!(%error, ?pause, "lost the database connection while waiting; reading again");
                    reread_after = Some(pause);
                    continue;
                }
                read => {
                    backoff.reset();
                    reread_after = None;
                    read?
                }
            };
            let record = record.ok_or_else(|| {
                Error::managed_input_state("managed-input round disappeared while waiting")
            })?;
            match record.status {
                ManagedInputStatus::Pending => {}
                ManagedInputStatus::ResponseValidated => return Ok(record),
                ManagedInputStatus::Failed => return Err(records::failed_round_error(&record)),
                other => {
                    return Err(Error::managed_input_state(format!(
                        "managed-input round moved to {} while waiting",
                        other.as_str()
                    )));
                }
            }
        }
    }

    /// How long the wait may sleep: until the deadline or the next reminder or policy
    /// (zero: one is due now), at most [`DEADLINE_RECHECK`] with either (they are on the
    /// store's clock, which need not keep pace with the timer: a test's manual clock
    /// jumps); with neither, until a wake-up (the subscription's own fallback poll bounds
    /// the sleep), never on a short timer.
    ///
    /// # Errors
    /// `timeout` once the deadline has passed.
    pub(super) fn wait_budget(
        &self,
        round: &RoundRef,
        deadline: Option<OffsetDateTime>,
        next_due: Option<OffsetDateTime>,
    ) -> Result<Duration> {
        let now = self.now();
        if deadline.is_some_and(|deadline| deadline <= now) {
            return Err(records::deadline_error(round));
        }
        Ok(deadline
            .into_iter()
            .chain(next_due)
            .min()
            .map_or(Duration::MAX, |until| {
                let left = until - now;
                if left <= time::Duration::ZERO {
                    Duration::ZERO
                } else {
                    left.unsigned_abs().min(DEADLINE_RECHECK)
                }
            }))
    }
}
