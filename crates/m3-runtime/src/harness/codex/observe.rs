//! What M3 sees of the MCP wire between Codex and each server (through the relay):
//! one [`LogicalOperation`] per operation with every wire attempt, and the input
//! rounds the servers asked for.
//!
//! A 2026-07-28 round is one `input_required` result (all its keys together) and is
//! confirmed when the keyed retry carrying its `requestState` gets its answer. A
//! legacy round is one `elicitation/create` (key `"elicitation"`) and is confirmed
//! when Codex's response to it crosses the wire.

use std::collections::BTreeMap;
use std::time::Instant;

use m3_types::{ElicitationRequest, ElicitationResponse, Error, OperationKind, ResponseMap};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::mcp::wire::{self, Answer, Origin};
use crate::mcp::{AttemptOutcome, LogicalOperation, OperationAttempt, ProtocolEra, RoundExchange};
use crate::relay::{Direction, Observation};

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
#[derive(Debug, Default)]
pub(super) struct WireTracker {
    connections: BTreeMap<String, Connection>,
    pub(super) operations: Vec<LogicalOperation>,
    pub(super) rounds: Vec<ObservedRound>,
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl WireTracker {
    /// Takes one observed frame; returns what it meant for the rounds.
    pub(super) fn observe(&mut self, frame: &Observation) -> Vec<WireEvent> {
        let server = frame.connection_id.clone();
        let Value::Object(payload) = &frame.payload else {
            return Vec::new();
        };
        let method = payload.get("method").and_then(Value::as_str);
        let id = payload.get("id");
        match (frame.direction, method, id) {
            (Direction::ClientToServer, Some(method), Some(id)) => {
                self.client_request(&server, method, id, payload);
                Vec::new()
            }
            (Direction::ClientToServer, None, Some(id)) => {
                self.client_response(&server, id, payload)
            }
            (Direction::ServerToClient, None, Some(id)) => {
                self.server_response(&server, id, payload)
            }
            (Direction::ServerToClient, Some("elicitation/create"), Some(id)) => {
                self.legacy_elicitation(&server, id, payload)
            }
            _ => Vec::new(),
        }
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

    fn client_request(
        &mut self,
        server: &str,
        method: &str,
        id: &Value,
        payload: &Map<String, Value>,
    ) {
        let params = payload
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let kind = match method {
            "initialize" => {
                let version = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let connection = self.connection(server);
                connection.era = ProtocolEra::Legacy;
                connection.protocol_version = version.to_owned();
                return;
            }
            "server/discover" => {
                let connection = self.connection(server);
                connection.era = ProtocolEra::Modern;
                connection.protocol_version = "2026-07-28".into();
                return;
            }
            "tools/call" => OperationKind::Tool,
            "prompts/get" => OperationKind::Prompt,
            "resources/read" => OperationKind::Resource,
            _ => return,
        };
        let name_key = if kind == OperationKind::Resource {
            "uri"
        } else {
            "name"
        };
        let name = params
            .get(name_key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let arguments = params.get("arguments").and_then(Value::as_object).cloned();
        let request_state = params
            .get("requestState")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let input_responses = params
            .get("inputResponses")
            .and_then(|v| serde_json::from_value::<ResponseMap>(v.clone()).ok());
        let now = OffsetDateTime::now_utc();
        let retry_of = request_state.as_ref().and_then(|state| {
            self.operations.iter().rposition(|op| {
                op.server == server
                    && op.operation_name == name
                    && !op.is_finished()
                    && matches!(op.last_attempt().map(|a| &a.outcome),
                        Some(AttemptOutcome::InputRequired { request_state: Some(s), .. }) if s == state)
            })
        });
        let operation = match retry_of {
            Some(index) => index,
            None => {
                let connection = self.connection(server);
                let (era, protocol_version) = (connection.era, connection.protocol_version.clone());
                self.operations.push(LogicalOperation {
                    logical_operation_id: m3_types::new_id(),
                    server: server.to_owned(),
                    operation_kind: kind,
                    operation_name: name,
                    arguments: if kind == OperationKind::Resource {
                        None
                    } else {
                        Some(arguments.unwrap_or_default())
                    },
                    era,
                    protocol_version,
                    started_at: now,
                    finished_at: None,
                    rounds: 0,
                    attempts: Vec::new(),
                    error: None,
                });
                self.operations.len() - 1
            }
        };
        let Some(op) = self.operations.get_mut(operation) else {
            return;
        };
        op.attempts.push(OperationAttempt {
            attempt: u32::try_from(op.attempts.len() + 1).unwrap_or(u32::MAX),
            started_at: now,
            finished_at: None,
            duration_ms: None,
            request_state: request_state.clone(),
            input_responses,
            input_required: false,
            rounds: Vec::new(),
            outcome: AttemptOutcome::Pending,
        });
        let attempt = op.attempts.len() - 1;
        if retry_of.is_some()
            && let Some(round) = self.rounds.iter_mut().rev().find(|r| {
                r.operation == operation
                    && r.stage == Stage::Delivered
                    && r.request_state == request_state
            })
        {
            round.retry_id = Some(id_key(id));
        }
        self.connection(server)
            .in_flight
            .insert(id_key(id), (operation, attempt));
    }

    fn server_response(
        &mut self,
        server: &str,
        id: &Value,
        payload: &Map<String, Value>,
    ) -> Vec<WireEvent> {
        let key = id_key(id);
        let Some((operation, attempt)) = self.connection(server).in_flight.remove(&key) else {
            return Vec::new();
        };
        let Some(op) = self.operations.get_mut(operation) else {
            return Vec::new();
        };
        let origin = origin_of(server, op);
        let now = OffsetDateTime::now_utc();
        let answer = match (payload.get("error"), payload.get("result")) {
            (Some(error), _) => Err(rpc_error(server, error)),
            (None, Some(result)) => wire::classify(result.clone(), &origin),
            (None, None) => Err(Error::protocol("MCP response has neither result nor error")),
        };
        let mut new_requests = None;
        let (outcome, complete) = match answer {
            Ok(Answer::Complete { result, is_error }) => {
                (AttemptOutcome::Complete { result, is_error }, true)
            }
            Ok(Answer::InputRequired {
                requests,
                request_state,
            }) => {
                let outcome = AttemptOutcome::InputRequired {
                    request_keys: requests.keys().cloned().collect(),
                    request_state: request_state.clone(),
                };
                if !requests.is_empty() {
                    new_requests = Some((requests, request_state));
                }
                (outcome, false)
            }
            Err(error) => (
                AttemptOutcome::Error {
                    error: error.to_error_info(),
                },
                true,
            ),
        };
        let failed = match &outcome {
            AttemptOutcome::Error { error } => Some(Error::protocol(error.message.clone())),
            _ => None,
        };
        if let Some(a) = op.attempts.get_mut(attempt) {
            a.finished_at = Some(now);
            a.duration_ms = u64::try_from((now - a.started_at).whole_milliseconds()).ok();
            a.input_required = matches!(outcome, AttemptOutcome::InputRequired { .. });
            a.outcome = outcome;
        }
        if complete {
            op.finished_at = Some(now);
            if let Some(AttemptOutcome::Error { error }) =
                op.attempts.get(attempt).map(|a| &a.outcome)
            {
                op.error = Some(error.clone());
            }
        }
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
                    operation_complete: complete,
                },
            });
        }
        if let Some((requests, request_state)) = new_requests {
            if let Some(op) = self.operations.get_mut(operation) {
                op.rounds += 1;
            }
            events.push(self.push_round(server, operation, requests, request_state));
        }
        events
    }

    fn legacy_elicitation(
        &mut self,
        server: &str,
        id: &Value,
        payload: &Map<String, Value>,
    ) -> Vec<WireEvent> {
        let Some(&(operation, attempt)) = self.connection(server).in_flight.values().last() else {
            tracing::warn!(server, "elicitation/create outside any operation; ignored");
            return Vec::new();
        };
        let Some(op) = self.operations.get_mut(operation) else {
            return Vec::new();
        };
        let origin = origin_of(server, op);
        let params = payload.get("params").cloned().unwrap_or(Value::Null);
        let request = match wire::elicitation_request("elicitation", &params, &origin) {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(server, %error, "malformed elicitation/create; ignored");
                return Vec::new();
            }
        };
        op.rounds += 1;
        let round_index = op.rounds;
        if let Some(a) = op.attempts.get_mut(attempt) {
            a.rounds.push(RoundExchange {
                round_index,
                request_keys: vec!["elicitation".into()],
                responses: None,
                withdrawn: false,
            });
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
        payload: &Map<String, Value>,
    ) -> Vec<WireEvent> {
        let Some(round) = self.connection(server).legacy.remove(&id_key(id)) else {
            return Vec::new();
        };
        let response = payload
            .get("result")
            .and_then(|r| serde_json::from_value::<ElicitationResponse>(r.clone()).ok());
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

fn origin_of(server: &str, op: &LogicalOperation) -> Origin {
    Origin {
        server: server.to_owned(),
        kind: op.operation_kind,
        name: op.operation_name.clone(),
    }
}

fn rpc_error(server: &str, error: &Value) -> Error {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error");
    Error::protocol(format!(
        "MCP server '{server}' answered with an error: {message}"
    ))
    .with_detail("server", server)
    .with_detail("rpc_error", error.clone())
}
