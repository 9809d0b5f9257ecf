//! Parking: an execution whose transferable round waits longer than a moment keeps only its
//! leases (renewed in batches with the worker's others) and an index entry in the pool; its
//! task, its connections and its buffers are gone. The round's answer, a cancel request, or
//! a due deadline, reminder or policy brings it back from the store, exactly as a successor
//! takes over a handed-over execution (docs/workers.md, "Waiting costs almost nothing").

use std::sync::Arc;

use futures_util::FutureExt;
use m3_store::{LeaseRef, RoundRef};
use m3_types::Result;
use time::OffsetDateTime;

use super::released::{Held as Released, Parked};
use super::runner::Worker;
use crate::lease::{Held, Holding};

/// The renewals of a parked execution's two leases; dropping it stops them.
#[derive(Debug)]
pub(crate) struct ParkedHold {
    execution: Holding,
    round: Holding,
}

impl ParkedHold {
    /// Whether either lease could not be kept (the execution is then recovery's).
    pub(crate) fn is_lost(&mut self) -> bool {
        self.execution.ended().now_or_never().is_some()
            || self.round.ended().now_or_never().is_some()
    }
}

impl Worker {
    /// Records the checkpoint and returns what the pool keeps of the parked execution.
    pub(super) async fn park(
        &self,
        held: &Released<'_>,
        round: RoundRef,
        round_lease: LeaseRef,
        wake_at: Option<OffsetDateTime>,
    ) -> Result<Parked> {
        self.record_checkpoint(held).await?;
        let now = m3_store::store_now(self.store().clock().as_ref());
        let turn_ends = now + held.timeout_left;
        tracing::debug!(round.id = %round.round_id, "execution parked until its round is answered");
        Ok(Parked {
            lease: held.lease.clone(),
            round,
            round_lease,
            wake_at: wake_at.map_or(turn_ends, |at| at.min(turn_ends)),
            ttl: held.spec.lease(),
            renew_every: held.spec.renew_every(),
        })
    }

    /// Keeps renewing the leases of `parked` until the hold is dropped.
    ///
    /// # Errors
    /// A lease that can no longer be renewed (`managed_input_conflict`: it expired, the
    /// execution is recovery's); `storage_error`.
    pub(crate) async fn hold_parked(&self, parked: &Parked) -> Result<ParkedHold> {
        let rounds = self.store().managed_input_store().await?;
        // Renewed at once: checkpointing took some of the time since their last renewal.
        self.store().renew_lease(&parked.lease, parked.ttl).await?;
        rounds
            .renew(&parked.round, &parked.round_lease, parked.ttl)
            .await?;
        let execution = Held::Execution {
            store: Arc::clone(self.store()),
            lease: parked.lease.clone(),
        };
        let round = Held::Round {
            store: rounds,
            round: parked.round.clone(),
            lease: parked.round_lease.clone(),
        };
        Ok(ParkedHold {
            execution: self
                .keeper()
                .hold(execution, parked.ttl, parked.renew_every),
            round: self.keeper().hold(round, parked.ttl, parked.renew_every),
        })
    }
}

/// One parked execution in the pool's index: what it holds while nothing runs for it.
#[derive(Debug)]
pub(crate) struct ParkedEntry {
    pub(crate) parked: Parked,
    pub(crate) hold: ParkedHold,
}

/// The pool's parked executions, by id.
#[derive(Debug, Default)]
pub(crate) struct ParkedIndex {
    entries: std::sync::Mutex<std::collections::HashMap<String, ParkedEntry>>,
}

impl ParkedIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, ParkedEntry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parks `entry`.
    pub(crate) fn insert(&self, entry: ParkedEntry) {
        let id = entry.parked.lease.execution_id.clone();
        self.lock().insert(id, entry);
    }

    /// Takes execution `execution_id` out, if it is parked.
    pub(crate) fn take(&self, execution_id: &str) -> Option<ParkedEntry> {
        self.lock().remove(execution_id)
    }

    /// Takes out every entry due at `now`; drops (and names) those whose leases were lost.
    pub(crate) fn take_due(&self, now: OffsetDateTime) -> (Vec<ParkedEntry>, Vec<String>) {
        let mut entries = self.lock();
        let lost: Vec<String> = entries
            .iter_mut()
            .filter_map(|(id, entry)| entry.hold.is_lost().then(|| id.clone()))
            .collect();
        for id in &lost {
            entries.remove(id);
        }
        let due: Vec<String> = entries
            .iter()
            .filter(|(_, entry)| entry.parked.wake_at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let due = due.iter().filter_map(|id| entries.remove(id)).collect();
        (due, lost)
    }

    /// Takes out every entry (the pool stops).
    pub(crate) fn take_all(&self) -> Vec<ParkedEntry> {
        self.lock().drain().map(|(_, entry)| entry).collect()
    }

    /// How many executions are parked.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
