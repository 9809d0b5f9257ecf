//! Operations that may need input: one interface for both eras.
//!
//! [`McpConnection::start`](super::McpConnection::start) returns an
//! [`OperationProgress`]: the final result, or an [`InputRound`] carrying the keyed
//! requests. [`InputRound::respond`] answers it and continues, returning the next
//! progress. In 2026-07-28 the continuation is a new wire attempt (same method,
//! name and arguments, new JSON-RPC id, `inputResponses`, and the `requestState`
//! echoed byte-for-byte); in the legacy era it is the JSON-RPC response to the
//! server's `elicitation/create` while the original request stays in flight.

use std::collections::{BTreeMap, BTreeSet};

use m3_types::{
    ElicitationRequest, ElicitationResponse, Error, OperationKind, ResponseMap, Result,
};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::driver::Driver;
use super::options::ProtocolEra;
use super::record::LogicalOperation;
use super::wire;

/// The request key of every legacy-era round.
pub const LEGACY_REQUEST_KEY: &str = "elicitation";

/// What to run: a tool call, a prompt get or a resource read.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct OperationRequest {
    pub(super) kind: OperationKind,
    pub(super) name: String,
    pub(super) arguments: Option<Map<String, Value>>,
    pub(super) round_limit: Option<u32>,
    pub(super) logical_operation_id: Option<String>,
}

impl OperationRequest {
    /// `tools/call` of `name` with `arguments`.
    pub fn tool(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Self::new(OperationKind::Tool, name.into(), Some(arguments))
    }

    /// `prompts/get` of `name` with `arguments` (string values on the wire).
    pub fn prompt(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Self::new(OperationKind::Prompt, name.into(), Some(arguments))
    }

    /// `resources/read` of `uri`.
    pub fn resource(uri: impl Into<String>) -> Self {
        Self::new(OperationKind::Resource, uri.into(), None)
    }

    fn new(kind: OperationKind, name: String, arguments: Option<Map<String, Value>>) -> Self {
        Self {
            kind,
            name,
            arguments,
            round_limit: None,
            logical_operation_id: None,
        }
    }

    /// Override the connection's round limit for this operation.
    pub fn with_round_limit(mut self, limit: u32) -> Self {
        self.round_limit = Some(limit);
        self
    }

    /// Use this logical operation id instead of a fresh ULID.
    pub fn with_logical_operation_id(mut self, id: impl Into<String>) -> Self {
        self.logical_operation_id = Some(id.into());
        self
    }

    /// Tool, prompt or resource.
    pub fn kind(&self) -> OperationKind {
        self.kind
    }

    /// Tool or prompt name, or resource URI.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments (`None` for resources).
    pub fn arguments(&self) -> Option<&Map<String, Value>> {
        self.arguments.as_ref()
    }
}

/// Continue a 2026-07-28 operation from a stored round (its `requestState` and the
/// answers), on any connection to the same server: the retry is sent as a new
/// logical-operation record whose first attempt carries the answers.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ResumeRequest {
    pub(super) operation: OperationRequest,
    pub(super) responses: ResponseMap,
    pub(super) request_state: Option<String>,
    pub(super) completed_rounds: u32,
}

impl ResumeRequest {
    /// Retry `operation` (same name and arguments as the original) with `responses`.
    pub fn new(operation: OperationRequest, responses: ResponseMap) -> Self {
        Self {
            operation,
            responses,
            request_state: None,
            completed_rounds: 0,
        }
    }

    /// The stored `requestState`, echoed verbatim (default: none).
    pub fn with_request_state(mut self, request_state: impl Into<String>) -> Self {
        self.request_state = Some(request_state.into());
        self
    }

    /// Rounds already answered, counted against the round limit (default 0).
    pub fn with_completed_rounds(mut self, rounds: u32) -> Self {
        self.completed_rounds = rounds;
        self
    }
}

/// Where an operation stands after a step.
#[derive(Debug)]
#[must_use]
#[expect(
    clippy::exhaustive_enums,
    reason = "a step either completes or asks for input; callers match both"
)]
pub enum OperationProgress {
    /// The server returned the final result.
    Complete(CompletedOperation),
    /// The server needs input; answer the round to continue.
    InputRequired(InputRound),
}

impl OperationProgress {
    /// The completed operation, or `None` when input is required.
    pub fn complete(self) -> Option<CompletedOperation> {
        match self {
            Self::Complete(done) => Some(done),
            Self::InputRequired(_) => None,
        }
    }

    /// The input round, or `None` when complete.
    pub fn input_round(self) -> Option<InputRound> {
        match self {
            Self::InputRequired(round) => Some(round),
            Self::Complete(_) => None,
        }
    }
}

/// A finished operation: the result JSON and the record of its attempts.
#[derive(Debug, Clone)]
pub struct CompletedOperation {
    pub(super) result: Value,
    pub(super) is_error: bool,
    pub(super) record: Box<LogicalOperation>,
}

impl CompletedOperation {
    /// The result object as the server sent it (`CallToolResult`,
    /// `GetPromptResult` or `ReadResourceResult` JSON).
    pub fn result(&self) -> &Value {
        &self.result
    }

    /// The tool's `isError` flag (false for prompts and resources).
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The record of the logical operation.
    pub fn record(&self) -> &LogicalOperation {
        &self.record
    }

    /// The concatenated `text` of every text content block (tool `content`,
    /// prompt `messages[].content`, resource `contents[]`).
    pub fn text(&self) -> String {
        let mut texts = Vec::new();
        collect_text(&self.result, &mut texts);
        texts.join("\n")
    }

    /// Split into the result JSON and the record.
    pub fn into_parts(self) -> (Value, LogicalOperation) {
        (self.result, *self.record)
    }
}

fn collect_text(value: &Value, out: &mut Vec<String>) {
    let items = ["content", "messages", "contents"]
        .iter()
        .filter_map(|key| value.get(*key))
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        });
    for item in items {
        if let Some(Value::String(text)) = item.get("text") {
            out.push(text.clone());
        } else if item.get("content").is_some() {
            collect_text(item, out);
        }
    }
}

/// An input round: the server asked for input and waits for the keyed answers.
///
/// Answer it with [`InputRound::respond`] (or [`InputRound::decline`] /
/// [`InputRound::cancel`]); dropping it abandons the operation (legacy: the
/// pending `elicitation/create` is answered `cancel` and the in-flight request
/// cancelled).
#[derive(Debug)]
pub struct InputRound {
    pub(super) driver: Box<Driver>,
    pub(super) requests: BTreeMap<String, ElicitationRequest>,
    /// The request keys, once [`InputRound::hand_over_requests`] moved the requests out.
    pub(super) handed_over: Option<BTreeSet<String>>,
    pub(super) request_state: Option<String>,
    pub(super) attempt: u32,
    pub(super) round_index: u32,
    pub(super) legacy: Option<LegacyPending>,
}

/// The live half of a legacy round: where the answer goes.
#[derive(Debug)]
pub(super) struct LegacyPending {
    pub(super) reply: oneshot::Sender<Value>,
    pub(super) withdrawn: CancellationToken,
}

impl InputRound {
    /// The keyed requests (legacy era: the single key [`LEGACY_REQUEST_KEY`]).
    pub fn requests(&self) -> &BTreeMap<String, ElicitationRequest> {
        &self.requests
    }

    /// Moves the requests out for a managed round, which stores them, and keeps only their
    /// keys (what an answer must match): a round that waits for an answer, possibly for
    /// hours, does not hold its requests twice. [`requests`](Self::requests) is empty after.
    pub(crate) fn hand_over_requests(&mut self) -> BTreeMap<String, ElicitationRequest> {
        let requests = std::mem::take(&mut self.requests);
        self.handed_over = Some(requests.keys().cloned().collect());
        requests
    }

    /// The keys an answer must match, whether or not the requests were handed over.
    pub(crate) fn request_keys(&self) -> BTreeSet<&String> {
        match &self.handed_over {
            Some(keys) => keys.iter().collect(),
            None => self.requests.keys().collect(),
        }
    }

    /// The opaque `requestState` (2026-07-28), verbatim.
    pub fn request_state(&self) -> Option<&str> {
        self.request_state.as_deref()
    }

    /// The logical operation id.
    pub fn logical_operation_id(&self) -> &str {
        &self.driver.record.logical_operation_id
    }

    /// The 1-based wire attempt that produced this round.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The 1-based round index within the operation.
    pub fn round_index(&self) -> u32 {
        self.round_index
    }

    /// The operation's round limit.
    pub fn round_limit(&self) -> u32 {
        self.driver.round_limit
    }

    /// The era of the connection.
    pub fn era(&self) -> ProtocolEra {
        self.driver.shared.era
    }

    /// Server binding name.
    pub fn server(&self) -> &str {
        &self.driver.origin.server
    }

    /// Tool, prompt or resource.
    pub fn operation_kind(&self) -> OperationKind {
        self.driver.origin.kind
    }

    /// Tool or prompt name, or resource URI.
    pub fn operation_name(&self) -> &str {
        &self.driver.origin.name
    }

    /// The operation's record so far.
    pub fn record(&self) -> &LogicalOperation {
        &self.driver.record
    }

    /// Whether the server withdrew the request (legacy `notifications/cancelled`).
    pub fn is_withdrawn(&self) -> bool {
        self.legacy
            .as_ref()
            .is_some_and(|p| p.withdrawn.is_cancelled())
    }

    /// Resolves when the server withdraws the round (legacy era only; never
    /// resolves in 2026-07-28, where the server cannot withdraw a round).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn withdrawn(&self) {
        match &self.legacy {
            Some(pending) => pending.withdrawn.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// Check that `responses` answers exactly this round's keys.
    ///
    /// # Errors
    /// `managed_input_invalid` naming the missing and unexpected keys.
    pub fn check_responses(&self, responses: &ResponseMap) -> Result<()> {
        let expected = self.request_keys();
        let given: BTreeSet<&String> = responses.keys().collect();
        if expected == given {
            return Ok(());
        }
        let missing: Vec<&String> = expected.difference(&given).copied().collect();
        let unexpected: Vec<&String> = given.difference(&expected).copied().collect();
        Err(Error::managed_input_validation(format!(
            "responses must answer exactly the round's request keys (missing {missing:?}, unexpected {unexpected:?})"
        ))
        .with_detail("missing", serde_json::json!(missing))
        .with_detail("unexpected", serde_json::json!(unexpected)))
    }

    /// Answer the round and continue the operation.
    ///
    /// 2026-07-28: retries with `inputResponses` and the echoed `requestState`.
    /// Legacy: sends the answer as the `elicitation/create` response (not sent if
    /// the server withdrew the request) and keeps waiting on the original request.
    ///
    /// # Errors
    /// `managed_input_invalid` when the keys do not match (the operation is then
    /// abandoned), otherwise as [`McpConnection::start`](super::McpConnection::start).
    ///
    /// # Cancel safety
    /// Dropping the future abandons the operation.
    pub async fn respond(mut self, responses: ResponseMap) -> Result<OperationProgress> {
        self.check_responses(&responses)?;
        match self.legacy.take() {
            Some(pending) => {
                let withdrawn = pending.withdrawn.is_cancelled();
                self.driver.note_legacy_answer(&responses, withdrawn);
                if !withdrawn {
                    let answer = responses
                        .get(LEGACY_REQUEST_KEY)
                        .map(wire::response_json)
                        .unwrap_or_else(|| serde_json::json!({"action": "cancel"}));
                    let _ = pending.reply.send(answer);
                }
                let driver = *self.driver;
                driver.legacy_drive().await
            }
            None => {
                let state = self.request_state.take();
                let driver = *self.driver;
                driver.modern_attempts(Some(responses), state).await
            }
        }
    }

    /// Answer every request of the round with `decline` and continue.
    ///
    /// # Errors
    /// As [`InputRound::respond`].
    pub async fn decline(self) -> Result<OperationProgress> {
        let responses = self
            .request_keys()
            .into_iter()
            .map(|k| (k.clone(), ElicitationResponse::decline()))
            .collect();
        self.respond(responses).await
    }

    /// Answer every request of the round with `cancel` and continue.
    ///
    /// # Errors
    /// As [`InputRound::respond`].
    pub async fn cancel(self) -> Result<OperationProgress> {
        let responses = self
            .request_keys()
            .into_iter()
            .map(|k| (k.clone(), ElicitationResponse::cancel()))
            .collect();
        self.respond(responses).await
    }
}
