//! The execution store: executions, their worker leases, cancel flags and
//! ordered event logs.
//!
//! [`ExecutionStore`] is the contract the runtime (worker, coordinator,
//! recovery) and the kit (submission, handles) use; [`rules`] are the decisions
//! every backend calls. The backends live in [`crate::sqlite`] and
//! [`crate::memory`]. See `docs/execution-store.md` for the guarantees.
//!
//! # Fencing
//!
//! Writes that change an execution (`transition`, `finish`, `append_event`)
//! take an optional [`ExecutionLeaseRef`]:
//!
//! - `Some(lease)`: the write succeeds only while that exact lease (owner and
//!   token) is held **and live** at the store clock's `now`; otherwise it fails
//!   with `managed_input_conflict`. This is how a worker that lost its lease is
//!   kept from writing over a recovery or a replacement.
//! - `None` (an *unleased* writer, e.g. submission before a worker claims the
//!   execution, or cancelling a queued execution): the write succeeds only
//!   while **no** worker lease exists, live or expired. An expired lease means
//!   a lost worker, and only [`ExecutionStore::terminalize_expired`] may
//!   finish such an execution.
//!
//! Every mutation is atomic: its checks and its write are one serializable
//! step of the backend.

mod change;
pub(crate) mod record;
pub mod rules;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, ExecutionStatus, Result};

use crate::ManagedInputStore;
use crate::changes::{ChangePage, PruneChanges, Pruned};

pub use change::ExecutionChange;
pub use record::{
    AcquireLease, AppendEvent, ClaimQueued, ClaimedExecution, EVENT_ELICITATION_REQUEST,
    EVENT_ELICITATION_RESPONSE, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED,
    EVENT_EXECUTION_HANDED_OVER, EVENT_EXECUTION_STATE_CHANGED, EVENT_OAUTH_AUTHORIZATION_FINISHED,
    EVENT_OAUTH_AUTHORIZATION_REQUIRED, ExecutionEvent, ExecutionLease, ExecutionLeaseRef,
    ExecutionRecord, FinishExecution, ListExecutions, NewExecution, RenewLeases,
    TerminalizeExpired, Terminalized,
};

/// Durable executions with worker leases, a cancel flag and an append-only,
/// gap-free event log; the source of the execution's [`ManagedInputStore`].
///
/// Object-safe: use it as `Arc<dyn ExecutionStore>`. Every operation reads the
/// store's clock for `now`. Error codes are `m3_types::Error::code()` strings.
///
/// The store appends its own lifecycle events atomically with the change they
/// describe: `execution.created` (sequence 0) on creation,
/// `execution.state_changed {lifecycle}` on each transition, and
/// `execution.finished {outcome, error, ...}` when the execution finishes.
/// Callers must not append those kinds themselves.
#[async_trait]
pub trait ExecutionStore: std::fmt::Debug + Send + Sync + 'static {
    /// Creates an execution in lifecycle `created` and appends its
    /// `execution.created` event (sequence 0) in the same transaction.
    ///
    /// With a caller-chosen id, creating the same id again with the same spec
    /// (canonical JSON) and `human_input` returns the stored record.
    ///
    /// # Errors
    /// `invalid_argument` for an empty id; `managed_input_conflict` if the id
    /// exists with a different spec or `human_input`; `storage_error`.
    async fn create_execution(&self, new: NewExecution) -> Result<ExecutionRecord>;

    /// Reads one execution; `None` if it does not exist.
    ///
    /// # Errors
    /// `storage_error` (including a corrupt row).
    async fn get_execution(&self, execution_id: &str) -> Result<Option<ExecutionRecord>>;

    /// Lists executions, oldest first, filtered by `query`.
    ///
    /// # Errors
    /// `storage_error`.
    async fn list_executions(&self, query: ListExecutions) -> Result<Vec<ExecutionRecord>>;

    /// Acquires the worker lease on an unfinished execution for
    /// `request.ttl`. Succeeds when no lease exists (never claimed, or
    /// released). Acquiring again with the same owner and token while that
    /// lease is live returns it unchanged (idempotent). An expired lease is
    /// never taken over: a lost worker's execution is recovered, not resumed.
    ///
    /// # Errors
    /// `invalid_argument` for an empty owner or token or a zero ttl;
    /// `not_found` if the execution does not exist; `managed_input_conflict` if another
    /// lease is live, or a lease expired (recovery required);
    /// `managed_input_state` if the execution is finished; `storage_error`.
    async fn acquire_lease(&self, request: AcquireLease) -> Result<ExecutionLease>;

    /// Claims a queued execution for a worker: the oldest (by creation time, then id)
    /// execution in lifecycle `queued` with no lease (or only `request.execution_id`, if
    /// given), hands `request.owner_id` a fresh lease of `request.ttl` and moves it to
    /// `starting` (appending `execution.state_changed`), all in one atomic step. An
    /// execution is claimed at most once, ever: concurrent claimers in any process never
    /// get the same one, and a claimed execution that loses its worker is recovered, never
    /// claimed again. A queued execution with a cancel request is claimed too (its worker
    /// finishes it `cancelled`). `None` when nothing is claimable.
    ///
    /// # Errors
    /// `invalid_argument` for an empty owner or a zero ttl; `storage_error`.
    async fn claim_queued(&self, request: ClaimQueued) -> Result<Option<ClaimedExecution>>;

    /// Extends a live lease to `now + ttl` (heartbeat).
    ///
    /// Provided: [`renew_leases`](Self::renew_leases) with a batch of one.
    ///
    /// # Errors
    /// `invalid_argument` for a zero ttl; `managed_input_conflict` if the lease
    /// is not held (wrong owner/token, released, execution missing) or has
    /// expired — the worker has lost the execution and must stop;
    /// `managed_input_state` if the execution finished; `storage_error`.
    async fn renew_lease(
        &self,
        lease: &ExecutionLeaseRef,
        ttl: Duration,
    ) -> Result<ExecutionLease> {
        let batch = RenewLeases::new(vec![lease.clone()], ttl);
        crate::batch::single_outcome(self.renew_leases(batch).await)
    }

    /// Renews many worker leases in one call (heartbeat of a worker driving many
    /// executions): for each lease of `batch.leases` the outcome [`renew_lease`](Self::renew_lease) would
    /// give, in the same order (`outcomes[i]` belongs to `batch.leases[i]`): the renewed
    /// lease (expiring at `now + batch.ttl`), or the error that refused that item (missing execution,
    /// lease not held, expired, execution finished). One refused item never stops the
    /// others.
    ///
    /// Each item is decided by [`rules::renew_step`] (or [`rules::check_lease_write`]) on
    /// the record read. Renew the batch in one transaction or statement if the storage
    /// allows. An empty batch is `Ok(vec![])`.
    ///
    /// # Errors
    /// The call as a whole fails only with `invalid_argument` for a zero ttl (check it
    /// first with [`rules::lease_expiry`]; nothing renewed) or `storage_error` (a backend
    /// that renews in one transaction then renewed none of the batch).
    async fn renew_leases(&self, batch: RenewLeases) -> Result<Vec<Result<ExecutionLease>>>;

    /// Releases a live lease, leaving the execution unleased. Releasing after
    /// [`finish`](Self::finish) (which ends the lease) succeeds.
    ///
    /// # Errors
    /// `managed_input_conflict` if the lease is not held or has expired
    /// (an expired lease is left for recovery); `storage_error`.
    async fn release_lease(&self, lease: &ExecutionLeaseRef) -> Result<()>;

    /// Applies one change of an execution's lifecycle or cancel flag, atomically: reads the
    /// execution (missing → `not_found`), lets [`rules::change_step`] check and change it at
    /// the store's `now`, and writes the record and the event the step appended in the same
    /// serializable step. Announce [`Change::of_execution`](crate::signal::Change::of_execution)
    /// of the record after the commit.
    ///
    /// The one write a backend implements for [`transition`](Self::transition) and
    /// [`request_cancel`](Self::request_cancel), which the trait provides. Callers use those.
    ///
    /// # Errors
    /// As the operation `change` names; `storage_error`.
    async fn write_execution(&self, change: ExecutionChange) -> Result<ExecutionRecord>;

    /// Moves the lifecycle to `to` (checked with
    /// [`ExecutionStatus::can_transition_to`]) and appends
    /// `execution.state_changed {lifecycle}`, fenced by `lease` (see the
    /// module docs). `finished` is reached only through
    /// [`finish`](Self::finish) or
    /// [`terminalize_expired`](Self::terminalize_expired).
    ///
    /// Provided: [`write_execution`](Self::write_execution) with
    /// [`ExecutionChange::Transition`].
    ///
    /// # Errors
    /// `invalid_argument` with detail `code = "invalid_transition"` (built by
    /// `Error::from_code(ErrorCode::InvalidTransition, ..)`) if the table
    /// forbids the move or `to` is `finished`; `not_found` if the execution
    /// does not exist; `managed_input_conflict` if the fence fails; `storage_error`.
    async fn transition(
        &self,
        execution_id: &str,
        to: ExecutionStatus,
        lease: Option<&ExecutionLeaseRef>,
    ) -> Result<ExecutionRecord> {
        let change = ExecutionChange::transition(execution_id, to, lease.cloned());
        self.write_execution(change).await
    }

    /// Finishes the execution exactly once: lifecycle `finished`, outcome,
    /// error, result, `finished_at`; ends the worker lease; appends
    /// `execution.finished {outcome, error}`. Fenced by `request.lease`.
    /// In the same atomic step it fails every unresolved round of the
    /// execution (if the managed-input tables exist) with `failure_code =
    /// "recovery_unavailable"` and `failure_message =`
    /// [`ROUND_CLOSED_AT_FINISH`](rules::ROUND_CLOSED_AT_FINISH), as
    /// [`terminalize_expired`](Self::terminalize_expired) does: a finished
    /// execution's rounds are resolved or failed, never open to an answer.
    ///
    /// Idempotent: finishing an already finished execution with the same
    /// outcome, error and result (canonical JSON) returns the stored record,
    /// whatever the fence.
    ///
    /// # Errors
    /// `managed_input_state` if already finished with different data;
    /// `not_found` if the execution does not exist; `managed_input_conflict` if the
    /// fence fails; `storage_error`.
    async fn finish(&self, request: FinishExecution) -> Result<ExecutionRecord>;

    /// Hands the execution held by the live `lease` to another live worker, `successor`:
    /// one compare-and-set from the current owner to the successor, who then holds the
    /// execution under a fresh token until `now + ttl` (and renews it as any owner does).
    /// Appends `execution.handed_over {from, to}`.
    ///
    /// Only the current owner can hand over, and only while its lease is live: an expired
    /// lease is never handed over (a worker that disappeared is recovered, its rounds failed
    /// closed). The successor is named, never found: no process takes a lease nobody gave it.
    /// A round's lease belongs to its execution's runtime, so the rounds need no write.
    ///
    /// Provided: [`write_execution`](Self::write_execution) with
    /// [`ExecutionChange::HandOver`].
    ///
    /// # Errors
    /// `invalid_argument` for an empty successor, the owner itself, or a zero ttl;
    /// `not_found` if the execution does not exist; `managed_input_conflict` if `lease` is
    /// not the stored live lease; `managed_input_state` if the execution finished;
    /// `storage_error`.
    async fn hand_over(
        &self,
        lease: &ExecutionLeaseRef,
        successor: &str,
        ttl: Duration,
    ) -> Result<ExecutionRecord> {
        let change = ExecutionChange::hand_over(lease.clone(), successor, ttl);
        self.write_execution(change).await
    }

    /// Records a cancellation request (from any process; no lease needed).
    /// The first request's time and reason are kept; repeating is a no-op, and
    /// so is cancelling a finished execution. The worker polls
    /// [`is_cancel_requested`](Self::is_cancel_requested).
    ///
    /// Provided: [`write_execution`](Self::write_execution) with
    /// [`ExecutionChange::Cancel`].
    ///
    /// # Errors
    /// `not_found` if the execution does not exist; `storage_error`.
    async fn request_cancel(
        &self,
        execution_id: &str,
        reason: Option<&str>,
    ) -> Result<ExecutionRecord> {
        let change = ExecutionChange::cancel(execution_id, reason.map(str::to_owned));
        self.write_execution(change).await
    }

    /// True once a cancellation was requested.
    ///
    /// # Errors
    /// `not_found` if the execution does not exist; `storage_error`.
    async fn is_cancel_requested(&self, execution_id: &str) -> Result<bool>;

    /// Appends an event with the next sequence number (strictly increasing
    /// from 0, no gaps, atomic under concurrent appenders in any process),
    /// fenced by `event.lease`. Returns the stored event.
    ///
    /// # Errors
    /// `invalid_argument` for an empty or reserved kind, or a payload that is
    /// not finite JSON ([`rules::check_append`]); `not_found` if the execution
    /// does not exist; `managed_input_conflict` if the fence fails; `managed_input_state`
    /// if the execution is finished (its log ends with `execution.finished`);
    /// `storage_error`.
    async fn append_event(&self, event: AppendEvent) -> Result<ExecutionEvent>;

    /// Events of one execution in sequence order, only those with
    /// `sequence > after_sequence` when given.
    ///
    /// # Errors
    /// `storage_error`.
    async fn list_events(
        &self,
        execution_id: &str,
        after_sequence: Option<u64>,
    ) -> Result<Vec<ExecutionEvent>>;

    /// Unfinished executions whose worker lease expired at or before the
    /// store clock's `now`, ordered by expiry: the input of recovery.
    ///
    /// # Errors
    /// `storage_error`.
    async fn list_expired_leases(&self) -> Result<Vec<ExecutionRecord>>;

    /// Recovery: finishes an execution whose worker lease expired, fenced on
    /// that expired lease (owner and token still the stored ones, expiry at or
    /// before the store clock's `now`, not finished). In the same transaction
    /// it ends the lease, appends `execution.finished {outcome, error, reason,
    /// completeness: "partial", limitations: ["capture_incomplete"]}`, and —
    /// if the managed-input tables exist — marks every unresolved round of the
    /// execution `failed` with `failure_code = "recovery_unavailable"` and
    /// `failure_message = reason` (directly, without the round lease: the
    /// execution lease is authoritative). It never creates the managed tables.
    ///
    /// # Errors
    /// `managed_input_conflict` if the execution does not exist, the lease is
    /// not the stored one, or it is still live; `managed_input_state` if the
    /// execution is already finished; `storage_error`.
    async fn terminalize_expired(&self, request: TerminalizeExpired) -> Result<Terminalized>;

    /// The change feed: up to `limit` records with a cursor after `after`, oldest first.
    ///
    /// Every state change of a round (`round.pending`, `round.answered`,
    /// `round.delivery_started`, `round.delivered`, `round.resolved`, `round.failed`) or of
    /// an execution (`execution.queued`, `execution.claimed`,
    /// `execution.waiting_for_input`, `execution.finished`, `execution.cancel_requested`)
    /// appends one record in the same transaction as the change. A reader that resumes
    /// from the last cursor it processed sees every committed record exactly once, in
    /// commit order, whichever process wrote it (`docs/changes.md`).
    ///
    /// # Errors
    /// - `invalid_argument` for a `limit` outside `1..=MAX_CHANGE_PAGE` (reason
    ///   `limit_exceeded`) or a cursor beyond the newest record (reason `cursor_in_future`);
    /// - `cursor_expired` if records after `after` were pruned
    ///   ([`changes::rules::check_after`](crate::changes::rules::check_after));
    /// - `storage_error` if the feed cannot be read.
    async fn read_changes(&self, after: Cursor, limit: usize) -> Result<ChangePage>;

    /// Retention: removes the change records older than `request.before` (nothing else),
    /// or only counts them when `request.dry_run`. Readers behind the newest removed
    /// cursor get `cursor_expired` from then on.
    ///
    /// # Errors
    /// `storage_error` if the feed cannot be pruned.
    async fn prune_changes(&self, request: PruneChanges) -> Result<Pruned>;

    /// The managed-input store of this execution store, resolved lazily: the
    /// first call builds it on the same database file, pool and clock; its
    /// first operation creates the managed-input tables (never the execution
    /// store's open, never `create_execution`). Later calls return the same
    /// object.
    ///
    /// # Errors
    /// `storage_error` if the managed-input store cannot be built.
    async fn managed_input_store(&self) -> Result<Arc<dyn ManagedInputStore>>;

    /// The store's webhook subscriptions and answer-link key, on the same data, shared by
    /// every process on it (see [`crate::subscriptions`]; a backend that keeps text rows
    /// gets one from [`RowSubscriptionStore`](crate::subscriptions::RowSubscriptionStore)).
    /// Required, like the feed: a backend without it would leave notifiers silent.
    ///
    /// # Errors
    /// `storage_error` if it cannot be built.
    async fn subscription_store(&self) -> Result<Arc<dyn crate::subscriptions::SubscriptionStore>>;

    /// The store's API tokens, shared by every process on it: `m3 serve` authenticates
    /// requests with them, and a revoked token stops working everywhere at once (see
    /// [`crate::tokens`]; a backend that keeps rows gets one from
    /// [`RowTokenStore`](crate::tokens::RowTokenStore)).
    ///
    /// # Errors
    /// `storage_error` if it cannot be built.
    async fn token_store(&self) -> Result<Arc<dyn crate::tokens::TokenStore>>;

    /// The store's worker registry, shared by every process on it: which workers run,
    /// where, and whether they are alive (see [`crate::workers`]; a backend that keeps rows
    /// gets one from [`RowWorkerRegistry`](crate::workers::RowWorkerRegistry)).
    ///
    /// # Errors
    /// `storage_error` if it cannot be built.
    async fn worker_registry(&self) -> Result<Arc<dyn crate::workers::WorkerRegistry>>;

    /// The rows of the store's sealed OAuth credentials (see [`crate::oauth`]; the
    /// application seals them with its key through
    /// [`SealedOAuthCredentials`](crate::oauth::SealedOAuthCredentials)). The default is
    /// `unsupported`: such a store keeps OAuth tokens in the process only.
    ///
    /// # Errors
    /// `unsupported` by default; `storage_error` if they cannot be reached.
    async fn oauth_credential_rows(&self) -> Result<Arc<dyn crate::oauth::OAuthCredentialRows>> {
        Err(m3_types::Error::from_code(
            m3_types::ErrorCode::Unsupported,
            "this store does not keep OAuth credentials",
        ))
    }

    /// The store's policies for unattended rounds, shared by every worker on it (see
    /// [`crate::policies`]; a backend that keeps rows gets one from
    /// [`RowPolicyStore`](crate::policies::RowPolicyStore)).
    ///
    /// # Errors
    /// `storage_error` if it cannot be built.
    async fn policy_store(&self) -> Result<Arc<dyn crate::policies::PolicyStore>>;

    /// Appends a `round.deadline_approaching` record for the pending round `round` of
    /// `execution_id`: `reminder` says at which fraction of its deadline window. At most
    /// once per round and fraction, whoever asks and however often: the check and the
    /// append are one atomic step. Returns whether a record was appended (`false`: it
    /// was already, or the round is no longer pending, or does not exist).
    ///
    /// # Errors
    /// `storage_error` if the store cannot be written.
    async fn remind_deadline(
        &self,
        execution_id: &str,
        round_id: &str,
        reminder: m3_types::DeadlineReminder,
    ) -> Result<bool>;

    /// The store's clock: every "now" of the store and of the runtime that
    /// drives it (deadlines, recovery) comes from it, so a test's
    /// [`ManualClock`](m3_types::ManualClock) drives both. Read it through
    /// [`store_now`](crate::store_now).
    fn clock(&self) -> Arc<dyn Clock>;

    /// The store's change signal: waiters subscribe to it instead of polling the store
    /// (see [`crate::signal`]). The default is a [`PollingSignal`](crate::signal::PollingSignal)
    /// (every subscription wakes every second), so a backend is correct without one; a
    /// backend that implements one calls [`ChangeSignal::notify`](crate::signal::ChangeSignal::notify)
    /// after each commit of its own stores (both of them), with the [`Change`](crate::signal::Change)
    /// `docs/custom-backend.md` lists for each operation.
    ///
    /// Return the same signal object on every call (waiters and committers of one store
    /// must meet on it).
    fn change_signal(&self) -> Arc<dyn crate::signal::ChangeSignal> {
        Arc::new(crate::signal::PollingSignal::default())
    }

    /// Whether the data outlives the process (default `true`). Managed input
    /// requires a persistent store; the memory backend says `false`.
    fn is_persistent(&self) -> bool {
        true
    }
}
