//! Serializable trace records: one [`LogicalOperation`] with its wire attempts.
//!
//! A logical operation is one `tools/call`, `prompts/get` or `resources/read` as
//! the agent asked for it. In the 2026-07-28 era every retry is a new wire
//! attempt (new JSON-RPC id) carrying the previous round's answers; in the legacy
//! era there is one attempt and its input rounds are the `elicitation/create`
//! exchanges that happened while it was in flight ([`OperationAttempt::rounds`]).

use m3_types::{ErrorInfo, OperationKind, ResponseMap};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::options::ProtocolEra;

/// One logical operation and every wire attempt it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LogicalOperation {
    /// Id of the logical operation (a ULID unless the caller chose one).
    pub logical_operation_id: String,
    /// Server binding name.
    pub server: String,
    /// Tool, prompt or resource.
    pub operation_kind: OperationKind,
    /// Tool or prompt name, or resource URI.
    pub operation_name: String,
    /// Arguments as sent on every attempt (`None` for resources).
    pub arguments: Option<Map<String, Value>>,
    /// The era of the connection.
    pub era: ProtocolEra,
    /// The negotiated protocol version string.
    pub protocol_version: String,
    /// When the operation started.
    #[serde(with = "m3_types::timestamp::serde")]
    pub started_at: OffsetDateTime,
    /// When it ended (result or error); `None` while in progress.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub finished_at: Option<OffsetDateTime>,
    /// Input rounds handed to the caller so far.
    pub rounds: u32,
    /// The wire attempts, in order.
    pub attempts: Vec<OperationAttempt>,
    /// Why the operation failed, if it did (also when no attempt failed, e.g. the
    /// round limit after an `input_required` answer).
    pub error: Option<ErrorInfo>,
}

/// One wire request of a logical operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OperationAttempt {
    /// 1-based attempt index.
    pub attempt: u32,
    /// When the request was sent.
    #[serde(with = "m3_types::timestamp::serde")]
    pub started_at: OffsetDateTime,
    /// When the answer (or error) arrived.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub finished_at: Option<OffsetDateTime>,
    /// Time spent waiting for the server, in milliseconds (legacy: excluding the
    /// time rounds spent with the caller).
    pub duration_ms: Option<u64>,
    /// The `requestState` echoed on this attempt (2026-07-28).
    pub request_state: Option<String>,
    /// The `inputResponses` sent on this attempt (2026-07-28).
    pub input_responses: Option<ResponseMap>,
    /// Whether this attempt asked for input.
    pub input_required: bool,
    /// Legacy era: the `elicitation/create` exchanges during this attempt; tasks
    /// extension: the rounds of the task this attempt created, answered by `tasks/update`.
    pub rounds: Vec<RoundExchange>,
    /// The task the server answered this `tools/call` with (tasks extension of
    /// 2026-07-28); the attempt then ends when the task does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// How the attempt ended.
    pub outcome: AttemptOutcome,
}

/// One legacy `elicitation/create` exchange inside an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RoundExchange {
    /// 1-based round index within the logical operation.
    pub round_index: u32,
    /// The request keys of the round (always `["elicitation"]` in the legacy era).
    pub request_keys: Vec<String>,
    /// The answers delivered, if any.
    pub responses: Option<ResponseMap>,
    /// The server withdrew the request (`notifications/cancelled`) before an answer.
    pub withdrawn: bool,
}

/// How a wire attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// Still waiting for the server.
    Pending,
    /// The final result (`is_error` is the tool's own error flag).
    Complete {
        /// The result JSON as the server sent it.
        result: Value,
        /// `CallToolResult.isError`, false for prompts and resources.
        is_error: bool,
    },
    /// The server answered `input_required` (2026-07-28).
    InputRequired {
        /// Keys of `inputRequests` (empty for a state-only round).
        request_keys: Vec<String>,
        /// The opaque `requestState`, verbatim.
        request_state: Option<String>,
    },
    /// The attempt failed.
    Error {
        /// The typed error.
        error: ErrorInfo,
    },
}

impl LogicalOperation {
    /// A logical operation started at `started_at` under a fresh id: no attempt, no round,
    /// not finished. (The Codex harness builds the records of the operations it observes
    /// on the relayed wire with it.)
    pub fn started(
        server: impl Into<String>,
        operation_kind: OperationKind,
        operation_name: impl Into<String>,
        arguments: Option<Map<String, Value>>,
        era: ProtocolEra,
        protocol_version: impl Into<String>,
        started_at: OffsetDateTime,
    ) -> Self {
        Self {
            logical_operation_id: m3_types::new_id(),
            server: server.into(),
            operation_kind,
            operation_name: operation_name.into(),
            arguments,
            era,
            protocol_version: protocol_version.into(),
            started_at,
            finished_at: None,
            rounds: 0,
            attempts: Vec::new(),
            error: None,
        }
    }

    /// Whether the operation has ended.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }

    /// The last attempt, if any.
    pub fn last_attempt(&self) -> Option<&OperationAttempt> {
        self.attempts.last()
    }
}

impl OperationAttempt {
    /// Wire attempt number `attempt` (1-based), sent at `started_at` with the answers and
    /// `requestState` it carries, still waiting for the server.
    pub fn pending(
        attempt: u32,
        started_at: OffsetDateTime,
        request_state: Option<String>,
        input_responses: Option<ResponseMap>,
    ) -> Self {
        Self {
            attempt,
            started_at,
            finished_at: None,
            duration_ms: None,
            request_state,
            input_responses,
            input_required: false,
            rounds: Vec::new(),
            task_id: None,
            outcome: AttemptOutcome::Pending,
        }
    }
}

impl RoundExchange {
    /// Round `round_index` asking for `request_keys`, not answered yet.
    pub fn asked(round_index: u32, request_keys: Vec<String>) -> Self {
        Self {
            round_index,
            request_keys,
            responses: None,
            withdrawn: false,
        }
    }
}
