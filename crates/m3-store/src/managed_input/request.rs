//! Small request values for [`ManagedInputStore`](super::ManagedInputStore) operations.
//!
//! Operations that need more than a round identity take one of these values instead of a
//! long positional argument list. Required parts go through `new`, optional parts through
//! consuming `with_*` setters.

use std::time::Duration;

use m3_types::{
    DeliveryState, ElicitationResponse, ManagedInputLease, ManagedInputRecord,
    PendingElicitationRound,
};
use serde_json::{Map, Value};

/// The default `round_limit` of [`CreateRound`]: the reference's per-execution round budget.
pub const DEFAULT_ROUND_LIMIT: u32 = 10;

/// Identifies one round: `(execution_id, round_id)`, the table's primary key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RoundRef {
    /// The execution that owns the round.
    pub execution_id: String,
    /// The round's durable identifier.
    pub round_id: String,
}

impl RoundRef {
    /// Names the round `round_id` of execution `execution_id`.
    ///
    /// ```
    /// use m3_store::RoundRef;
    /// let round = RoundRef::new("exec-1", "round-1");
    /// assert_eq!(round.round_id, "round-1");
    /// ```
    pub fn new(execution_id: impl Into<String>, round_id: impl Into<String>) -> Self {
        Self {
            execution_id: execution_id.into(),
            round_id: round_id.into(),
        }
    }

    /// The identity of a stored record.
    pub fn of(record: &ManagedInputRecord) -> Self {
        Self::new(
            record.pending.execution_id.clone(),
            record.pending.round_id.clone(),
        )
    }

    /// The identity of a pending round.
    pub fn of_pending(pending: &PendingElicitationRound) -> Self {
        Self::new(pending.execution_id.clone(), pending.round_id.clone())
    }
}

impl From<&ManagedInputRecord> for RoundRef {
    fn from(record: &ManagedInputRecord) -> Self {
        Self::of(record)
    }
}

/// The compare-and-set credentials of a writer: the lease owner and its token.
///
/// Every mutation after `create_round` presents one; the store compares both with the stored
/// lease in the same transaction as the write.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeaseRef {
    /// The worker that holds the lease.
    pub owner_id: String,
    /// The current compare-and-set token.
    pub lease_token: String,
}

impl std::fmt::Debug for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a write credential: never print it in full.
        f.debug_struct("LeaseRef")
            .field("owner_id", &self.owner_id)
            .field("lease_token", &"<redacted>")
            .finish()
    }
}

impl LeaseRef {
    /// Credentials for `owner_id` holding `lease_token`.
    pub fn new(owner_id: impl Into<String>, lease_token: impl Into<String>) -> Self {
        Self {
            owner_id: owner_id.into(),
            lease_token: lease_token.into(),
        }
    }

    /// The credentials of a stored lease.
    pub fn of(lease: &ManagedInputLease) -> Self {
        Self::new(lease.owner_id.clone(), lease.lease_token.clone())
    }
}

impl From<&ManagedInputLease> for LeaseRef {
    fn from(lease: &ManagedInputLease) -> Self {
        Self::of(lease)
    }
}

impl From<&ManagedInputRecord> for LeaseRef {
    fn from(record: &ManagedInputRecord) -> Self {
        Self::of(&record.lease)
    }
}

/// Everything `create_round` persists besides the generated timestamps.
///
/// `round_index` defaults to 0 and `round_limit` to [`DEFAULT_ROUND_LIMIT`]; the lease token
/// is generated (`lease-` + 32 random URL-safe characters) unless one is supplied.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct CreateRound {
    /// The pending round (its `execution_id` and `round_id` are the round's identity).
    pub pending: PendingElicitationRound,
    /// Zero-based index of this round within its execution.
    pub round_index: u32,
    /// The execution's round budget; `round_index` must be below it.
    pub round_limit: u32,
    /// The worker that owns the new round.
    pub owner_id: String,
    /// How long the first lease lasts (must be positive).
    pub lease_duration: Duration,
    /// An explicit lease token (needed to replay `create_round` idempotently).
    pub lease_token: Option<String>,
    /// The harness's own session identifier.
    pub harness_session_id: Option<String>,
    /// Opaque native resume token (adapter metadata, never proof of safe redelivery).
    pub native_resume_token: Option<String>,
    /// Opaque delivery idempotency key (adapter metadata).
    pub delivery_idempotency_key: Option<String>,
    /// The M3 session of the turn that raised the round.
    pub session_id: Option<String>,
    /// The turn that raised the round.
    pub turn_id: Option<String>,
    /// The exact operation parameters of the server retry.
    pub operation_parameters: Map<String, Value>,
}

impl CreateRound {
    /// A request to persist `pending` as round 0 of at most [`DEFAULT_ROUND_LIMIT`], owned by
    /// `owner_id` for `lease_duration`.
    pub fn new(
        pending: PendingElicitationRound,
        owner_id: impl Into<String>,
        lease_duration: Duration,
    ) -> Self {
        Self {
            pending,
            round_index: 0,
            round_limit: DEFAULT_ROUND_LIMIT,
            owner_id: owner_id.into(),
            lease_duration,
            lease_token: None,
            harness_session_id: None,
            native_resume_token: None,
            delivery_idempotency_key: None,
            session_id: None,
            turn_id: None,
            operation_parameters: Map::new(),
        }
    }

    /// Sets the zero-based round index (default 0).
    pub fn with_round_index(mut self, round_index: u32) -> Self {
        self.round_index = round_index;
        self
    }

    /// Sets the round budget (default [`DEFAULT_ROUND_LIMIT`]).
    pub fn with_round_limit(mut self, round_limit: u32) -> Self {
        self.round_limit = round_limit;
        self
    }

    /// Uses `lease_token` instead of a generated token.
    pub fn with_lease_token(mut self, lease_token: impl Into<String>) -> Self {
        self.lease_token = Some(lease_token.into());
        self
    }

    /// Records the harness's session identifier.
    pub fn with_harness_session_id(mut self, value: impl Into<String>) -> Self {
        self.harness_session_id = Some(value.into());
        self
    }

    /// Records an opaque native resume token.
    pub fn with_native_resume_token(mut self, value: impl Into<String>) -> Self {
        self.native_resume_token = Some(value.into());
        self
    }

    /// Records an opaque delivery idempotency key.
    pub fn with_delivery_idempotency_key(mut self, value: impl Into<String>) -> Self {
        self.delivery_idempotency_key = Some(value.into());
        self
    }

    /// Records the M3 session identifier.
    pub fn with_session_id(mut self, value: impl Into<String>) -> Self {
        self.session_id = Some(value.into());
        self
    }

    /// Records the turn identifier.
    pub fn with_turn_id(mut self, value: impl Into<String>) -> Self {
        self.turn_id = Some(value.into());
        self
    }

    /// Records the operation parameters (default: empty).
    pub fn with_operation_parameters(mut self, parameters: Map<String, Value>) -> Self {
        self.operation_parameters = parameters;
        self
    }
}

/// A keyed response submission for `submit_responses`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct ResponseSubmission {
    /// One response per pending request key.
    pub responses: m3_types::ResponseMap,
    /// The caller's idempotency key, persisted with the response.
    pub idempotency_key: String,
    /// Who answers (`None`: nobody said). Stored with the response in the same transaction
    /// and carried by the `round.answered` change record; an idempotent repeat keeps the
    /// first answer's actor.
    pub actor: Option<m3_types::Actor>,
}

impl ResponseSubmission {
    /// Submits `responses` under `idempotency_key`.
    pub fn new(responses: m3_types::ResponseMap, idempotency_key: impl Into<String>) -> Self {
        Self {
            responses,
            idempotency_key: idempotency_key.into(),
            actor: None,
        }
    }

    /// This submission answered by `actor`.
    pub fn with_actor(mut self, actor: m3_types::Actor) -> Self {
        self.actor = Some(actor);
        self
    }

    /// A submission for a single request key.
    pub fn single(
        request_key: impl Into<String>,
        response: ElicitationResponse,
        idempotency_key: impl Into<String>,
    ) -> Self {
        let mut responses = m3_types::ResponseMap::new();
        responses.insert(request_key.into(), response);
        Self::new(responses, idempotency_key)
    }
}

/// A replacement owner's takeover request for `claim_round`.
///
/// `delivery_state` is the adapter's evidence of what happened to the response; without it
/// the claim is refused. `idempotent_delivery` asserts that redelivering a validated
/// response is safe.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct ClaimRound {
    /// The replacement owner.
    pub owner_id: String,
    /// How long the new lease lasts (must be positive).
    pub lease_duration: Duration,
    /// The token the replacement expects to replace.
    pub expected_lease_token: Option<String>,
    /// The adapter's delivery-state evidence.
    pub delivery_state: Option<DeliveryState>,
    /// Whether redelivery is proven idempotent (default false).
    pub idempotent_delivery: bool,
}

impl std::fmt::Debug for ClaimRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimRound")
            .field("owner_id", &self.owner_id)
            .field("lease_duration", &self.lease_duration)
            .field(
                "expected_lease_token",
                &self.expected_lease_token.as_ref().map(|_| "<redacted>"),
            )
            .field("delivery_state", &self.delivery_state)
            .field("idempotent_delivery", &self.idempotent_delivery)
            .finish()
    }
}

impl ClaimRound {
    /// A claim by `owner_id` for `lease_duration`, without evidence yet.
    pub fn new(owner_id: impl Into<String>, lease_duration: Duration) -> Self {
        Self {
            owner_id: owner_id.into(),
            lease_duration,
            expected_lease_token: None,
            delivery_state: None,
            idempotent_delivery: false,
        }
    }

    /// The lease token the claim replaces (required for the claim to succeed).
    pub fn with_expected_lease_token(mut self, token: impl Into<String>) -> Self {
        self.expected_lease_token = Some(token.into());
        self
    }

    /// The adapter's delivery-state evidence.
    pub fn with_delivery_state(mut self, state: DeliveryState) -> Self {
        self.delivery_state = Some(state);
        self
    }

    /// Asserts (or withdraws) proof that redelivery is idempotent.
    pub fn with_idempotent_delivery(mut self, proven: bool) -> Self {
        self.idempotent_delivery = proven;
        self
    }
}

/// A failure code and message for `fail`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct RoundFailure {
    /// Stable failure code (non-empty), e.g. `"cancelled"`.
    pub code: String,
    /// Human-readable failure message (non-empty).
    pub message: String,
}

impl RoundFailure {
    /// A failure with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// Request for [`renew_leases`](super::ManagedInputStore::renew_leases): round leases to
/// extend, each to `now + lease_duration`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct RenewRoundLeases {
    /// Each round and the lease presented for it, in the order of the outcomes.
    pub leases: Vec<(RoundRef, LeaseRef)>,
    /// How long each lease lasts from now (must be positive).
    pub lease_duration: Duration,
}

impl RenewRoundLeases {
    /// Renews `leases` for `lease_duration`.
    pub fn new(leases: Vec<(RoundRef, LeaseRef)>, lease_duration: Duration) -> Self {
        Self {
            leases,
            lease_duration,
        }
    }
}
