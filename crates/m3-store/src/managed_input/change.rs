//! [`RoundChange`]: one checked mutation of a stored round, the single write a
//! [`ManagedInputStore`](super::ManagedInputStore) backend implements
//! ([`write_round`](super::ManagedInputStore::write_round)).
//!
//! The trait's provided methods (`claim_round`, `submit_responses`, the delivery
//! transitions, `fail`, `fail_recovery`) check their arguments once, here, and hand the
//! backend a `RoundChange`; the backend reads the round, asks [`RoundChange::write`] what to
//! store, and stores it in one atomic step.

use m3_types::{ManagedInputRecord, Result};
use time::OffsetDateTime;

use super::request::{ClaimRound, LeaseRef, ResponseSubmission, RoundFailure, RoundRef};
use super::rules::{
    RoundWrite, Transition, check_claim_args, check_fail_args, check_fail_recovery_args,
    check_lease_args, check_submit_args,
};

/// What a [`RoundChange`] does to its round.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RoundOp {
    /// `claim_round`: hands an expired lease to a new owner, given delivery evidence.
    Claim(ClaimRound),
    /// `submit_responses`: validates and stores the responses, idempotently.
    Submit {
        /// The writer's lease.
        lease: LeaseRef,
        /// The responses and their idempotency key.
        submission: ResponseSubmission,
    },
    /// `start_delivery`, `mark_delivered` or `resolve`.
    Transition {
        /// The writer's lease.
        lease: LeaseRef,
        /// The step of the delivery state machine.
        transition: Transition,
    },
    /// `fail`: fails an unresolved round with a code and message.
    Fail {
        /// The writer's lease.
        lease: LeaseRef,
        /// The failure to record.
        failure: RoundFailure,
    },
    /// `fail_recovery`: the recovery decision on an expired lease.
    FailRecovery {
        /// The last known lease token of the round.
        expected_lease_token: String,
        /// The failure message.
        message: String,
    },
}

/// One mutation of one round whose arguments passed their checks (see
/// [`RoundChange::new`]): what [`ManagedInputStore::write_round`](super::ManagedInputStore::write_round)
/// receives.
#[derive(Debug, Clone)]
pub struct RoundChange {
    round: RoundRef,
    op: RoundOp,
}

impl RoundChange {
    /// `op` on `round`, after the operation's argument checks (non-empty ids, owner,
    /// token, idempotency key, failure code and message; a positive lease duration).
    ///
    /// # Errors
    /// `managed_input_invalid` ([`Reason::EmptyArgument`](m3_types::Reason::EmptyArgument),
    /// [`Reason::InvalidLeaseDuration`](m3_types::Reason::InvalidLeaseDuration)).
    pub fn new(round: RoundRef, op: RoundOp) -> Result<Self> {
        match &op {
            RoundOp::Claim(claim) => check_claim_args(&round, claim)?,
            RoundOp::Submit { lease, submission } => check_submit_args(&round, lease, submission)?,
            RoundOp::Transition { lease, .. } => check_lease_args(&round, lease)?,
            RoundOp::Fail { lease, failure } => check_fail_args(&round, lease, failure)?,
            RoundOp::FailRecovery {
                expected_lease_token,
                message,
            } => check_fail_recovery_args(&round, expected_lease_token, message)?,
        }
        Ok(Self { round, op })
    }

    /// The round to change.
    pub fn round(&self) -> &RoundRef {
        &self.round
    }

    /// What to do to it.
    pub fn op(&self) -> &RoundOp {
        &self.op
    }

    /// The write this change makes on `current`, the record read at `now` (already at the
    /// stored precision): the operation's checks in the contract's order, then the record
    /// (and, after an accepted submission, the redacted projection) to store. `None`: an
    /// idempotent repeat; store nothing and return `current`.
    ///
    /// # Errors
    /// The operation's refusal, as [`RoundWrite::claim`], [`RoundWrite::submission`],
    /// [`RoundWrite::transition`], [`RoundWrite::fail`] and [`RoundWrite::fail_recovery`].
    pub fn write(
        &self,
        current: &ManagedInputRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RoundWrite>> {
        match &self.op {
            RoundOp::Claim(claim) => RoundWrite::claim(current, claim, now),
            RoundOp::Submit { lease, submission } => {
                RoundWrite::submission(current, lease, submission, now)
            }
            RoundOp::Transition { lease, transition } => {
                RoundWrite::transition(current, lease, *transition, now)
            }
            RoundOp::Fail { lease, failure } => RoundWrite::fail(current, lease, failure, now),
            RoundOp::FailRecovery {
                expected_lease_token,
                message,
            } => RoundWrite::fail_recovery(current, expected_lease_token, message, now),
        }
    }
}
