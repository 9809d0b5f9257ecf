//! A successor worker taking over a waiting round after a handover: the round (still
//! pending, or answered during the transfer) is waited for and its delivery started exactly
//! as if this coordinator had created it. The round's lease belongs to the execution's
//! runtime (its owner is the execution, not a worker), so the successor renews it as it is.

use m3_store::signal::Topic;
use m3_store::{LeaseRef, RoundRef};
use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};

use super::lifecycle::{Coordinator, Delivery};
use super::notify;
use super::notify::Waiters;
use super::records;
use super::unattended::Unattended;

impl Coordinator {
    /// Makes `record`, a round of this execution left pending by an earlier run (a
    /// handover, parking), this coordinator's active round and renews its lease: a cancel
    /// or timeout before its answer fails it as it would fail a round this run created.
    pub(crate) fn hold(&self, record: &ManagedInputRecord) {
        if self.lock().active.is_some() {
            return;
        }
        self.lock().rounds = record.round_index;
        let round = RoundRef::of(record);
        let lease = LeaseRef::of(&record.lease);
        self.start_renewal(&round, &lease, record.round_index, true);
    }

    /// Takes over `record`, a round of this execution handed over by its previous worker:
    /// renews its lease, waits for its answer (unless it came during the transfer) and starts
    /// its delivery. A failure fails the round, as for a round this coordinator created.
    ///
    /// # Errors
    /// `managed_input_state` for a round of another execution or one no longer open; the
    /// wait's errors (deadline, lost lease, a failed round).
    /// `announce`: report the round as pending again (a successor's, not a run parked here).
    pub(crate) async fn adopt(
        &self,
        record: ManagedInputRecord,
        announce: bool,
    ) -> Result<Delivery> {
        if record.pending.execution_id != self.execution_id() {
            return Err(Error::managed_input_state(
                "a handed-over round belongs to another execution",
            ));
        }
        let round = RoundRef::of(&record);
        let lease = LeaseRef::of(&record.lease);
        let deadline = record.pending.deadline;
        let waiter = self.notifier.register(&round.round_id)?;
        let registration = notify::Registration::new(&self.notifier, &round.round_id);
        let changes = self
            .executions
            .change_signal()
            .subscribe(Topic::Execution(self.execution_id().to_owned()));
        self.hold(&record);
        let recovery = self
            .lock()
            .active
            .as_ref()
            .map(|active| std::sync::Arc::clone(&active.recovery))
            .ok_or_else(|| Error::managed_input_state("the handed-over round is not held"))?;
        if let Some(hook) = self.on_pending.as_ref().filter(|_| announce) {
            hook.call(self.execution_id(), &round.round_id);
        }
        let waited = async {
            let current = match record.status {
                ManagedInputStatus::ResponseValidated => record.clone(),
                ManagedInputStatus::Pending => {
                    let mut unattended = Unattended::load(
                        &self.executions,
                        record.pending.clone(),
                        &self.settings.remind_at,
                    )
                    .await;
                    let waiters = Waiters {
                        local: &waiter,
                        changes,
                    };
                    self.await_response(
                        &round,
                        &lease,
                        deadline,
                        waiters,
                        &recovery,
                        &mut unattended,
                    )
                    .await?
                }
                ManagedInputStatus::Failed => return Err(records::failed_round_error(&record)),
                other => {
                    return Err(Error::managed_input_state(format!(
                        "a handed-over round is {}, not open",
                        other.as_str()
                    )));
                }
            };
            self.hand_over(&round, &lease, &current, deadline).await
        }
        .await;
        drop(registration);
        match waited {
            Ok(delivery) => Ok(delivery),
            Err(error) => {
                self.fail_active(&error).await;
                Err(error)
            }
        }
    }
}
