//! Managed-input records: status, lease and the stored round record.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::elicitation::ResponseMap;
use crate::error::{Error, Result};
use crate::round::{PendingElicitationRound, require_non_empty};

wire_enum! {
    /// Status of a stored round (the six states of the state machine shared with sf-m3, the Python
    /// implementation).
    frozen pub enum ManagedInputStatus {
        /// `"pending"`: waiting for a response.
        Pending => "pending",
        /// `"response_validated"`: a response was validated and committed.
        ResponseValidated => "response_validated",
        /// `"delivery_started"`: the worker began delivering it.
        DeliveryStarted => "delivery_started",
        /// `"delivered"`: the server received it.
        Delivered => "delivered",
        /// `"resolved"`: the operation continued (terminal).
        Resolved => "resolved",
        /// `"failed"`: the round ended in failure (terminal).
        Failed => "failed",
    }
    unknown = |s: &str| {
        Error::managed_input_validation(format!("unknown managed-input status '{s}'"))
    }
}

impl ManagedInputStatus {
    /// `resolved` and `failed` are terminal.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Resolved | Self::Failed)
    }

    /// Whether a record in this status must hold validated responses and their key.
    pub fn requires_responses(self) -> bool {
        matches!(
            self,
            Self::ResponseValidated | Self::DeliveryStarted | Self::Delivered | Self::Resolved
        )
    }
}

wire_enum! {
    /// Adapter evidence about delivery, given to `claim_round`.
    frozen pub enum DeliveryState {
        /// `"not_started"`: delivery never began.
        NotStarted => "not_started",
        /// `"not_delivered"`: delivery began but did not reach the server.
        NotDelivered => "not_delivered",
        /// `"delivered"`: the server received the response.
        Delivered => "delivered",
    }
    unknown = |s: &str| {
        Error::managed_input_validation(format!(
            "delivery_state must be 'not_started', 'not_delivered' or 'delivered', got '{s}'"
        ))
    }
}

/// The compare-and-set token currently allowed to mutate a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ManagedInputLease {
    /// Worker that owns the round.
    pub owner_id: String,
    /// Secret token of this lease.
    pub lease_token: String,
    /// Lease expiry.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub expires_at: OffsetDateTime,
}

impl ManagedInputLease {
    /// A lease.
    pub fn new(
        owner_id: impl Into<String>,
        lease_token: impl Into<String>,
        expires_at: OffsetDateTime,
    ) -> Self {
        Self {
            owner_id: owner_id.into(),
            lease_token: lease_token.into(),
            expires_at,
        }
    }

    /// Checks that owner and token are non-empty.
    ///
    /// # Errors
    /// `managed_input_invalid`.
    pub fn validate(&self) -> Result<()> {
        require_non_empty("owner_id", &self.owner_id)?;
        require_non_empty("lease_token", &self.lease_token)
    }

    /// Whether the lease is still live at `now` (`expires_at > now`).
    pub fn is_live_at(&self, now: OffsetDateTime) -> bool {
        self.expires_at > now
    }
}

/// A stored round: the pending round plus lease, status, responses and lifecycle data.
///
/// Fields and invariants are those of sf-m3, the Python implementation; see
/// [`ManagedInputRecord::validate`].
/// Deserialization validates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, remote = "Self")]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ManagedInputRecord {
    /// The public round.
    pub pending: PendingElicitationRound,
    /// Zero-based index of this round in its execution; below `round_limit`.
    pub round_index: u32,
    /// Round budget of the execution (positive).
    pub round_limit: u32,
    /// Current status.
    pub status: ManagedInputStatus,
    /// Current lease.
    pub lease: ManagedInputLease,
    /// Validated responses (unredacted; needed for delivery).
    #[serde(default)]
    pub responses: Option<ResponseMap>,
    /// Idempotency key of the accepted response.
    #[serde(default)]
    pub response_idempotency_key: Option<String>,
    /// Harness session that raised the round.
    #[serde(default)]
    pub harness_session_id: Option<String>,
    /// Opaque adapter resume token (not proof of safe redelivery).
    #[serde(default)]
    pub native_resume_token: Option<String>,
    /// Opaque adapter delivery key (not proof of safe redelivery).
    #[serde(default)]
    pub delivery_idempotency_key: Option<String>,
    /// M3 session id.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Turn id.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// Exact operation parameters for the retry (empty by default).
    #[serde(default)]
    pub operation_parameters: Map<String, Value>,
    /// Number of delivery attempts.
    #[serde(default)]
    pub delivery_attempts: u32,
    /// Creation time.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub created_at: OffsetDateTime,
    /// Last change time.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub updated_at: OffsetDateTime,
    /// When the response was validated.
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub response_validated_at: Option<OffsetDateTime>,
    /// When delivery started.
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub delivery_started_at: Option<OffsetDateTime>,
    /// When delivery was confirmed.
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub delivered_at: Option<OffsetDateTime>,
    /// When the round resolved.
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub resolved_at: Option<OffsetDateTime>,
    /// When the round failed.
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub failed_at: Option<OffsetDateTime>,
    /// Failure code (required when failed), e.g. `recovery_unavailable`.
    #[serde(default)]
    pub failure_code: Option<String>,
    /// Failure message.
    #[serde(default)]
    pub failure_message: Option<String>,
}

impl Serialize for ManagedInputRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        Self::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for ManagedInputRecord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let record = Self::deserialize(d)?;
        record.validate().map_err(serde::de::Error::custom)?;
        Ok(record)
    }
}

impl ManagedInputRecord {
    /// The typed [`failure_code`](Self::failure_code) of a failed round (`None` when it has
    /// none, or one that is neither `recovery_unavailable` nor an error code).
    pub fn failure(&self) -> Option<crate::RoundFailureCode> {
        self.failure_code
            .as_deref()
            .and_then(|code| code.parse().ok())
    }

    /// Whether recovery already failed this round closed: `failed` with failure code
    /// `recovery_unavailable` (the round's worker was lost, or its lease could not be kept).
    pub fn is_recovery_failed(&self) -> bool {
        self.status == ManagedInputStatus::Failed
            && self.failure() == Some(crate::RoundFailureCode::RecoveryUnavailable)
    }

    /// A fresh `pending` record created at `now` (no responses, no optional metadata).
    ///
    /// # Errors
    /// `managed_input_invalid` when an invariant fails (see [`validate`](Self::validate)).
    pub fn new_pending(
        pending: PendingElicitationRound,
        round_index: u32,
        round_limit: u32,
        lease: ManagedInputLease,
        now: OffsetDateTime,
    ) -> Result<Self> {
        let record = Self {
            pending,
            round_index,
            round_limit,
            status: ManagedInputStatus::Pending,
            lease,
            responses: None,
            response_idempotency_key: None,
            harness_session_id: None,
            native_resume_token: None,
            delivery_idempotency_key: None,
            session_id: None,
            turn_id: None,
            operation_parameters: Map::new(),
            delivery_attempts: 0,
            created_at: now,
            updated_at: now,
            response_validated_at: None,
            delivery_started_at: None,
            delivered_at: None,
            resolved_at: None,
            failed_at: None,
            failure_code: None,
            failure_message: None,
        };
        record.validate()?;
        Ok(record)
    }

    /// Execution id (from `pending`).
    pub fn execution_id(&self) -> &str {
        &self.pending.execution_id
    }

    /// Round id (from `pending`).
    pub fn round_id(&self) -> &str {
        &self.pending.round_id
    }

    /// Opaque request state (from `pending`).
    pub fn request_state(&self) -> Option<&str> {
        self.pending.request_state.as_deref()
    }

    /// Lease token (from `lease`).
    pub fn lease_token(&self) -> &str {
        &self.lease.lease_token
    }

    /// Lease owner (from `lease`).
    pub fn owner_id(&self) -> &str {
        &self.lease.owner_id
    }

    /// Checks every record invariant of sf-m3 (the Python implementation).
    ///
    /// - the pending round and the lease are valid;
    /// - `round_limit > 0` and `round_index < round_limit` ("round index must be below the round
    ///   limit");
    /// - `pending` ⇒ no responses, no response key, `delivery_attempts == 0`;
    /// - `response_validated`/`delivery_started`/`delivered`/`resolved` ⇒ responses and key
    ///   present ("delivered rounds require validated responses");
    /// - `failed` ⇒ non-empty `failure_code`;
    /// - optional ids, when present, are non-empty.
    ///
    /// # Errors
    /// `managed_input_invalid`.
    pub fn validate(&self) -> Result<()> {
        self.pending.validate()?;
        self.lease.validate()?;
        if self.round_limit == 0 {
            return Err(Error::managed_input_validation(
                "round_limit must be positive",
            ));
        }
        if self.round_index >= self.round_limit {
            return Err(Error::managed_input_validation(
                "round index must be below the round limit",
            )
            .with_detail("round_index", self.round_index)
            .with_detail("round_limit", self.round_limit));
        }
        for (label, value) in [
            ("response_idempotency_key", &self.response_idempotency_key),
            ("harness_session_id", &self.harness_session_id),
            ("native_resume_token", &self.native_resume_token),
            ("delivery_idempotency_key", &self.delivery_idempotency_key),
            ("session_id", &self.session_id),
            ("turn_id", &self.turn_id),
        ] {
            if let Some(value) = value {
                require_non_empty(label, value)?;
            }
        }
        if let Some(responses) = &self.responses {
            for response in responses.values() {
                response.validate()?;
            }
        }
        match self.status {
            ManagedInputStatus::Pending => {
                if self.responses.is_some() || self.response_idempotency_key.is_some() {
                    return Err(Error::managed_input_validation(
                        "pending rounds cannot hold responses",
                    ));
                }
                if self.delivery_attempts != 0 {
                    return Err(Error::managed_input_validation(
                        "pending rounds cannot have delivery attempts",
                    ));
                }
            }
            status if status.requires_responses() => {
                if self.responses.is_none() || self.response_idempotency_key.is_none() {
                    return Err(Error::managed_input_validation(
                        "delivered rounds require validated responses",
                    )
                    .with_detail("status", status.as_str()));
                }
            }
            _ => {
                if self.failure_code.as_deref().is_none_or(str::is_empty) {
                    return Err(Error::managed_input_validation(
                        "failed rounds require a failure code",
                    ));
                }
            }
        }
        Ok(())
    }
}
