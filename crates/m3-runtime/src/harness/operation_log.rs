//! [`OperationLog`]: the operations of one execution and the agent's answer so far, shared
//! by its session and its worker, so that they survive a cancelled run and a release (a
//! handover, parking) can record them.

use std::sync::{Arc, Mutex, PoisonError};

use m3_mcp::{LogicalOperation, McpConnection};
use serde_json::Value;

use crate::trace::MarkedRound;

/// Operation records, shared with the worker so they survive a cancelled run.
#[derive(Debug, Default)]
pub(crate) struct OperationLog {
    finished: Mutex<Vec<LogicalOperation>>,
    in_flight: Mutex<Option<(Arc<McpConnection>, String)>>,
    /// Operations a harness observed itself (Codex is the MCP client).
    external: Mutex<Vec<LogicalOperation>>,
    token_usage: Mutex<Option<Value>>,
    /// Resolved `${NAME}` header values of the session's HTTP bindings: redacted
    /// wherever they would be persisted.
    secrets: Mutex<Vec<String>>,
    /// Delivered rounds with answers their schema marks secret: redacted in the trace.
    marked: Mutex<Vec<MarkedRound>>,
    /// The agent's answer so far; kept here so a handover can record it.
    transcript: Mutex<Vec<String>>,
    /// The index of the script step in progress (scripted harness): where a successor
    /// worker goes on after a handover.
    step: Mutex<Option<usize>>,
    /// After a handover: the operation the predecessor left waiting, and the id of the
    /// operation that continues it here (their attempts make one record).
    interrupted: Mutex<Option<LogicalOperation>>,
    continuation: Mutex<Option<String>>,
}

impl OperationLog {
    /// Adds text to the agent's answer.
    pub(crate) fn say(&self, text: String) {
        lock(&self.transcript).push(text);
    }

    /// Records that operation `logical_operation_id` of `connection` is in flight.
    pub(crate) fn start(&self, connection: &Arc<McpConnection>, logical_operation_id: &str) {
        *lock(&self.in_flight) = Some((Arc::clone(connection), logical_operation_id.to_owned()));
    }

    /// The agent's answer so far.
    pub(crate) fn transcript(&self) -> Vec<String> {
        lock(&self.transcript).clone()
    }

    /// Records that script step `index` starts.
    pub(crate) fn begin_step(&self, index: usize) {
        *lock(&self.step) = Some(index);
    }

    /// The script step in progress, if the harness reports steps.
    pub(crate) fn step(&self) -> Option<usize> {
        *lock(&self.step)
    }

    /// Starts from what an earlier worker recorded before a handover: its (redacted)
    /// operations and answer text.
    /// `interrupted` names the operation whose round was handed over: the operation that
    /// continues it ([`continue_as`](Self::continue_as)) is recorded as the same one.
    pub(crate) fn restore(
        &self,
        operations: Vec<LogicalOperation>,
        transcript: Vec<String>,
        interrupted: &str,
    ) {
        let (left, done): (Vec<_>, Vec<_>) = operations
            .into_iter()
            .partition(|op| op.logical_operation_id == interrupted);
        lock(&self.finished).extend(done);
        *lock(&self.interrupted) = left.into_iter().next();
        lock(&self.transcript).extend(transcript);
    }

    /// Records that operation `logical_operation_id` continues the interrupted one.
    pub(crate) fn continue_as(&self, logical_operation_id: &str) {
        *lock(&self.continuation) = Some(logical_operation_id.to_owned());
    }

    /// `record`, preceded by the interrupted operation's attempts when it continues it.
    fn merged(&self, record: LogicalOperation) -> LogicalOperation {
        if lock(&self.continuation).as_deref() != Some(record.logical_operation_id.as_str()) {
            return record;
        }
        let Some(mut merged) = lock(&self.interrupted).clone() else {
            return record;
        };
        merged.attempts.extend(record.attempts);
        merged.rounds = record.rounds;
        merged.finished_at = record.finished_at;
        merged.error = record.error;
        merged
    }

    /// Registers values to redact from the trace, the result and the error.
    pub(crate) fn add_secrets(&self, values: &[String]) {
        let mut secrets = self.secrets.lock().unwrap_or_else(PoisonError::into_inner);
        for value in values {
            if !value.is_empty() && !secrets.contains(value) {
                secrets.push(value.clone());
            }
        }
    }

    /// Registers delivered rounds whose schema marks fields secret.
    pub(crate) fn add_marked_rounds(&self, rounds: Vec<MarkedRound>) {
        self.marked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(rounds);
    }

    /// The rounds registered with [`add_marked_rounds`](Self::add_marked_rounds).
    pub(crate) fn marked_rounds(&self) -> Vec<MarkedRound> {
        self.marked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The values registered with [`add_secrets`](Self::add_secrets).
    pub(crate) fn secrets(&self) -> Vec<String> {
        self.secrets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the operations (and token usage) a harness observed itself.
    #[cfg_attr(
        not(feature = "codex"),
        expect(
            dead_code,
            reason = "only a harness that is its own MCP client (codex) uses it"
        )
    )]
    pub(crate) fn set_external(&self, operations: Vec<LogicalOperation>, usage: Option<Value>) {
        *self.external.lock().unwrap_or_else(PoisonError::into_inner) = operations;
        if usage.is_some() {
            *self
                .token_usage
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = usage;
        }
    }

    /// The model's token usage, when the harness reported it.
    pub(crate) fn token_usage(&self) -> Option<Value> {
        self.token_usage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn finish(&self, connection: &McpConnection, logical_operation_id: &str) {
        *self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        if let Some(record) = connection.operation_record(logical_operation_id) {
            let record = self.merged(record);
            if lock(&self.continuation).as_deref() == Some(logical_operation_id) {
                *lock(&self.interrupted) = None;
            }
            self.finished
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(record);
        }
    }

    /// Every recorded operation, including one still in flight.
    pub(crate) fn snapshot(&self) -> Vec<LogicalOperation> {
        let mut all = self
            .finished
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((connection, id)) = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && let Some(record) = connection.operation_record(id)
        {
            all.push(self.merged(record));
        } else if let Some(interrupted) = lock(&self.interrupted).clone() {
            all.push(interrupted);
        }
        all.extend(
            self.external
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        all
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
