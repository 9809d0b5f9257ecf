//! The typed trace stored in an [`ExecutionResult`].

use std::collections::BTreeMap;

use m3_types::redact::{marked_secret_values, redact_marked_responses};
use m3_types::{
    ActivityHealth, ElicitationRequest, Error, ErrorInfo, ExecutionResult, OperationKind,
    PendingElicitationRound, ResponseMap, Result, redact_with, secret_values,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use m3_mcp::{AttemptOutcome, LogicalOperation};

/// What the runtime records in [`ExecutionResult::trace`]: the prompt, the
/// agent's final text and one [`LogicalOperation`] per MCP operation, each with
/// all its wire attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionTrace {
    /// The harness that ran (`"scripted"`).
    pub harness: String,
    /// The user message.
    pub prompt: String,
    /// The agent's final text (`None` when the turn did not finish).
    pub final_text: Option<String>,
    /// Every logical operation, in start order.
    pub operations: Vec<LogicalOperation>,
    /// The model's token usage as the harness reported it (Codex's
    /// `thread/tokenUsage/updated`), if any.
    #[serde(default)]
    pub token_usage: Option<serde_json::Value>,
}

impl ExecutionTrace {
    /// Reads the trace of a result written by this runtime.
    ///
    /// # Errors
    /// `protocol_error` when the result has no trace or a trace of another shape.
    pub fn of(result: &ExecutionResult) -> Result<Self> {
        let trace = result
            .trace
            .clone()
            .ok_or_else(|| Error::protocol("execution result has no trace"))?;
        serde_json::from_value(trace)
            .map_err(|e| Error::protocol("execution trace has an unexpected shape").with_source(e))
    }

    /// The logical tool calls.
    pub fn tool_calls(&self) -> impl Iterator<Item = &LogicalOperation> {
        self.operations
            .iter()
            .filter(|op| op.operation_kind == OperationKind::Tool)
    }

    /// `no_calls`, `all_succeeded`, `all_failed` or `mixed` over the operations.
    pub fn activity_health(&self) -> ActivityHealth {
        let (mut ok, mut failed) = (0usize, 0usize);
        for op in &self.operations {
            match op.last_attempt().map(|a| &a.outcome) {
                Some(AttemptOutcome::Complete {
                    is_error: false, ..
                }) => ok += 1,
                _ => failed += 1,
            }
        }
        match (ok, failed) {
            (0, 0) => ActivityHealth::NoCalls,
            (_, 0) => ActivityHealth::AllSucceeded,
            (0, _) => ActivityHealth::AllFailed,
            _ => ActivityHealth::Mixed,
        }
    }

    /// The trace as it is persisted (see [`persist_into`](Self::persist_into)), and the
    /// values it redacted.
    ///
    /// # Errors
    /// `protocol_error` when the trace cannot be serialized.
    pub(crate) fn redacted(
        &self,
        extra_secrets: &[String],
        marked: &[MarkedRound],
    ) -> Result<(Value, Vec<String>)> {
        let mut operations = serde_json::to_value(&self.operations)
            .map_err(|e| Error::protocol("trace is not serializable").with_source(e))?;
        let mut found = secret_values(&operations);
        found.extend(marked.iter().flat_map(|round| round.values.iter().cloned()));
        // Longest first, so a secret containing another is replaced whole.
        found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        found.dedup();
        redact_marked_answers(&mut operations, marked);
        let secrets: Vec<String> = found.iter().chain(extra_secrets).cloned().collect();
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let final_text = self
            .final_text
            .as_deref()
            .map(|text| redact_with(&Value::String(text.to_owned()), &refs));
        let mut trace = serde_json::to_value(self)
            .map_err(|e| Error::protocol("trace is not serializable").with_source(e))?;
        // `token_usage` is the harness's counters, not data: it keeps its key names.
        trace["operations"] = redact_with(&operations, &refs);
        trace["final_text"] = final_text.unwrap_or(Value::Null);
        Ok((trace, secrets))
    }

    /// Fill `result`'s trace, turn summary and error as they are persisted: the diagnostic
    /// projection. Values under secret-named keys (an answered `password` in
    /// `input_responses` or a legacy exchange) become `"[REDACTED]"`, and so does every
    /// echo of such a value in other text (a tool result, the final text, the error),
    /// and so does every value of `extra_secrets` (the resolved `${NAME}` header values
    /// of HTTP bindings) wherever it appears. The answers of `marked` rounds also lose the
    /// fields their request's schema marks secret (`format: password`, `writeOnly`), and
    /// their values are replaced wherever they are echoed.
    ///
    /// # Errors
    /// `protocol_error` when the trace cannot be serialized.
    pub(crate) fn persist_into(
        &self,
        result: &mut ExecutionResult,
        error: Option<&Error>,
        extra_secrets: &[String],
        marked: &[MarkedRound],
    ) -> Result<()> {
        let (trace, secrets) = self.redacted(extra_secrets, marked)?;
        result.turns = vec![json!({"prompt": self.prompt, "final_text": trace["final_text"]})];
        result.trace = Some(trace);
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        result.error = error.map(|error| redacted_error(error.to_error_info(), &secrets));
        Ok(())
    }
}

/// A delivered round whose request schema marks some fields secret, as the trace needs it.
#[derive(Debug, Clone)]
pub(crate) struct MarkedRound {
    logical_operation_id: String,
    requests: BTreeMap<String, ElicitationRequest>,
    /// The answer's values in marked fields (long enough to look for in other text).
    values: Vec<String>,
}

impl MarkedRound {
    /// The marked part of `round`'s answer `responses`; `None` when its schemas mark
    /// nothing that was answered.
    pub(crate) fn of(round: &PendingElicitationRound, responses: &ResponseMap) -> Option<Self> {
        let payload = serde_json::to_value(responses).ok()?;
        if redact_marked_responses(&round.requests, &payload) == payload {
            return None;
        }
        Some(Self {
            logical_operation_id: round.logical_operation_id.clone(),
            requests: round.requests.clone(),
            values: marked_secret_values(&round.requests, responses),
        })
    }
}

/// Replaces, in the answers recorded by each operation's attempts (`input_responses`, and
/// the legacy exchanges' `responses`), the fields the schemas of that operation's marked
/// rounds mark secret.
fn redact_marked_answers(operations: &mut Value, marked: &[MarkedRound]) {
    let Some(operations) = operations.as_array_mut() else {
        return;
    };
    for operation in operations {
        let id = operation
            .get("logical_operation_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let rounds: Vec<&MarkedRound> = marked
            .iter()
            .filter(|round| round.logical_operation_id == id)
            .collect();
        let Some(attempts) = operation.get_mut("attempts").and_then(Value::as_array_mut) else {
            continue;
        };
        if rounds.is_empty() {
            continue;
        }
        for attempt in attempts.iter_mut().filter_map(Value::as_object_mut) {
            let mut answers: Vec<&mut Value> = Vec::new();
            for (name, value) in attempt.iter_mut() {
                match (name.as_str(), value) {
                    ("input_responses", answer) => answers.push(answer),
                    ("rounds", Value::Array(exchanges)) => answers.extend(
                        exchanges
                            .iter_mut()
                            .filter_map(|exchange| exchange.get_mut("responses")),
                    ),
                    _ => {}
                }
            }
            for answer in answers.into_iter().filter(|answer| answer.is_object()) {
                for round in &rounds {
                    *answer = redact_marked_responses(&round.requests, answer);
                }
            }
        }
    }
}

/// `info` with every secret in `secrets` replaced (unchanged when nothing matched).
fn redacted_error(info: ErrorInfo, secrets: &[&str]) -> ErrorInfo {
    let Ok(value) = serde_json::to_value(&info) else {
        return info;
    };
    let redacted = redact_with(&value, secrets);
    if redacted == value {
        return info;
    }
    serde_json::from_value(redacted).unwrap_or(info)
}
