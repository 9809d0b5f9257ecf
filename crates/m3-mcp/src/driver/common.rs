//! What the drivers of both eras share: the [`Driver`] of one logical operation (its
//! record, attempts and errors, the wire request and how it is sent and its answer read),
//! and the [`Step`] it leaves its operation at.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{ElicitationRequest, Error, OperationKind, ResponseMap, Result};
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetPromptRequest,
    GetPromptRequestParams, InputResponses, ReadResourceRequest, ReadResourceRequestParams,
    RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};

use super::super::completed::CompletedOperation;
use super::super::fault::wait_for_fault;
use super::super::record::{AttemptOutcome, LogicalOperation, OperationAttempt};
use super::super::request::OperationRequest;
use super::super::shared::Shared;
use super::super::trace_context::TraceContext;
use super::super::wire::{self, Answer, Origin, Secrets};
use super::legacy_call::{LegacyCall, LegacyPending};
use super::task_call::TaskCall;

/// Where a [`Driver`] left its operation: done, or waiting on a round. `operation` turns
/// it into the public [`OperationProgress`](crate::OperationProgress) (an open round there
/// owns its driver, so the driver does not name it).
#[derive(Debug)]
pub(crate) enum Step {
    /// The server returned the final result.
    Complete(CompletedOperation),
    /// The server asked for input: the driver to continue with and the round it opened.
    Input(Box<Driver>, RoundOpened),
}

/// A round the server opened, as the driver saw it.
#[derive(Debug)]
pub(crate) struct RoundOpened {
    pub(crate) requests: BTreeMap<String, ElicitationRequest>,
    pub(crate) request_state: Option<String>,
    pub(crate) attempt: u32,
    pub(crate) round_index: u32,
    pub(crate) legacy: Option<LegacyPending>,
}

/// Drives one logical operation.
#[derive(Debug)]
pub(crate) struct Driver {
    pub(crate) shared: Arc<Shared>,
    pub(crate) origin: Origin,
    arguments: Option<Map<String, Value>>,
    pub(crate) round_limit: u32,
    pub(super) state_only_retries: u32,
    pub(crate) record: LogicalOperation,
    pub(super) legacy: Option<LegacyCall>,
    /// The task a `tools/call` was answered with (tasks extension), while it runs.
    pub(super) task: Option<TaskCall>,
    pub(super) waited: Duration,
    /// Sent in the `_meta` of every request of the operation.
    trace_context: Option<TraceContext>,
}

pub(super) fn new_driver(shared: Arc<Shared>, request: OperationRequest) -> Result<Driver> {
    if request.kind == OperationKind::Tool
        && let Some(selection) = &shared.options.tool_selection
        && !selection.allows(&shared.server, &request.name)
    {
        return Err(Error::model_validation(format!(
            "tool '{}:{}' is not in the tool selection; the call was refused and not sent",
            shared.server, request.name
        ))
        .with_detail("server", shared.server.clone())
        .with_detail("tool", request.name.clone()));
    }
    let origin = Origin {
        server: shared.server.clone(),
        kind: request.kind,
        name: request.name.clone(),
        secrets: Secrets::new(&shared.secrets),
        limits: shared.options.round_limits,
    };
    let record = LogicalOperation {
        logical_operation_id: request
            .logical_operation_id
            .clone()
            .unwrap_or_else(m3_types::new_id),
        server: shared.server.clone(),
        operation_kind: request.kind,
        operation_name: request.name.clone(),
        arguments: request.arguments.clone(),
        era: shared.era,
        protocol_version: shared.protocol_version.clone(),
        started_at: shared.options.clock.now(),
        finished_at: None,
        rounds: 0,
        attempts: Vec::new(),
        error: None,
    };
    let round_limit = request.round_limit.unwrap_or(shared.options.round_limit);
    Ok(Driver {
        shared,
        origin,
        arguments: request.arguments,
        round_limit,
        state_only_retries: 0,
        record,
        legacy: None,
        task: None,
        waited: Duration::ZERO,
        trace_context: request.trace_context,
    })
}

impl Driver {
    pub(super) fn attempt_number(&self) -> u32 {
        u32::try_from(self.record.attempts.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    pub(super) fn begin_attempt(
        &mut self,
        request_state: Option<String>,
        input_responses: Option<ResponseMap>,
    ) -> u32 {
        let attempt = self.attempt_number();
        self.record.attempts.push(OperationAttempt {
            attempt,
            started_at: self.shared.options.clock.now(),
            finished_at: None,
            duration_ms: None,
            request_state,
            input_responses,
            input_required: false,
            rounds: Vec::new(),
            task_id: None,
            outcome: AttemptOutcome::Pending,
        });
        self.shared.publish(&self.record);
        attempt
    }

    pub(super) fn end_attempt(&mut self, outcome: AttemptOutcome, waited: Duration) {
        if let Some(last) = self.record.attempts.last_mut() {
            last.finished_at = Some(self.shared.options.clock.now());
            last.duration_ms = Some(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
            if matches!(outcome, AttemptOutcome::InputRequired { .. }) {
                last.input_required = true;
            }
            last.outcome = outcome;
        }
        if !matches!(
            self.record.attempts.last().map(|a| &a.outcome),
            Some(AttemptOutcome::InputRequired { .. })
        ) {
            self.record.finished_at = Some(self.shared.options.clock.now());
        }
        self.shared.publish(&self.record);
    }

    /// Record `error` as the operation's end and tag it with the operation ids.
    pub(super) fn fail(&mut self, error: Error, waited: Duration) -> Error {
        let error = error
            .with_detail(
                "logical_operation_id",
                self.record.logical_operation_id.clone(),
            )
            .with_detail("attempt", self.attempt_number().saturating_sub(1));
        let info = error.to_error_info();
        // An attempt that already has an answer (an `input_required` that led to the
        // round limit) keeps its outcome; a pending one ends with the error.
        if matches!(
            self.record.attempts.last().map(|a| &a.outcome),
            Some(AttemptOutcome::Pending)
        ) {
            self.end_attempt(
                AttemptOutcome::Error {
                    error: info.clone(),
                },
                waited,
            );
        }
        self.record.error = Some(info);
        self.record.finished_at = Some(self.shared.options.clock.now());
        self.shared.publish(&self.record);
        error
    }

    pub(super) fn complete(&mut self, result: Value, is_error: bool, waited: Duration) -> Step {
        self.end_attempt(
            AttemptOutcome::Complete {
                result: result.clone(),
                is_error,
            },
            waited,
        );
        Step::Complete(CompletedOperation {
            result,
            is_error,
            record: Box::new(self.record.clone()),
        })
    }

    pub(super) fn round_limit_error(&self) -> Error {
        Error::round_limit(format!(
            "MCP server '{}' asked for more than {} input rounds for {} '{}'",
            self.origin.server,
            self.round_limit,
            self.origin.kind.as_str(),
            self.origin.name
        ))
        .with_detail("round_limit", self.round_limit)
        .with_detail("server", self.origin.server.clone())
    }

    pub(super) fn wire_request(
        &self,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> ClientRequest {
        match self.origin.kind {
            OperationKind::Tool => {
                let mut params = CallToolRequestParams::new(self.origin.name.clone());
                params.arguments = self.arguments.clone();
                params.input_responses = input_responses;
                params.request_state = request_state;
                ClientRequest::CallToolRequest(CallToolRequest::new(params))
            }
            OperationKind::Prompt => {
                let mut params = GetPromptRequestParams::new(self.origin.name.clone());
                params.arguments = self.arguments.clone();
                params.input_responses = input_responses;
                params.request_state = request_state;
                ClientRequest::GetPromptRequest(GetPromptRequest::new(params))
            }
            OperationKind::Resource => {
                let mut params = ReadResourceRequestParams::new(self.origin.name.clone());
                params.input_responses = input_responses;
                params.request_state = request_state;
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params))
            }
        }
    }

    /// Map a failed/closed response channel, preferring the connection fault.
    pub(super) async fn closed_error(&self, error: Option<ServiceError>) -> Error {
        // The reader may record the cause (exit status, bad frame) a moment later.
        let mut faults = self.shared.faults.clone();
        if let Ok(fault) =
            tokio::time::timeout(Duration::from_millis(500), wait_for_fault(&mut faults)).await
        {
            return fault.to_error(&self.shared.server);
        }
        match error {
            Some(error) => wire::service_error(error, &self.origin),
            None => Error::transport(format!("MCP connection to '{}' closed", self.origin.server))
                .with_detail("server", self.origin.server.clone()),
        }
    }

    pub(super) async fn send(
        &self,
        request: ClientRequest,
    ) -> Result<rmcp::service::RequestHandle<rmcp::service::RoleClient>> {
        if let Some(error) = self.shared.fault_error() {
            return Err(error);
        }
        let mut options = PeerRequestOptions::no_options();
        if let Some(context) = &self.trace_context {
            options = options.with_meta(context.request_meta());
        }
        match self
            .shared
            .peer
            .send_request_with_option(request, options)
            .await
        {
            Ok(handle) => Ok(handle),
            Err(error) => Err(self.closed_error(Some(error)).await),
        }
    }

    pub(super) fn timeout_error(&self, timeout: Duration) -> Error {
        Error::timeout(format!(
            "MCP server '{}' did not answer {} '{}' within {} ms",
            self.origin.server,
            wire::method(self.origin.kind),
            self.origin.name,
            timeout.as_millis()
        ))
        .with_detail("server", self.origin.server.clone())
        .with_detail(
            "timeout_ms",
            u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        )
    }

    /// Classify the answer to `request_id`, from the raw JSON when the reader
    /// kept it (an `input_required` the typed model would change).
    pub(super) fn classify(&self, result: ServerResult, request_id: &RequestId) -> Result<Answer> {
        let value = self.result_json(result, request_id)?;
        wire::classify(value, &self.origin)
    }

    /// The JSON of the answer to `request_id`: the raw reply when the reader kept it,
    /// else rmcp's typed result re-serialized.
    pub(super) fn result_json(
        &self,
        result: ServerResult,
        request_id: &RequestId,
    ) -> Result<Value> {
        if let Some(raw) = self.shared.raw.take_result(request_id) {
            return Ok(raw);
        }
        match result {
            ServerResult::CustomResult(custom) => Ok(custom.0),
            ServerResult::EmptyResult(_) if self.origin.kind == OperationKind::Tool => {
                Ok(serde_json::json!({"content": []}))
            }
            other => serde_json::to_value(&other).map_err(|error| {
                Error::protocol(format!(
                    "cannot read the result from '{}': {error}",
                    self.origin.server
                ))
            }),
        }
    }
}
