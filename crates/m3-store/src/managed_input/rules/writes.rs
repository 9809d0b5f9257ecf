//! What a backend's read-decide-write stores: the shapes every backend's `update` step
//! returns, so no backend spells them out again.

use std::time::Duration;

use m3_types::{Actor, ChangeRecord, ManagedInputRecord, Result};
use time::OffsetDateTime;

use super::steps::{
    Decision, Submission, Transition, apply_fail, apply_recovery_failure, apply_submission,
    check_fail, check_fail_recovery, check_submission, check_transition,
};
use super::token::new_lease_token;
use super::{
    apply_claim, apply_renew, check_claim, check_renew, check_renew_args, lease_expiry,
    missing_round,
};
use crate::managed_input::request::{
    ClaimRound, LeaseRef, ResponseSubmission, RoundFailure, RoundRef,
};

/// One mutation's write: the next record and, after an accepted submission, the redacted
/// projection of its responses as canonical JSON text (store it beside the record).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RoundWrite {
    /// The record to store.
    pub record: ManagedInputRecord,
    /// A new redacted projection (`None`: keep the stored one).
    pub redacted_json: Option<String>,
    /// Who answered, with an accepted submission that names one (store it beside the
    /// projection; the `round.answered` record carries it).
    pub actor: Option<Actor>,
}

impl RoundWrite {
    /// The change record this write appends when it replaces `before` (`None` on a new
    /// round): [`round_change`](crate::changes::rules::round_change), with the write's
    /// actor. `None`: the status did not change, so nothing is appended.
    pub fn change_record(&self, before: Option<&ManagedInputRecord>) -> Option<ChangeRecord> {
        crate::changes::rules::round_change(before, &self.record)
            .map(|record| record.with_actor(self.actor.clone()))
    }

    /// A write of `record` alone.
    pub fn record(record: ManagedInputRecord) -> Option<Self> {
        Some(Self {
            record,
            redacted_json: None,
            actor: None,
        })
    }

    /// The write `decision` asks for: none for an idempotent repeat
    /// ([`Decision::AlreadyDone`]), else the record `next` builds.
    pub fn decided(decision: Decision, next: impl FnOnce() -> ManagedInputRecord) -> Option<Self> {
        match decision {
            Decision::AlreadyDone => None,
            _ => Self::record(next()),
        }
    }

    /// `submit_responses`' write on `current`: [`check_submission`], then the accepted
    /// record and its redacted projection; none for an idempotent replay.
    ///
    /// # Errors
    /// As [`check_submission`].
    pub fn submission(
        current: &ManagedInputRecord,
        lease: &LeaseRef,
        submission: &ResponseSubmission,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        Ok(match check_submission(current, lease, submission, now)? {
            Submission::Accept(encoded) => Some(Self {
                record: apply_submission(current, submission, now),
                redacted_json: Some(encoded.redacted_json),
                actor: submission.actor.clone(),
            }),
            _ => None,
        })
    }

    /// `claim_round`'s write on `current`: [`check_claim`], then the claimed record under
    /// a new lease token expiring `claim.lease_duration` after `now`.
    ///
    /// # Errors
    /// As [`check_claim`] and [`lease_expiry`]; `storage_error` if no token can be drawn.
    pub fn claim(
        current: &ManagedInputRecord,
        claim: &ClaimRound,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        let next = check_claim(current, claim, now)?;
        let expires = lease_expiry(now, claim.lease_duration)?;
        let token = new_lease_token()?;
        Ok(Self::record(apply_claim(
            current, claim, next, token, expires, now,
        )))
    }

    /// `renew`'s write on `current`: [`check_renew`], then the lease extended to
    /// `lease_duration` after `now`.
    ///
    /// # Errors
    /// As [`check_renew`] and [`lease_expiry`].
    pub fn renew(
        current: &ManagedInputRecord,
        lease: &LeaseRef,
        lease_duration: Duration,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        check_renew(current, lease, now)?;
        let expires = lease_expiry(now, lease_duration)?;
        Ok(Self::record(apply_renew(current, expires, now)))
    }

    /// A lease-holding transition's write on `current`: [`check_transition`], then
    /// [`Transition::apply`]; none for an idempotent repeat.
    ///
    /// # Errors
    /// As [`check_transition`].
    pub fn transition(
        current: &ManagedInputRecord,
        lease: &LeaseRef,
        transition: Transition,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        let decided = check_transition(current, lease, now, transition)?;
        Ok(Self::decided(decided, || transition.apply(current, now)))
    }

    /// `fail`'s write on `current`: [`check_fail`], then [`apply_fail`]; none for an
    /// idempotent repeat.
    ///
    /// # Errors
    /// As [`check_fail`].
    pub fn fail(
        current: &ManagedInputRecord,
        lease: &LeaseRef,
        failure: &RoundFailure,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        let decided = check_fail(current, lease, failure, now)?;
        Ok(Self::decided(decided, || {
            apply_fail(current, &failure.code, &failure.message, now)
        }))
    }

    /// `fail_recovery`'s write on `current`: [`check_fail_recovery`], then
    /// [`apply_recovery_failure`]; none for an idempotent repeat.
    ///
    /// # Errors
    /// As [`check_fail_recovery`].
    pub fn fail_recovery(
        current: &ManagedInputRecord,
        expected_lease_token: &str,
        message: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        let decided = check_fail_recovery(current, expected_lease_token, now)?;
        Ok(Self::decided(decided, || {
            apply_recovery_failure(current, message, now)
        }))
    }
}

/// One renewal (`renew`, or one item of `renew_leases`) on what a backend read for
/// `round` (`None`: no such round; `Err`: a stored row that does not decode):
/// [`check_renew_args`], then [`RoundWrite::renew`]. Returns the renewed record to store.
///
/// # Errors
/// As [`check_renew_args`] and [`RoundWrite::renew`]; `not_found` for `None`; the read's
/// own error.
pub fn renew_item(
    (round, lease): (&RoundRef, &LeaseRef),
    lease_duration: Duration,
    read: Option<Result<ManagedInputRecord>>,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    check_renew_args(round, lease, lease_duration)?;
    let current = read.ok_or_else(|| missing_round(round))??;
    let write = RoundWrite::renew(&current, lease, lease_duration, now)?;
    Ok(write.map_or(current, |write| write.record))
}
