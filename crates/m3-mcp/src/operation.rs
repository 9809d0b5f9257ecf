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

use super::completed::CompletedOperation;
use super::driver::{Driver, LegacyPending, Step};
use super::options::ProtocolEra;
use super::record::LogicalOperation;
use super::request::LEGACY_REQUEST_KEY;
use super::wire;

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

impl From<Step> for OperationProgress {
    fn from(step: Step) -> Self {
        match step {
            Step::Complete(done) => Self::Complete(done),
            Step::Input(driver, round) => Self::InputRequired(InputRound {
                driver,
                requests: round.requests,
                handed_over: None,
                request_state: round.request_state,
                attempt: round.attempt,
                round_index: round.round_index,
                legacy: round.legacy,
            }),
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

impl InputRound {
    /// The keyed requests (legacy era: the single key [`LEGACY_REQUEST_KEY`]).
    pub fn requests(&self) -> &BTreeMap<String, ElicitationRequest> {
        &self.requests
    }

    /// Moves the requests out for a managed round, which stores them, and keeps only their
    /// keys (what an answer must match): a round that waits for an answer, possibly for
    /// hours, does not hold its requests twice. [`requests`](Self::requests) is empty after.
    pub fn hand_over_requests(&mut self) -> BTreeMap<String, ElicitationRequest> {
        let requests = std::mem::take(&mut self.requests);
        self.handed_over = Some(requests.keys().cloned().collect());
        requests
    }

    /// The keys an answer must match, whether or not the requests were handed over.
    pub fn request_keys(&self) -> BTreeSet<&String> {
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

    /// Whether the operation can go on from the store alone, on any connection to the
    /// same server ([`McpConnection::resume`](crate::McpConnection::resume)): a 2026-07-28
    /// round outside a task. A legacy round lives in its open request; a task's round in
    /// the task the server keeps for this client.
    pub fn is_resumable(&self) -> bool {
        self.era() == ProtocolEra::Modern && !self.driver.in_task()
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
    /// 2026-07-28: retries with `inputResponses` and the echoed `requestState`; a task's
    /// round (tasks extension) is answered with `tasks/update`, and the task polled on.
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
                driver.legacy_drive().await.map(OperationProgress::from)
            }
            None if self.driver.in_task() => {
                let driver = *self.driver;
                driver
                    .task_update(responses)
                    .await
                    .map(OperationProgress::from)
            }
            None => {
                let state = self.request_state.take();
                let driver = *self.driver;
                driver
                    .modern_attempts(Some(responses), state)
                    .await
                    .map(OperationProgress::from)
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
