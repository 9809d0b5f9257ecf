//! The [`ManagedInputStore`] contract.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use m3_types::{ManagedInputRecord, Result};
use serde_json::{Map, Value};

use super::change::{RoundChange, RoundOp};
use super::pending::{PendingPage, PendingQuery};
use super::request::{
    ClaimRound, CreateRound, LeaseRef, RenewRoundLeases, ResponseSubmission, RoundFailure, RoundRef,
};
use super::rules::Transition;

/// The outcome of [`ManagedInputStore::scan_rounds`]: the rounds that decode, and those that
/// do not.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct RoundScan {
    /// The readable rounds, ordered by `round_index`.
    pub rounds: Vec<ManagedInputRecord>,
    /// The stored rows that do not decode into a valid record.
    pub unreadable: Vec<UnreadableRound>,
}

/// One stored round row that does not decode.
#[derive(Debug)]
#[non_exhaustive]
pub struct UnreadableRound {
    /// The row's `round_id` column, as stored.
    pub round_id: String,
    /// Why it does not decode (`managed_input_invalid`, [`m3_types::Reason::StoredRecordInvalid`]).
    pub error: m3_types::Error,
}

impl UnreadableRound {
    /// An unreadable row `round_id` and why.
    pub fn new(round_id: impl Into<String>, error: m3_types::Error) -> Self {
        Self {
            round_id: round_id.into(),
            error,
        }
    }
}

impl RoundScan {
    /// A scan with these readable and unreadable rounds.
    pub fn new(rounds: Vec<ManagedInputRecord>, unreadable: Vec<UnreadableRound>) -> Self {
        Self { rounds, unreadable }
    }

    /// The readable rounds, after a warning for each unreadable one.
    pub fn into_readable(self) -> Vec<ManagedInputRecord> {
        for row in &self.unreadable {
            tracing::warn!(
                round.id = %row.round_id,
                error = %row.error,
                "skipped an unreadable managed-input round"
            );
        }
        self.rounds
    }
}

/// Durable storage and worker coordination for managed elicitation rounds.
///
/// One row per round, a six-state status machine
/// (`pending → response_validated → delivery_started → delivered → resolved`, and `failed`
/// from any unresolved state), and a compare-and-set lease (owner id + lease token + expiry)
/// that stops a stale worker from overwriting a replacement's state.
///
/// This trait is a contract, not a convenience: every implementation must give exactly the
/// guarantees documented on each method, and
/// [`conformance::run_all`](crate::conformance::run_all) (feature `conformance`) checks them.
/// Read `docs/custom-backend.md` before writing one.
///
/// Common rules for every method:
/// - Identifiers and strings are validated first: an empty one fails with
///   `managed_input_invalid` ("`<label>` must be a non-empty string"); a zero lease duration
///   with "lease_seconds must be positive".
/// - "Now" is the store's clock. A lease is *live* while `expires_at > now`.
/// - *Authorize* means: the stored owner id and lease token equal the presented [`LeaseRef`]
///   (else `managed_input_conflict`, "owned by another lease") and the lease is live (else
///   `managed_input_conflict`, "lease has expired").
/// - Each mutation is atomic: its checks and its write happen in one serializable step, and a
///   concurrent change between them surfaces as `managed_input_conflict` ("... raced ...").
/// - A stored row that cannot be decoded is `managed_input_invalid` with reason
///   `stored_record_invalid` for the operations on that round; listings skip it and report
///   it ([`scan_rounds`](Self::scan_rounds)).
/// - A missing round is `not_found`.
/// - Every refusal carries a [`Reason`](m3_types::Reason) in `details.reason`; the
///   [`rules`](super::rules) module makes each decision, so backends agree.
/// - Backend failures (I/O, locks that outlast the busy timeout) are `storage_error`.
///
/// The trait is object safe and used as `Arc<dyn ManagedInputStore>`.
#[async_trait]
pub trait ManagedInputStore: Debug + Send + Sync + 'static {
    /// Persists a new `pending` round with a fresh lease.
    ///
    /// Effect: status `pending`, no responses, `delivery_attempts` 0,
    /// `created_at = updated_at = now`, lease `expires_at = now + lease_duration`, token as
    /// given or generated.
    ///
    /// Idempotency: if the round `(execution_id, round_id)` already exists and *all* of the
    /// pending round, `round_index`, `round_limit`, owner, lease token, harness session id,
    /// native resume token, delivery idempotency key, session id, turn id and operation
    /// parameters are equal, the stored record is returned unchanged, whatever its status is
    /// now. A replay must therefore pass the same explicit lease token.
    ///
    /// # Errors
    /// - `managed_input_invalid`: `round_index >= round_limit` ("round_index exceeds round
    ///   limit"), `round_limit == 0`, empty owner or optional string, zero lease, payloads that
    ///   are not finite JSON. Nothing is stored.
    /// - `managed_input_conflict`: the round exists with different data ("already exists with
    ///   different data"), or another round of the execution has the same `round_index`
    ///   ("conflicts with an existing round").
    async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord>;

    /// Reads one round, or `None` when it does not exist. A plain read.
    ///
    /// # Errors
    /// `managed_input_invalid` for empty ids or an undecodable stored row; `storage_error`.
    async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>>;

    /// Reads every round of an execution, ordered by `round_index`, keeping the rows that do
    /// not decode apart: one bad stored row never hides the others. A plain read.
    ///
    /// # Errors
    /// `managed_input_invalid` for an empty id; `storage_error`.
    async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan>;

    /// Every readable round of an execution, ordered by `round_index`: [`scan_rounds`]
    /// with each unreadable row reported (a `tracing` warning naming it) and skipped.
    /// Callers that must count the skipped rows use [`scan_rounds`].
    ///
    /// [`scan_rounds`]: Self::scan_rounds
    ///
    /// # Errors
    /// As [`scan_rounds`](Self::scan_rounds).
    async fn list_rounds(&self, execution_id: &str) -> Result<Vec<ManagedInputRecord>> {
        Ok(self.scan_rounds(execution_id).await?.into_readable())
    }

    /// One page of the pending rounds of every execution (the inbox): the rounds whose
    /// status is `pending` that `query` admits, in its order, `query.offset` skipped and
    /// at most `query.limit` kept, with the number that match
    /// ([`PendingQuery`] states the rules; [`PendingQuery::select`] applies them to
    /// records read in any order). Rows that do not decode are skipped. A plain read:
    /// read only the pending rounds, never every round of the store.
    ///
    /// # Errors
    /// `invalid_argument` for a limit of 0 or over
    /// [`PENDING_PAGE_MAX`](super::pending::PENDING_PAGE_MAX)
    /// ([`PendingQuery::validate`]); `storage_error`.
    async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage>;

    /// Renews many round leases in one call: for each `(round, lease)` of `batch.leases` the
    /// outcome [`renew`](Self::renew) would give, in the same order (`outcomes[i]` belongs
    /// to `batch.leases[i]`): the renewed record (its new `lease.expires_at`), or the error that
    /// refused that item (its code and [`Reason`](m3_types::Reason): missing round, foreign
    /// or expired lease, terminal round, empty id). One refused item never stops the others.
    ///
    /// Each item is decided by [`rules::renew_item`](super::rules::renew_item) on the
    /// record read. Renew the whole batch in one transaction or statement if the storage
    /// allows, so a worker holding many waiting rounds pays one commit per heartbeat
    /// instead of one per round. Renewals announce no change (nobody waits for them). An
    /// empty batch is `Ok(vec![])`.
    ///
    /// # Errors
    /// The call as a whole fails only with `managed_input_invalid` for a zero
    /// `batch.lease_duration` (check it first with
    /// [`rules::require_lease_duration`](super::rules::require_lease_duration); nothing
    /// renewed) or `storage_error` (a backend that renews in one transaction then renewed
    /// none of the batch).
    async fn renew_leases(
        &self,
        batch: RenewRoundLeases,
    ) -> Result<Vec<Result<ManagedInputRecord>>>;

    /// Applies one checked mutation of a round, atomically: reads the round (missing →
    /// `not_found`; undecodable → `managed_input_invalid` / `stored_record_invalid`), asks
    /// [`RoundChange::write`] what to store at the store's `now`, and stores it with a
    /// compare-and-set on what was read (a concurrent change surfaces as
    /// `managed_input_conflict` / `concurrent_change`, or the step is decided again on the
    /// new record). `None` from the rules is an idempotent repeat: return the record read,
    /// write nothing. Announce [`ChangeKind::Round`](crate::signal::ChangeKind::Round) after
    /// the commit.
    ///
    /// This is the one write a backend implements for [`claim_round`](Self::claim_round),
    /// [`submit_responses`](Self::submit_responses), the delivery transitions,
    /// [`fail`](Self::fail) and [`fail_recovery`](Self::fail_recovery), which the trait
    /// provides: they check their arguments and call it. Callers use those methods.
    ///
    /// # Errors
    /// As the operation [`RoundChange::op`] names; `storage_error`.
    async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord>;

    /// Hands an expired lease over to a replacement owner, given delivery-state evidence.
    ///
    /// Checks, in order: missing round → `not_found`; `failed` with code `recovery_unavailable`
    /// → `managed_input_recovery_unavailable` (its failure message), other failure →
    /// `managed_input_state`; `resolved` → `managed_input_state`; no evidence →
    /// `managed_input_recovery_unavailable`; evidence must match the status
    /// (`pending`↔`not_started`, `response_validated`↔`not_delivered`,
    /// `delivered`↔`delivered`; `delivery_started` accepts `not_delivered` only with
    /// idempotent-delivery proof, and `delivered`), else
    /// `managed_input_recovery_unavailable`; `response_validated` needs idempotent-delivery
    /// proof; a live lease → `managed_input_conflict` ("lease is still held"); the expected
    /// token must equal the stored one → else `managed_input_conflict`.
    ///
    /// Effect: a new random token and `expires_at = now + lease_duration` for the new owner;
    /// `delivery_started` becomes `response_validated` (`not_delivered`) or `delivered` with
    /// `delivered_at = now` (`delivered`); other statuses and `delivery_attempts` unchanged.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`RoundOp::Claim`].
    ///
    /// # Errors
    /// As listed above, plus `managed_input_invalid` for empty ids or a zero lease.
    async fn claim_round(&self, round: &RoundRef, claim: ClaimRound) -> Result<ManagedInputRecord> {
        let change = RoundChange::new(round.clone(), RoundOp::Claim(claim))?;
        self.write_round(change).await
    }

    /// Extends a live lease to `now + lease_duration`, keeping its token.
    ///
    /// Precondition: authorized (live lease), status `pending`, `response_validated` or
    /// `delivery_started`.
    ///
    /// Provided: [`renew_leases`](Self::renew_leases) with a batch of one.
    ///
    /// # Errors
    /// `not_found` for a missing round; `managed_input_conflict` (foreign or expired lease,
    /// race);
    /// `managed_input_state` for `delivered`, `resolved` or `failed` ("terminal managed-input
    /// round cannot renew").
    async fn renew(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        lease_duration: Duration,
    ) -> Result<ManagedInputRecord> {
        let batch = RenewRoundLeases::new(vec![(round.clone(), lease.clone())], lease_duration);
        crate::batch::single_outcome(self.renew_leases(batch).await)
    }

    /// Validates and stores the responses of a round, idempotently.
    ///
    /// Order: missing → `not_found`; `failed` → `managed_input_state` ("failed
    /// managed-input round cannot accept responses"); owner and token must match
    /// (`managed_input_conflict`), and the lease must be live **only while the round is
    /// pending**; the responses are validated against the stored requests
    /// (`managed_input_invalid`, the round is unchanged). Then on a `pending` round the
    /// responses, the idempotency key and a redacted diagnostic projection are stored and the
    /// status becomes `response_validated`, in one atomic step. On any later status the call
    /// is a replay: the same key with the canonically identical payload returns the stored
    /// record without writing; any other key or payload is `managed_input_conflict`
    /// ("response idempotency key conflicts with an accepted response").
    ///
    /// Provided: [`write_round`](Self::write_round) with [`RoundOp::Submit`].
    ///
    /// # Errors
    /// As listed above, plus `managed_input_invalid` for an empty idempotency key.
    async fn submit_responses(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        submission: ResponseSubmission,
    ) -> Result<ManagedInputRecord> {
        let lease = lease.clone();
        let op = RoundOp::Submit { lease, submission };
        self.write_round(RoundChange::new(round.clone(), op)?).await
    }

    /// `response_validated → delivery_started`, stamping `delivery_started_at` and adding one
    /// to `delivery_attempts`. Already `delivery_started`: returns the record unchanged.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`Transition::StartDelivery`].
    ///
    /// # Errors
    /// `not_found` for a missing round; `managed_input_conflict` (unauthorized, race);
    /// `managed_input_state` from any
    /// other status ("managed-input transition requires response_validated, got ...").
    async fn start_delivery(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
    ) -> Result<ManagedInputRecord> {
        self.write_round(transition(round, lease, Transition::StartDelivery)?)
            .await
    }

    /// `delivery_started → delivered`, stamping `delivered_at`. Already `delivered`: returns
    /// the record unchanged.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`Transition::MarkDelivered`].
    ///
    /// # Errors
    /// As [`start_delivery`](Self::start_delivery), requiring `delivery_started`.
    async fn mark_delivered(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
    ) -> Result<ManagedInputRecord> {
        self.write_round(transition(round, lease, Transition::MarkDelivered)?)
            .await
    }

    /// `delivered → resolved`, stamping `resolved_at`. Already `resolved`: returns the record
    /// unchanged. `resolved` is terminal.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`Transition::Resolve`].
    ///
    /// # Errors
    /// As [`start_delivery`](Self::start_delivery), requiring `delivered`.
    async fn resolve(&self, round: &RoundRef, lease: &LeaseRef) -> Result<ManagedInputRecord> {
        self.write_round(transition(round, lease, Transition::Resolve)?)
            .await
    }

    /// Fails an unresolved round with a code and message; stored responses are kept as
    /// diagnostics. Already failed with the same code and message: returns the record
    /// unchanged.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`RoundOp::Fail`].
    ///
    /// # Errors
    /// `managed_input_invalid` (empty code or message); `not_found` for a missing
    /// round; `managed_input_conflict` (unauthorized, another failure already recorded, race); `managed_input_state` for a
    /// `resolved` round.
    async fn fail(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        failure: RoundFailure,
    ) -> Result<ManagedInputRecord> {
        let lease = lease.clone();
        let op = RoundOp::Fail { lease, failure };
        self.write_round(RoundChange::new(round.clone(), op)?).await
    }

    /// Terminal recovery decision: fails an unresolved round with code
    /// `recovery_unavailable` once its lease has **expired**. Anyone holding the last known
    /// token may call it (no owner check). Already failed with `recovery_unavailable`:
    /// returns the record unchanged.
    ///
    /// Provided: [`write_round`](Self::write_round) with [`RoundOp::FailRecovery`].
    ///
    /// # Errors
    /// `not_found` for a missing round; `managed_input_conflict` (token mismatch, lease still
    /// held, race);
    /// `managed_input_state` for a round with another failure or a `resolved` round.
    async fn fail_recovery(
        &self,
        round: &RoundRef,
        expected_lease_token: &str,
        message: &str,
    ) -> Result<ManagedInputRecord> {
        let op = RoundOp::FailRecovery {
            expected_lease_token: expected_lease_token.to_owned(),
            message: message.to_owned(),
        };
        self.write_round(RoundChange::new(round.clone(), op)?).await
    }

    /// Recovery of a whole execution: fails every unresolved round of `execution_id`
    /// (`pending` through `delivered`) with code `recovery_unavailable` and `message`,
    /// without the round leases (the execution's expired worker lease is authoritative,
    /// and its recovery is the only caller). Resolved and failed rounds are unchanged.
    /// Returns how many rounds it failed. Atomic: all of them or none.
    ///
    /// # Errors
    /// `managed_input_invalid` for an empty id or message; `storage_error`.
    async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64>;

    /// The redacted diagnostic projection of the accepted responses, or `None` before any
    /// response was accepted. Secrets are replaced with `"[REDACTED]"`.
    ///
    /// # Errors
    /// `managed_input_invalid` for empty ids or a stored projection that is not a JSON
    /// object; `storage_error`.
    async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>>;

    /// Who answered the round: the actor of the accepted submission, stored with it in the
    /// same transaction. `None` before an answer, for an answer that named nobody, and for
    /// a missing round.
    ///
    /// # Errors
    /// `managed_input_invalid` for empty ids; `storage_error` (also for a stored actor that
    /// does not decode).
    async fn answered_by(&self, round: &RoundRef) -> Result<Option<m3_types::Actor>>;
}

/// The checked change of a lease-holding delivery transition of `round`.
fn transition(round: &RoundRef, lease: &LeaseRef, transition: Transition) -> Result<RoundChange> {
    let lease = lease.clone();
    RoundChange::new(round.clone(), RoundOp::Transition { lease, transition })
}
