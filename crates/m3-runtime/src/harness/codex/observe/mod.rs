//! What M3 sees of the MCP wire between Codex and each server (through the relay):
//! one [`LogicalOperation`] per operation with every wire attempt, and the input
//! rounds the servers asked for.
//!
//! A 2026-07-28 round is one `input_required` result (all its keys together) and is
//! confirmed when the keyed retry carrying its `requestState` gets its answer. A
//! legacy round is one `elicitation/create` (key `"elicitation"`) and is confirmed
//! when Codex's response to it crosses the wire.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

mod frame;

use m3_types::{Clock, ElicitationRequest, ElicitationResponse, Error, OperationKind, ResponseMap};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use frame::{McpFrame, OperationParams, RpcErrorBody};

use crate::relay::{Direction, Observation};
use m3_mcp::wire::{self, Answer, Origin, Secrets};
use m3_mcp::{AttemptOutcome, LogicalOperation, OperationAttempt, ProtocolEra, RoundExchange};

use super::prompts::wire_fingerprint;

/// Where a round is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Waiting for Codex's native prompts of every key.
    Collecting,
    /// Every key has its prompt; the answer is being obtained.
    Answering,
    /// The answers were given to Codex; waiting for them on the wire.
    Delivered,
    /// The answers reached the server (retry answered / legacy response seen).
    Confirmed,
    /// Abandoned (Codex answered on its own, or the round failed).
    Dropped,
}

/// One input round observed on the wire.
#[derive(Debug, Clone)]
pub(super) struct ObservedRound {
    pub(super) server: String,
    pub(super) operation: usize,
    pub(super) requests: BTreeMap<String, ElicitationRequest>,
    pub(super) fingerprints: BTreeMap<String, String>,
    pub(super) request_state: Option<String>,
    retry_id: Option<String>,
    pub(super) prompts: BTreeMap<String, Value>,
    pub(super) stage: Stage,
    pub(super) since: Instant,
}

/// What a frame meant for the rounds.
#[derive(Debug)]
pub(super) enum WireEvent {
    /// A new round (index into [`WireTracker::rounds`]).
    RoundObserved(usize),
    /// A delivered round reached the server; `operation_complete` when the
    /// operation finished with that answer.
    RoundConfirmed {
        round: usize,
        operation_complete: bool,
    },
    /// The retry carrying a delivered round's answers failed.
    RoundRetryFailed { round: usize, error: Error },
    /// Codex answered a round on its own, without a native prompt (for example
    /// a schema it could not parse): nothing was asked of M3.
    AnsweredWithoutPrompt { round: usize, action: String },
}

#[derive(Debug)]
struct Connection {
    era: ProtocolEra,
    protocol_version: String,
    in_flight: BTreeMap<String, (usize, usize)>,
    legacy: BTreeMap<String, usize>,
}

/// The MCP wire as seen through every relay of a session.
#[derive(Debug)]
pub(super) struct WireTracker {
    connections: BTreeMap<String, Connection>,
    pub(super) operations: Vec<LogicalOperation>,
    pub(super) rounds: Vec<ObservedRound>,
    /// The store's clock: operation and attempt times are the store's.
    clock: Arc<dyn Clock>,
    /// Resolved header values no observed request may carry into a round.
    secrets: Secrets,
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// What an attempt's answer meant.
struct Settled {
    outcome: AttemptOutcome,
    /// The operation ended (result or error).
    complete: bool,
    /// A new round to collect prompts for.
    round: Option<(BTreeMap<String, ElicitationRequest>, Option<String>)>,
}

impl WireTracker {
    /// An empty tracker recording times from `clock`.
    pub(super) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            connections: BTreeMap::new(),
            operations: Vec::new(),
            rounds: Vec::new(),
            clock,
            secrets: Secrets::default(),
        }
    }

    /// Refuse observed requests that carry one of `secrets` (the HTTP relays'
    /// resolved header values) instead of storing them.
    pub(super) fn with_secrets(mut self, secrets: &[String]) -> Self {
        self.secrets = Secrets::new(secrets);
        self
    }

    /// Takes one observed frame; returns what it meant for the rounds.
    pub(super) fn observe(&mut self, observed: &Observation) -> Vec<WireEvent> {
        let server = observed.connection_id.clone();
        let Some(frame) = McpFrame::parse(&observed.payload) else {
            return Vec::new();
        };
        match (observed.direction, frame.method.as_deref(), &frame.id) {
            (Direction::ClientToServer, Some(method), Some(id)) => {
                self.client_request(&server, method, id, &frame.params);
                Vec::new()
            }
            (Direction::ClientToServer, None, Some(id)) => {
                self.client_response(&server, id, frame.result)
            }
            (Direction::ServerToClient, None, Some(id)) => {
                let answer = answer_of(&server, frame.result, frame.error);
                self.server_response(&server, id, answer)
            }
            (Direction::ServerToClient, Some(frame::ELICITATION_CREATE), Some(id)) => {
                self.legacy_elicitation(&server, id, &frame.params)
            }
            _ => Vec::new(),
        }
    }

    /// Whether an operation request Codex sent (tool call, prompt, resource read) has not yet
    /// been seen answered. Once Codex ends its turn every such request was answered, since
    /// Codex saw the answers through the relays; a report still missing is in transit.
    pub(super) fn awaits_answers(&self) -> bool {
        self.connections
            .values()
            .any(|connection| !connection.in_flight.is_empty())
    }

    fn connection(&mut self, server: &str) -> &mut Connection {
        self.connections
            .entry(server.to_owned())
            .or_insert_with(|| Connection {
                era: ProtocolEra::Legacy,
                protocol_version: String::new(),
                in_flight: BTreeMap::new(),
                legacy: BTreeMap::new(),
            })
    }

    /// A request from Codex: a handshake sets the connection's era, an operation
    /// request is a new attempt (of a new operation, or the retry of one waiting
    /// for input).
    fn client_request(&mut self, server: &str, method: &str, id: &Value, params: &Value) {
        if method == frame::INITIALIZE {
            let version = frame::params::<frame::InitializeParams>(params).protocol_version;
            let connection = self.connection(server);
            connection.era = ProtocolEra::Legacy;
            connection.protocol_version = version.unwrap_or_default();
            return;
        }
        if method == frame::SERVER_DISCOVER {
            let connection = self.connection(server);
            connection.era = ProtocolEra::Modern;
            connection.protocol_version = ProtocolEra::MODERN_VERSION.to_owned();
            return;
        }
        let Some(kind) = frame::operation_kind(method) else {
            return;
        };
        let params = frame::params::<OperationParams>(params);
        let name = params.operation_name(kind);
        let retry_of = params
            .request_state
            .as_deref()
            .and_then(|state| self.waiting_operation(server, &name, state));
        let now = self.clock.now();
        let operation = match retry_of {
            Some(index) => index,
            None => self.start_operation(server, kind, name, params.arguments.clone(), now),
        };
        let Some(attempt) = self.push_attempt(operation, &params, now) else {
            return;
        };
        if retry_of.is_some()
            && let Some(round) = self.rounds.iter_mut().rev().find(|r| {
                r.operation == operation
                    && r.stage == Stage::Delivered
                    && r.request_state == params.request_state
            })
        {
            round.retry_id = Some(id_key(id));
        }
        self.connection(server)
            .in_flight
            .insert(id_key(id), (operation, attempt));
    }

    /// The unfinished operation of `server` named `name` whose last attempt asked
    /// for input with `request_state`: a request echoing that state retries it.
    fn waiting_operation(&self, server: &str, name: &str, request_state: &str) -> Option<usize> {
        self.operations.iter().rposition(|op| {
            op.server == server
                && op.operation_name == name
                && !op.is_finished()
                && matches!(op.last_attempt().map(|a| &a.outcome),
                    Some(AttemptOutcome::InputRequired { request_state: Some(s), .. }) if s == request_state)
        })
    }

    fn start_operation(
        &mut self,
        server: &str,
        kind: OperationKind,
        name: String,
        arguments: Option<Map<String, Value>>,
        now: OffsetDateTime,
    ) -> usize {
        let connection = self.connection(server);
        let (era, protocol_version) = (connection.era, connection.protocol_version.clone());
        let arguments = if kind == OperationKind::Resource {
            None
        } else {
            Some(arguments.unwrap_or_default())
        };
        self.operations.push(LogicalOperation::started(
            server,
            kind,
            name,
            arguments,
            era,
            protocol_version,
            now,
        ));
        self.operations.len() - 1
    }

    /// Adds a pending attempt to `operation`; returns its index.
    fn push_attempt(
        &mut self,
        operation: usize,
        params: &OperationParams,
        now: OffsetDateTime,
    ) -> Option<usize> {
        let op = self.operations.get_mut(operation)?;
        op.attempts.push(OperationAttempt::pending(
            u32::try_from(op.attempts.len() + 1).unwrap_or(u32::MAX),
            now,
            params.request_state.clone(),
            params.input_responses.clone(),
        ));
        Some(op.attempts.len() - 1)
    }

    /// A server's answer to an attempt: records its outcome, confirms the
    /// delivered round it retried, and opens the round it asks for.
    fn server_response(
        &mut self,
        server: &str,
        id: &Value,
        answer: Result<Value, Error>,
    ) -> Vec<WireEvent> {
        let key = id_key(id);
        let Some((operation, attempt)) = self.connection(server).in_flight.remove(&key) else {
            return Vec::new();
        };
        let now = self.clock.now();
        let Some(op) = self.operations.get_mut(operation) else {
            return Vec::new();
        };
        let settled = settle(
            answer.and_then(|result| wire::classify(result, &origin_of(server, op, &self.secrets))),
        );
        let failed = match &settled.outcome {
            AttemptOutcome::Error { error } => Some(Error::protocol(error.message.clone())),
            _ => None,
        };
        record_outcome(op, attempt, settled.outcome, settled.complete, now);
        let mut events = Vec::new();
        if let Some(round) = self.rounds.iter().position(|r| {
            r.operation == operation
                && r.stage == Stage::Delivered
                && r.retry_id.as_deref() == Some(key.as_str())
        }) {
            self.rounds[round].stage = Stage::Confirmed;
            events.push(match failed {
                Some(error) => WireEvent::RoundRetryFailed { round, error },
                None => WireEvent::RoundConfirmed {
                    round,
                    operation_complete: settled.complete,
                },
            });
        }
        if let Some((requests, request_state)) = settled.round {
            if let Some(op) = self.operations.get_mut(operation) {
                op.rounds += 1;
            }
            events.push(self.push_round(server, operation, requests, request_state));
        }
        events
    }

    fn legacy_elicitation(&mut self, server: &str, id: &Value, params: &Value) -> Vec<WireEvent> {
        let Some(&(operation, attempt)) = self.connection(server).in_flight.values().last() else {
            tracing::warn!(server, "elicitation/create outside any operation; ignored");
            return Vec::new();
        };
        let Some(op) = self.operations.get_mut(operation) else {
            return Vec::new();
        };
        let origin = origin_of(server, op, &self.secrets);
        let request = match wire::elicitation_request("elicitation", params, &origin) {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(server, %error, "malformed elicitation/create; ignored");
                return Vec::new();
            }
        };
        op.rounds += 1;
        let round_index = op.rounds;
        if let Some(a) = op.attempts.get_mut(attempt) {
            a.rounds.push(RoundExchange::asked(
                round_index,
                vec!["elicitation".into()],
            ));
        }
        let requests = BTreeMap::from([("elicitation".to_owned(), request)]);
        let event = self.push_round(server, operation, requests, None);
        let index = self.rounds.len() - 1;
        self.connection(server).legacy.insert(id_key(id), index);
        vec![event]
    }

    fn client_response(
        &mut self,
        server: &str,
        id: &Value,
        result: Option<Value>,
    ) -> Vec<WireEvent> {
        let Some(round) = self.connection(server).legacy.remove(&id_key(id)) else {
            return Vec::new();
        };
        let response = result.and_then(|r| serde_json::from_value::<ElicitationResponse>(r).ok());
        let action = response
            .as_ref()
            .map_or_else(|| "error".to_owned(), |r| r.action.as_str().to_owned());
        let Some(observed) = self.rounds.get_mut(round) else {
            return Vec::new();
        };
        if let Some(op) = self.operations.get_mut(observed.operation)
            && let Some(exchange) = op
                .attempts
                .iter_mut()
                .flat_map(|a| a.rounds.iter_mut())
                .rev()
                .find(|x| x.responses.is_none())
        {
            exchange.responses =
                response.map(|r| ResponseMap::from([("elicitation".to_owned(), r)]));
        }
        match observed.stage {
            Stage::Delivered => {
                observed.stage = Stage::Confirmed;
                vec![WireEvent::RoundConfirmed {
                    round,
                    operation_complete: false,
                }]
            }
            Stage::Collecting => {
                observed.stage = Stage::Dropped;
                vec![WireEvent::AnsweredWithoutPrompt { round, action }]
            }
            _ => Vec::new(),
        }
    }

    fn push_round(
        &mut self,
        server: &str,
        operation: usize,
        requests: BTreeMap<String, ElicitationRequest>,
        request_state: Option<String>,
    ) -> WireEvent {
        let fingerprints = requests
            .iter()
            .map(|(k, r)| (k.clone(), wire_fingerprint(r).unwrap_or_default()))
            .collect();
        self.rounds.push(ObservedRound {
            server: server.to_owned(),
            operation,
            requests,
            fingerprints,
            request_state,
            retry_id: None,
            prompts: BTreeMap::new(),
            stage: Stage::Collecting,
            since: Instant::now(),
        });
        WireEvent::RoundObserved(self.rounds.len() - 1)
    }
}

fn origin_of(server: &str, op: &LogicalOperation, secrets: &Secrets) -> Origin {
    Origin {
        server: server.to_owned(),
        kind: op.operation_kind,
        name: op.operation_name.clone(),
        secrets: secrets.clone(),
        // Codex is the MCP client here: M3 only observes, with the default bounds, so
        // that what it records stays readable.
        limits: m3_types::RoundLimits::new(),
    }
}

/// A response's `error` or `result`, as the answer of an attempt.
fn answer_of(server: &str, result: Option<Value>, error: Option<Value>) -> Result<Value, Error> {
    match (error, result) {
        (Some(error), _) => Err(rpc_error(server, error)),
        (None, Some(result)) => Ok(result),
        (None, None) => Err(Error::protocol("MCP response has neither result nor error")),
    }
}

/// The outcome of a classified answer.
fn settle(answer: Result<Answer, Error>) -> Settled {
    match answer {
        Ok(Answer::Complete { result, is_error }) => Settled {
            outcome: AttemptOutcome::Complete { result, is_error },
            complete: true,
            round: None,
        },
        Ok(Answer::InputRequired {
            requests,
            request_state,
        }) => Settled {
            outcome: AttemptOutcome::InputRequired {
                request_keys: requests.keys().cloned().collect(),
                request_state: request_state.clone(),
            },
            complete: false,
            round: (!requests.is_empty()).then_some((requests, request_state)),
        },
        Err(error) => Settled {
            outcome: AttemptOutcome::Error {
                error: error.to_error_info(),
            },
            complete: true,
            round: None,
        },
    }
}

/// Records `outcome` on the attempt at `now` and, when `complete`, ends the operation.
fn record_outcome(
    op: &mut LogicalOperation,
    attempt: usize,
    outcome: AttemptOutcome,
    complete: bool,
    now: OffsetDateTime,
) {
    if let Some(a) = op.attempts.get_mut(attempt) {
        a.finished_at = Some(now);
        a.duration_ms = u64::try_from((now - a.started_at).whole_milliseconds()).ok();
        a.input_required = matches!(outcome, AttemptOutcome::InputRequired { .. });
        a.outcome = outcome;
    }
    if complete {
        op.finished_at = Some(now);
        if let Some(AttemptOutcome::Error { error }) = op.attempts.get(attempt).map(|a| &a.outcome)
        {
            op.error = Some(error.clone());
        }
    }
}

fn rpc_error(server: &str, error: Value) -> Error {
    let message = frame::params::<RpcErrorBody>(&error)
        .message
        .unwrap_or_else(|| "error".to_owned());
    Error::protocol(format!(
        "MCP server '{server}' answered with an error: {message}"
    ))
    .with_detail("server", server)
    .with_detail("rpc_error", error)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn frame(direction: Direction, sequence: u64, payload: Value) -> Observation {
        Observation {
            connection_id: "shipping".to_owned(),
            sequence,
            direction,
            payload,
        }
    }

    #[test]
    fn a_tool_call_awaits_its_answer_until_the_relay_reports_it() {
        let mut tracker = WireTracker::new(Arc::new(m3_types::SystemClock));
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "book_shipment", "arguments": {"weight_kg": 2}}});
        tracker.observe(&frame(Direction::ClientToServer, 1, call));
        assert!(tracker.awaits_answers());
        let result = json!({"jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"type": "text", "text": "Shipment booked."}]}});
        tracker.observe(&frame(Direction::ServerToClient, 2, result));
        assert!(!tracker.awaits_answers());
        let attempt = tracker.operations[0].last_attempt().unwrap();
        assert!(matches!(
            attempt.outcome,
            AttemptOutcome::Complete {
                is_error: false,
                ..
            }
        ));
    }
}
