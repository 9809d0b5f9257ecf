//! What a round's lease holder does for a round nobody answers: the store's policies
//! (answer after a delay) and the deadline reminders (`round.deadline_approaching` at
//! fractions of the deadline window), both on the store's clock.
//!
//! The policies are read once, when the wait starts (a policy added later applies from the
//! next round on). A policy fires at the round's creation plus its delay, never at or after
//! the deadline. It answers through the store's normal submission (validation against the
//! round's schema, idempotency, the lease) as actor `policy:<name>`, under a key derived
//! from the policy and the round, so a person's answer and the policy's race safely:
//! exactly one is stored, and the other submission is refused. A policy whose content does
//! not fit the round's schema does not answer: a warning (no values) is logged and the
//! round keeps waiting for a person or another policy.

use std::sync::Arc;

use m3_store::policies::{Policy, rules};
use m3_store::{ExecutionStore, LeaseRef, ManagedInputStore, ResponseSubmission, RoundRef};
use m3_types::{
    Actor, ActorSurface, DeadlineReminder, ErrorCode, ManagedInputRecord, PendingElicitationRound,
    Result,
};
use time::OffsetDateTime;

/// The default reminder fractions: half-way through the deadline window, and at 90%.
pub const DEFAULT_REMIND_AT: [f64; 2] = [0.5, 0.9];

/// The policies and reminders of one round's wait.
#[derive(Debug)]
pub(super) struct Unattended {
    round: PendingElicitationRound,
    policies: Vec<Policy>,
    /// Policies that did not fit the round (never tried again for it).
    excluded: Vec<String>,
    /// The reminders still to append, soonest first, with when each is due.
    reminders: Vec<(OffsetDateTime, DeadlineReminder)>,
}

/// What [`Unattended::act`] did.
pub(super) enum Acted {
    /// Nothing ended the wait.
    Waiting,
    /// A policy's answer (or a person's, which won the race) is stored.
    Answered(Box<ManagedInputRecord>),
}

impl Unattended {
    /// The policies and reminders for `round`, read now. A store whose policies cannot be
    /// read waits without them (a warning says so): a person can still answer.
    pub(super) async fn load(
        executions: &Arc<dyn ExecutionStore>,
        round: PendingElicitationRound,
        remind_at: &[f64],
    ) -> Self {
        let policies = match executions.policy_store().await {
            Ok(store) => store.list_policies().await,
            Err(error) => Err(error),
        };
        let policies = policies.unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot read the policies; waiting without them");
            Vec::new()
        });
        let mut reminders: Vec<_> = round
            .deadline
            .map(|deadline| {
                remind_at
                    .iter()
                    .filter_map(|fraction| DeadlineReminder::new(*fraction, deadline).ok())
                    .map(|reminder| (reminder.due_at(round.created_at), reminder))
                    .collect()
            })
            .unwrap_or_default();
        reminders.sort_by_key(|(due, _)| *due);
        Self {
            round,
            policies,
            excluded: Vec::new(),
            reminders,
        }
    }

    /// When something is next due: a reminder or a policy (`None`: nothing).
    pub(super) fn next_due(&self) -> Option<OffsetDateTime> {
        let reminder = self.reminders.first().map(|(due, _)| *due);
        let policy =
            rules::first_to_fire(&self.policies, &self.round, &self.excluded).map(|(_, at)| at);
        reminder.into_iter().chain(policy).min()
    }

    /// Appends every reminder due at `now` (in order), then fires the first policy due.
    pub(super) async fn act(
        &mut self,
        executions: &Arc<dyn ExecutionStore>,
        store: &Arc<dyn ManagedInputStore>,
        lease: &LeaseRef,
        now: OffsetDateTime,
    ) -> Result<Acted> {
        while let Some((due, reminder)) = self.reminders.first().copied() {
            if due > now {
                break;
            }
            executions
                .remind_deadline(&self.round.execution_id, &self.round.round_id, reminder)
                .await?;
            self.reminders.remove(0);
        }
        loop {
            let Some((policy, at)) =
                rules::first_to_fire(&self.policies, &self.round, &self.excluded)
            else {
                return Ok(Acted::Waiting);
            };
            if at > now {
                return Ok(Acted::Waiting);
            }
            let policy = policy.clone();
            match self.fire(store, lease, &policy).await? {
                Some(record) => return Ok(Acted::Answered(Box::new(record))),
                None => self.excluded.push(policy.name),
            }
        }
    }

    /// Submits `policy`'s answer. `None` when it does not fit the round (logged); the
    /// stored record when an answer (this one, or a person's that won) is stored.
    async fn fire(
        &self,
        store: &Arc<dyn ManagedInputStore>,
        lease: &LeaseRef,
        policy: &Policy,
    ) -> Result<Option<ManagedInputRecord>> {
        let Some(answers) = rules::answers(policy, &self.round) else {
            return Ok(None);
        };
        let actor = Actor::new(policy.principal(), ActorSurface::Policy)?;
        let key = rules::idempotency_key(policy, &self.round.round_id);
        let submission = ResponseSubmission::new(answers, key).with_actor(actor);
        let round = RoundRef::new(&self.round.execution_id, &self.round.round_id);
        match store.submit_responses(&round, lease, submission).await {
            Ok(record) => {
                tracing::info!(policy = %policy.name, "a policy answered the round");
                Ok(Some(record))
            }
            Err(error) if error.error_code() == ErrorCode::ManagedInputInvalid => {
                // The message and details name fields and rules, never values.
                tracing::warn!(policy = %policy.name, code = error.code(), reason = ?error.reason(),
                    "the policy's answer does not fit the round's schema; the round keeps waiting");
                Ok(None)
            }
            Err(error) if error.error_code() == ErrorCode::ManagedInputConflict => {
                // A person (or another worker) answered first: that answer stands.
                match store.get_round(&round).await? {
                    Some(record) if record.responses.is_some() => Ok(Some(record)),
                    _ => Err(error),
                }
            }
            Err(error) => Err(error),
        }
    }
}
