//! The typed trace stored in an [`ExecutionResult`].

use m3_types::{ActivityHealth, Error, ExecutionResult, OperationKind, Result};
use serde::{Deserialize, Serialize};

use crate::mcp::{AttemptOutcome, LogicalOperation};

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
}
