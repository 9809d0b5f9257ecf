//! The pending elicitation round: the public, lease-free view of a stored round.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use time::OffsetDateTime;

use crate::elicitation::{ElicitationRequest, OperationKind};
use crate::error::{Error, Result};

/// One round of elicitation requests an execution waits on.
///
/// Invariants (checked by [`PendingElicitationRound::new`], [`validate`](Self::validate) and
/// deserialization): every id is non-empty, `requests` is non-empty and each key equals its
/// request's `request_key`. The JSON shape is that of sf-m3, the Python implementation
/// (`request_state` and `deadline` are `null` when absent).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct PendingElicitationRound {
    /// Durable identifier of this round.
    pub round_id: String,
    /// Execution that owns the round.
    pub execution_id: String,
    /// Logical tool, prompt or resource action identity.
    pub logical_operation_id: String,
    /// Server that produced the requests.
    pub server: String,
    /// MCP operation category.
    pub operation_kind: OperationKind,
    /// Tool name, prompt name or resource URI.
    pub operation_name: String,
    /// Opaque server state M3 echoes on the retry (`""` allowed).
    pub request_state: Option<String>,
    /// Requests keyed by their `request_key`.
    pub requests: BTreeMap<String, ElicitationRequest>,
    /// Round creation time.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub created_at: OffsetDateTime,
    /// When the managed runtime gives up waiting (`OperationTimeout`).
    #[serde(with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub deadline: Option<OffsetDateTime>,
}

impl PendingElicitationRound {
    /// Builds and validates a round (no `request_state`, no `deadline`).
    ///
    /// # Errors
    /// `managed_input_invalid` for an empty id, empty `requests` ("pending elicitation round
    /// requires requests") or a key that differs from its request's `request_key`.
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the eight required fields of M3's pending round"
    )]
    pub fn new(
        round_id: impl Into<String>,
        execution_id: impl Into<String>,
        logical_operation_id: impl Into<String>,
        server: impl Into<String>,
        operation_kind: OperationKind,
        operation_name: impl Into<String>,
        requests: BTreeMap<String, ElicitationRequest>,
        created_at: OffsetDateTime,
    ) -> Result<Self> {
        let round = Self {
            round_id: round_id.into(),
            execution_id: execution_id.into(),
            logical_operation_id: logical_operation_id.into(),
            server: server.into(),
            operation_kind,
            operation_name: operation_name.into(),
            request_state: None,
            requests,
            created_at,
            deadline: None,
        };
        round.validate()?;
        Ok(round)
    }

    /// Keys `requests` by their own `request_key` (for [`PendingElicitationRound::new`]).
    ///
    /// # Errors
    /// `managed_input_invalid` when two requests share a key.
    pub fn request_map(
        requests: impl IntoIterator<Item = ElicitationRequest>,
    ) -> Result<BTreeMap<String, ElicitationRequest>> {
        let mut map = BTreeMap::new();
        for request in requests {
            let key = request.request_key().to_owned();
            if map.insert(key.clone(), request).is_some() {
                return Err(Error::managed_input_validation(format!(
                    "pending elicitation round has duplicate request key '{key}'"
                )));
            }
        }
        Ok(map)
    }

    /// Sets the opaque `request_state`.
    #[must_use]
    pub fn with_request_state(mut self, state: impl Into<String>) -> Self {
        self.request_state = Some(state.into());
        self
    }

    /// Sets the `deadline`.
    #[must_use]
    pub fn with_deadline(mut self, deadline: OffsetDateTime) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Checks every invariant of the round.
    ///
    /// # Errors
    /// `managed_input_invalid`, naming the offending field.
    pub fn validate(&self) -> Result<()> {
        for (label, value) in [
            ("round_id", &self.round_id),
            ("execution_id", &self.execution_id),
            ("logical_operation_id", &self.logical_operation_id),
            ("server", &self.server),
            ("operation_name", &self.operation_name),
        ] {
            require_non_empty(label, value)?;
        }
        if self.requests.is_empty() {
            return Err(Error::managed_input_validation(
                "pending elicitation round requires requests",
            ));
        }
        for (key, request) in &self.requests {
            require_non_empty("request_key", request.request_key())?;
            if key != request.request_key() {
                return Err(Error::managed_input_validation(
                    "pending request keys must match their request_key",
                )
                .with_detail("key", key.as_str())
                .with_detail("request_key", request.request_key()));
            }
        }
        Ok(())
    }
}

/// `label must be a non-empty string` as a validation error.
pub(crate) fn require_non_empty(label: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::managed_input_validation(format!(
            "{label} must be a non-empty string"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRound {
    round_id: String,
    execution_id: String,
    logical_operation_id: String,
    server: String,
    operation_kind: OperationKind,
    operation_name: String,
    #[serde(default)]
    request_state: Option<String>,
    requests: BTreeMap<String, ElicitationRequest>,
    #[serde(with = "crate::timestamp::serde")]
    created_at: OffsetDateTime,
    #[serde(default, with = "crate::timestamp::serde::option")]
    deadline: Option<OffsetDateTime>,
}

impl<'de> Deserialize<'de> for PendingElicitationRound {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = RawRound::deserialize(d)?;
        let round = Self {
            round_id: raw.round_id,
            execution_id: raw.execution_id,
            logical_operation_id: raw.logical_operation_id,
            server: raw.server,
            operation_kind: raw.operation_kind,
            operation_name: raw.operation_name,
            request_state: raw.request_state,
            requests: raw.requests,
            created_at: raw.created_at,
            deadline: raw.deadline,
        };
        round.validate().map_err(serde::de::Error::custom)?;
        Ok(round)
    }
}
