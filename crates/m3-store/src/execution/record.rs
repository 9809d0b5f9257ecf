//! Values read from and written to an [`ExecutionStore`](super::ExecutionStore).

use std::time::Duration;

use m3_types::{
    ErrorInfo, ExecutionOutcome, ExecutionResult, ExecutionState, ExecutionStatus, HumanInput,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

/// Kind of the event the store appends when it creates an execution.
pub const EVENT_EXECUTION_CREATED: &str = "execution.created";
/// Kind of the event the store appends on every lifecycle transition.
pub const EVENT_EXECUTION_STATE_CHANGED: &str = "execution.state_changed";
/// Kind of the event the store appends when an execution finishes
/// (by [`finish`](super::ExecutionStore::finish) or
/// [`terminalize_expired`](super::ExecutionStore::terminalize_expired)).
/// It is always the last event of an execution.
pub const EVENT_EXECUTION_FINISHED: &str = "execution.finished";
/// Kind of the event the store appends when a live owner hands its execution to another
/// worker ([`hand_over`](super::ExecutionStore::hand_over)): `{"from": owner, "to": owner}`.
pub const EVENT_EXECUTION_HANDED_OVER: &str = "execution.handed_over";
/// Kind of the event the managed-input coordinator appends when it stores a round: the
/// round's identity, operation and redacted requests.
pub const EVENT_ELICITATION_REQUEST: &str = "elicitation.request";
/// Kind of the event the managed-input coordinator appends when it starts delivering a
/// round's response: the redacted responses, never the values.
pub const EVENT_ELICITATION_RESPONSE: &str = "elicitation.response";
/// Kind of the event a worker appends when an HTTP server asks for OAuth authorization by
/// a person: `server`, `server_url` and the authorization `url` to open (it carries the
/// PKCE challenge and `state`, never a secret). The answer page shows it as a link.
pub const EVENT_OAUTH_AUTHORIZATION_REQUIRED: &str = "oauth.authorization_required";
/// Kind of the event a worker appends when the wait for that authorization ended:
/// `server`, `url` and `completed` (`false`: nobody authorized in time).
pub const EVENT_OAUTH_AUTHORIZATION_FINISHED: &str = "oauth.authorization_finished";

/// One stored execution: its specification, lifecycle, terminal data, worker
/// lease and cancel flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionRecord {
    /// Execution id (ULID text).
    pub execution_id: String,
    /// The submitted specification, as JSON.
    pub spec: Value,
    /// `fail` or `managed`.
    pub human_input: HumanInput,
    /// Current lifecycle state.
    pub lifecycle: ExecutionStatus,
    /// Terminal outcome; set exactly when `lifecycle` is `finished`.
    pub outcome: Option<ExecutionOutcome>,
    /// Terminal error, if the execution finished with one.
    pub error: Option<ErrorInfo>,
    /// Terminal result, if the runtime recorded one.
    pub result: Option<ExecutionResult>,
    /// Sequence number of the newest event (every execution has at least its
    /// `execution.created` event, so this starts at 0).
    pub sequence: u64,
    /// The worker lease, while a worker holds one (live or expired).
    pub lease: Option<ExecutionLease>,
    /// When cancellation was first requested, if it was.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub cancel_requested_at: Option<OffsetDateTime>,
    /// The reason given with the first cancel request.
    pub cancel_reason: Option<String>,
    /// Creation time.
    #[serde(with = "m3_types::timestamp::serde")]
    pub created_at: OffsetDateTime,
    /// Time of the last change to this row.
    #[serde(with = "m3_types::timestamp::serde")]
    pub updated_at: OffsetDateTime,
    /// When the execution finished.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub finished_at: Option<OffsetDateTime>,
}

impl ExecutionRecord {
    /// True once the lifecycle is `finished`.
    pub fn is_finished(&self) -> bool {
        self.lifecycle == ExecutionStatus::Finished
    }

    /// True once anybody requested cancellation.
    pub fn is_cancel_requested(&self) -> bool {
        self.cancel_requested_at.is_some()
    }

    /// The execution's [`ExecutionState`] snapshot (lifecycle, outcome, event
    /// sequence, timestamps, and the tool call count of the recorded result; the other
    /// snapshot fields are left empty).
    pub fn state(&self) -> ExecutionState {
        let mut state = ExecutionState::new(&self.execution_id, self.created_at);
        state.lifecycle = self.lifecycle;
        state.outcome = self.outcome;
        state.sequence = self.sequence;
        state.finished_at = self.finished_at;
        if let Some(result) = &self.result {
            // The count is known once the worker recorded the result; it must agree with it.
            state.tool_call_count = result.snapshot.tool_call_count;
        }
        state
    }
}

/// Identifies a worker lease for fenced writes: the execution, the owner and
/// the token the store handed out (or accepted) at acquisition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionLeaseRef {
    /// Execution the lease is on.
    pub execution_id: String,
    /// Worker that holds it.
    pub owner_id: String,
    /// Fencing token of this acquisition.
    pub lease_token: String,
}

impl ExecutionLeaseRef {
    /// A lease reference from its three parts.
    pub fn new(
        execution_id: impl Into<String>,
        owner_id: impl Into<String>,
        lease_token: impl Into<String>,
    ) -> Self {
        Self {
            execution_id: execution_id.into(),
            owner_id: owner_id.into(),
            lease_token: lease_token.into(),
        }
    }
}

/// A worker lease on a whole execution, with its expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionLease {
    /// Execution the lease is on.
    pub execution_id: String,
    /// Worker that holds it.
    pub owner_id: String,
    /// Fencing token of this acquisition.
    pub lease_token: String,
    /// The lease is live while the store clock is before this instant.
    #[serde(with = "m3_types::timestamp::serde")]
    pub expires_at: OffsetDateTime,
}

impl ExecutionLease {
    /// The reference used to fence writes with this lease.
    pub fn to_ref(&self) -> ExecutionLeaseRef {
        ExecutionLeaseRef::new(&self.execution_id, &self.owner_id, &self.lease_token)
    }

    /// True if the lease has expired at `now`.
    pub fn is_expired_at(&self, now: OffsetDateTime) -> bool {
        self.expires_at <= now
    }
}

/// One entry of an execution's append-only event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionEvent {
    /// Execution the event belongs to.
    pub execution_id: String,
    /// Position in the log: 0, 1, 2, ... without gaps.
    pub sequence: u64,
    /// Event kind, e.g. `execution.state_changed` or `elicitation.request`.
    pub kind: String,
    /// Event payload (already redacted by the caller where needed).
    pub payload: Value,
    /// When the store appended the event.
    #[serde(with = "m3_types::timestamp::serde")]
    pub timestamp: OffsetDateTime,
}

impl ExecutionEvent {
    /// The event at `sequence` of `execution_id`'s log, appended at `timestamp` (for
    /// backends, which build events from their rows).
    pub fn new(
        execution_id: impl Into<String>,
        sequence: u64,
        kind: impl Into<String>,
        payload: Value,
        timestamp: OffsetDateTime,
    ) -> Self {
        Self {
            execution_id: execution_id.into(),
            sequence,
            kind: kind.into(),
            payload,
            timestamp,
        }
    }
}

/// Request for [`create_execution`](super::ExecutionStore::create_execution).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct NewExecution {
    /// Execution id; `None` lets the store generate a ULID.
    pub execution_id: Option<String>,
    /// The specification to persist.
    pub spec: Value,
    /// `fail` (default) or `managed`.
    pub human_input: HumanInput,
}

impl NewExecution {
    /// A new execution of `spec` with `human_input = fail` and a generated id.
    pub fn new(spec: Value) -> Self {
        Self {
            execution_id: None,
            spec,
            human_input: HumanInput::default(),
        }
    }

    /// Sets `human_input` (default `fail`).
    pub fn with_human_input(mut self, human_input: HumanInput) -> Self {
        self.human_input = human_input;
        self
    }

    /// Uses this execution id instead of a generated ULID (creation is then
    /// idempotent for an identical spec and `human_input`).
    pub fn with_execution_id(mut self, execution_id: impl Into<String>) -> Self {
        self.execution_id = Some(execution_id.into());
        self
    }
}

/// Request for [`acquire_lease`](super::ExecutionStore::acquire_lease).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct AcquireLease {
    /// Execution to lease.
    pub execution_id: String,
    /// Worker id.
    pub owner_id: String,
    /// Fencing token; `None` lets the store generate `lease-<ulid>`.
    pub lease_token: Option<String>,
    /// Lease duration from the store clock's `now`.
    pub ttl: Duration,
}

impl AcquireLease {
    /// A lease request with a generated token.
    pub fn new(
        execution_id: impl Into<String>,
        owner_id: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self {
            execution_id: execution_id.into(),
            owner_id: owner_id.into(),
            lease_token: None,
            ttl,
        }
    }

    /// Uses a caller-chosen lease token (acquisition is then idempotent for
    /// the same owner and token while the lease is live).
    pub fn with_lease_token(mut self, lease_token: impl Into<String>) -> Self {
        self.lease_token = Some(lease_token.into());
        self
    }
}

/// Request for [`finish`](super::ExecutionStore::finish).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct FinishExecution {
    /// Execution to finish.
    pub execution_id: String,
    /// Terminal outcome.
    pub outcome: ExecutionOutcome,
    /// Terminal error.
    pub error: Option<ErrorInfo>,
    /// Terminal result.
    pub result: Option<ExecutionResult>,
    /// The worker lease fencing this write; `None` for an unleased writer
    /// (allowed only while no worker lease exists).
    pub lease: Option<ExecutionLeaseRef>,
}

impl FinishExecution {
    /// Finishes `execution_id` with `outcome`, no error, no result, unleased.
    pub fn new(execution_id: impl Into<String>, outcome: ExecutionOutcome) -> Self {
        Self {
            execution_id: execution_id.into(),
            outcome,
            error: None,
            result: None,
            lease: None,
        }
    }

    /// Sets the terminal error.
    pub fn with_error(mut self, error: ErrorInfo) -> Self {
        self.error = Some(error);
        self
    }

    /// Sets the terminal result.
    pub fn with_result(mut self, result: ExecutionResult) -> Self {
        self.result = Some(result);
        self
    }

    /// Fences the write with the caller's worker lease.
    pub fn with_lease(mut self, lease: ExecutionLeaseRef) -> Self {
        self.execution_id.clone_from(&lease.execution_id);
        self.lease = Some(lease);
        self
    }
}

/// Request for [`renew_leases`](super::ExecutionStore::renew_leases): worker leases to
/// extend, each to `now + ttl`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct RenewLeases {
    /// The leases, in the order of the outcomes.
    pub leases: Vec<ExecutionLeaseRef>,
    /// How long each lease lasts from now (must be positive).
    pub ttl: Duration,
}

impl RenewLeases {
    /// Renews `leases` for `ttl`.
    pub fn new(leases: Vec<ExecutionLeaseRef>, ttl: Duration) -> Self {
        Self { leases, ttl }
    }
}

/// Request for [`append_event`](super::ExecutionStore::append_event).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct AppendEvent {
    /// Execution whose log gets the event.
    pub execution_id: String,
    /// The event kind (not one the store appends itself, see
    /// [`rules::RESERVED_KINDS`](super::rules::RESERVED_KINDS)).
    pub kind: String,
    /// The event payload (finite JSON).
    pub payload: Value,
    /// The worker lease fencing this write; `None` for an unleased writer
    /// (allowed only while no worker lease exists).
    pub lease: Option<ExecutionLeaseRef>,
}

impl AppendEvent {
    /// Appends a `kind` event with `payload` to `execution_id`'s log, unleased.
    pub fn new(execution_id: impl Into<String>, kind: impl Into<String>, payload: Value) -> Self {
        Self {
            execution_id: execution_id.into(),
            kind: kind.into(),
            payload,
            lease: None,
        }
    }

    /// Fences the write with the caller's worker lease.
    pub fn with_lease(mut self, lease: ExecutionLeaseRef) -> Self {
        self.lease = Some(lease);
        self
    }
}

/// Request for [`terminalize_expired`](super::ExecutionStore::terminalize_expired).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct TerminalizeExpired {
    /// The expired lease (as returned by
    /// [`list_expired_leases`](super::ExecutionStore::list_expired_leases)).
    pub lease: ExecutionLeaseRef,
    /// Terminal outcome (`failed` for managed executions, `interrupted` otherwise).
    pub outcome: ExecutionOutcome,
    /// Terminal error (for managed executions: `managed_input_recovery_unavailable`).
    pub error: Option<ErrorInfo>,
    /// Short reason, recorded in the terminal event and as the failure message
    /// of every unresolved managed-input round (e.g. `"worker lease expired"`).
    pub reason: String,
}

impl TerminalizeExpired {
    /// Terminalizes the execution of `lease` with `outcome` and `reason`.
    pub fn new(
        lease: ExecutionLeaseRef,
        outcome: ExecutionOutcome,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            lease,
            outcome,
            error: None,
            reason: reason.into(),
        }
    }

    /// Sets the terminal error.
    pub fn with_error(mut self, error: ErrorInfo) -> Self {
        self.error = Some(error);
        self
    }
}

/// What [`terminalize_expired`](super::ExecutionStore::terminalize_expired) did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Terminalized {
    /// The finished execution.
    pub record: ExecutionRecord,
    /// How many unresolved managed-input rounds were marked
    /// `failed/recovery_unavailable` in the same transaction.
    pub rounds_failed: u64,
}

impl Terminalized {
    /// `record`, finished with `rounds_failed` rounds marked failed (for backends).
    pub fn new(record: ExecutionRecord, rounds_failed: u64) -> Self {
        Self {
            record,
            rounds_failed,
        }
    }
}

/// Filter for [`list_executions`](super::ExecutionStore::list_executions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct ListExecutions {
    /// Only executions in this lifecycle state.
    pub lifecycle: Option<ExecutionStatus>,
    /// Only executions with this `human_input`.
    pub human_input: Option<HumanInput>,
    /// At most this many rows (oldest first).
    pub limit: Option<u32>,
}

impl ListExecutions {
    /// Every execution, oldest first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only executions in `lifecycle`.
    pub fn with_lifecycle(mut self, lifecycle: ExecutionStatus) -> Self {
        self.lifecycle = Some(lifecycle);
        self
    }

    /// Only executions with `human_input`.
    pub fn with_human_input(mut self, human_input: HumanInput) -> Self {
        self.human_input = Some(human_input);
        self
    }

    /// At most `limit` rows.
    pub fn with_limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Request for [`claim_queued`](super::ExecutionStore::claim_queued): the worker that
/// claims, how long its lease lasts, and optionally the one execution it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct ClaimQueued {
    /// Worker id the lease is handed to.
    pub owner_id: String,
    /// Lease duration from the store clock's `now`.
    pub ttl: Duration,
    /// Claim only this execution (a kit running its own submission); `None`: the oldest
    /// queued execution of the store.
    pub execution_id: Option<String>,
}

impl ClaimQueued {
    /// Claims the oldest queued execution for `owner_id` with a lease of `ttl`.
    pub fn new(owner_id: impl Into<String>, ttl: Duration) -> Self {
        Self {
            owner_id: owner_id.into(),
            ttl,
            execution_id: None,
        }
    }

    /// Claims only `execution_id` (still only while it is queued and unleased).
    pub fn only(mut self, execution_id: impl Into<String>) -> Self {
        self.execution_id = Some(execution_id.into());
        self
    }
}

/// What [`claim_queued`](super::ExecutionStore::claim_queued) handed out.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClaimedExecution {
    /// The execution, now in lifecycle `starting` under `lease`.
    pub record: ExecutionRecord,
    /// The caller's fresh worker lease.
    pub lease: ExecutionLease,
}

impl ClaimedExecution {
    /// `record`, handed out under `lease` (for backends).
    pub fn new(record: ExecutionRecord, lease: ExecutionLease) -> Self {
        Self { record, lease }
    }
}
