//! The engine behind [`InputRound`]: wire attempts, legacy rounds, records.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_types::{Error, OperationKind, ResponseMap, Result};
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    GetPromptRequest, GetPromptRequestParams, InputResponses, ReadResourceRequest,
    ReadResourceRequestParams, RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

use super::connection::Shared;
use super::fault::wait_for_fault;
use super::handler::LegacyInput;
use super::operation::{
    CompletedOperation, InputRound, LEGACY_REQUEST_KEY, LegacyPending, OperationProgress,
    OperationRequest, ResumeRequest,
};
use super::options::ProtocolEra;
use super::record::{AttemptOutcome, LogicalOperation, OperationAttempt, RoundExchange};
use super::wire::{self, Answer, Origin};

/// A legacy request in flight.
#[derive(Debug)]
struct LegacyCall {
    response: oneshot::Receiver<std::result::Result<ServerResult, ServiceError>>,
    inputs: mpsc::Receiver<LegacyInput>,
    request_id: RequestId,
    finished: bool,
    shared: Arc<Shared>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for LegacyCall {
    fn drop(&mut self) {
        self.shared.router.clear();
        if !self.finished {
            cancel_request(
                &self.shared,
                self.request_id.clone(),
                "operation abandoned by the caller",
            );
        }
    }
}

fn cancel_request(shared: &Arc<Shared>, request_id: RequestId, reason: &str) {
    let peer = shared.peer.clone();
    let params = CancelledNotificationParam::new(Some(request_id), Some(reason.to_owned()));
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            let _ = peer.notify_cancelled(params).await;
        });
    }
}

/// Sends `notifications/cancelled` for a request if dropped while armed (the
/// caller abandoned a 2026-07-28 attempt mid-flight).
struct CancelOnDrop<'a> {
    shared: &'a Arc<Shared>,
    request_id: Option<RequestId>,
}

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.request_id = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.request_id.take() {
            cancel_request(self.shared, id, "request abandoned by the caller");
        }
    }
}

/// Drives one logical operation.
#[derive(Debug)]
pub(super) struct Driver {
    pub(super) shared: Arc<Shared>,
    pub(super) origin: Origin,
    arguments: Option<Map<String, Value>>,
    pub(super) round_limit: u32,
    state_only_retries: u32,
    pub(super) record: LogicalOperation,
    legacy: Option<LegacyCall>,
    waited: Duration,
}

fn new_driver(shared: Arc<Shared>, request: OperationRequest) -> Result<Driver> {
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
        started_at: OffsetDateTime::now_utc(),
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
        waited: Duration::ZERO,
    })
}

pub(crate) async fn start(
    shared: Arc<Shared>,
    request: OperationRequest,
) -> Result<OperationProgress> {
    let mut driver = new_driver(shared, request)?;
    driver.shared.publish(&driver.record);
    match driver.shared.era {
        ProtocolEra::Modern => driver.modern_attempts(None, None).await,
        ProtocolEra::Legacy => {
            driver.legacy_start().await?;
            driver.legacy_drive().await
        }
    }
}

pub(crate) async fn resume(
    shared: Arc<Shared>,
    resume: ResumeRequest,
) -> Result<OperationProgress> {
    if shared.era != ProtocolEra::Modern {
        return Err(Error::managed_input_state(format!(
            "a legacy-era round lives in its open request and cannot be resumed (server '{}')",
            shared.server
        ))
        .with_detail("server", shared.server.clone()));
    }
    let mut driver = new_driver(shared, resume.operation)?;
    driver.record.rounds = resume.completed_rounds;
    driver.shared.publish(&driver.record);
    driver
        .modern_attempts(Some(resume.responses), resume.request_state)
        .await
}

impl Driver {
    fn attempt_number(&self) -> u32 {
        u32::try_from(self.record.attempts.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    fn begin_attempt(
        &mut self,
        request_state: Option<String>,
        input_responses: Option<ResponseMap>,
    ) -> u32 {
        let attempt = self.attempt_number();
        self.record.attempts.push(OperationAttempt {
            attempt,
            started_at: OffsetDateTime::now_utc(),
            finished_at: None,
            duration_ms: None,
            request_state,
            input_responses,
            input_required: false,
            rounds: Vec::new(),
            outcome: AttemptOutcome::Pending,
        });
        self.shared.publish(&self.record);
        attempt
    }

    fn end_attempt(&mut self, outcome: AttemptOutcome, waited: Duration) {
        if let Some(last) = self.record.attempts.last_mut() {
            last.finished_at = Some(OffsetDateTime::now_utc());
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
            self.record.finished_at = Some(OffsetDateTime::now_utc());
        }
        self.shared.publish(&self.record);
    }

    /// Record `error` as the operation's end and tag it with the operation ids.
    fn fail(&mut self, error: Error, waited: Duration) -> Error {
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
        self.record.finished_at = Some(OffsetDateTime::now_utc());
        self.shared.publish(&self.record);
        error
    }

    fn complete(&mut self, result: Value, is_error: bool, waited: Duration) -> OperationProgress {
        self.end_attempt(
            AttemptOutcome::Complete {
                result: result.clone(),
                is_error,
            },
            waited,
        );
        OperationProgress::Complete(CompletedOperation {
            result,
            is_error,
            record: Box::new(self.record.clone()),
        })
    }

    fn round_limit_error(&self) -> Error {
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

    fn wire_request(
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
    async fn closed_error(&self, error: Option<ServiceError>) -> Error {
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

    async fn send(
        &self,
        request: ClientRequest,
    ) -> Result<rmcp::service::RequestHandle<rmcp::service::RoleClient>> {
        if let Some(error) = self.shared.fault_error() {
            return Err(error);
        }
        match self
            .shared
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => Ok(handle),
            Err(error) => Err(self.closed_error(Some(error)).await),
        }
    }

    /// 2026-07-28: send attempts until the result or a round with requests.
    pub(super) async fn modern_attempts(
        mut self,
        mut input_responses: Option<ResponseMap>,
        mut request_state: Option<String>,
    ) -> Result<OperationProgress> {
        loop {
            let wire_responses: Option<InputResponses> = input_responses.as_ref().map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), wire::response_json(v)))
                    .collect()
            });
            let attempt = self.begin_attempt(request_state.clone(), input_responses.take());
            let request = self.wire_request(wire_responses, request_state.clone());
            let started = Instant::now();
            let handle = match self.send(request).await {
                Ok(handle) => handle,
                Err(error) => return Err(self.fail(error, started.elapsed())),
            };
            let request_id = handle.id.clone();
            let guard = CancelOnDrop {
                shared: &self.shared,
                request_id: Some(request_id.clone()),
            };
            let outcome = self.await_answer(handle.rx, &request_id).await;
            guard.disarm();
            let waited = started.elapsed();
            let answer = match outcome {
                Ok(answer) => answer,
                Err(error) => return Err(self.fail(error, waited)),
            };
            match answer {
                Answer::Complete { result, is_error } => {
                    return Ok(self.complete(result, is_error, waited));
                }
                Answer::InputRequired {
                    requests,
                    request_state: state,
                } => {
                    let keys: Vec<String> = requests.keys().cloned().collect();
                    self.end_attempt(
                        AttemptOutcome::InputRequired {
                            request_keys: keys,
                            request_state: state.clone(),
                        },
                        waited,
                    );
                    if requests.is_empty() {
                        // State-only round: retry at once without a round.
                        self.state_only_retries += 1;
                        if self.state_only_retries > self.round_limit {
                            let error = self.round_limit_error();
                            return Err(self.fail(error, Duration::ZERO));
                        }
                        request_state = state;
                        continue;
                    }
                    self.record.rounds += 1;
                    if self.record.rounds > self.round_limit {
                        let error = self.round_limit_error();
                        return Err(self.fail(error, Duration::ZERO));
                    }
                    self.shared.publish(&self.record);
                    let round_index = self.record.rounds;
                    return Ok(OperationProgress::InputRequired(InputRound {
                        driver: Box::new(self),
                        requests,
                        request_state: state,
                        attempt,
                        round_index,
                        legacy: None,
                    }));
                }
            }
        }
    }

    /// Wait for one response, bounded by the request timeout and faults.
    async fn await_answer(
        &self,
        response: oneshot::Receiver<std::result::Result<ServerResult, ServiceError>>,
        request_id: &RequestId,
    ) -> Result<Answer> {
        let mut faults = self.shared.faults.clone();
        let timeout = self.shared.options.request_timeout;
        tokio::select! {
            answer = tokio::time::timeout(timeout, response) => match answer {
                Ok(Ok(Ok(result))) => self.classify(result, request_id),
                Ok(Ok(Err(error))) => Err(match error {
                    ServiceError::McpError(_) => wire::service_error(error, &self.origin),
                    other => self.closed_error(Some(other)).await,
                }),
                Ok(Err(_)) => Err(self.closed_error(None).await),
                Err(_) => {
                    cancel_request(&self.shared, request_id.clone(), "request timeout");
                    Err(self.timeout_error(timeout))
                }
            },
            fault = wait_for_fault(&mut faults) => Err(fault.to_error(&self.shared.server)),
        }
    }

    fn timeout_error(&self, timeout: Duration) -> Error {
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
    fn classify(&self, result: ServerResult, request_id: &RequestId) -> Result<Answer> {
        if let Some(raw) = self.shared.raw.take_result(request_id) {
            return wire::classify(raw, &self.origin);
        }
        let value = match result {
            ServerResult::CustomResult(custom) => custom.0,
            ServerResult::EmptyResult(_) if self.origin.kind == OperationKind::Tool => {
                serde_json::json!({"content": []})
            }
            other => serde_json::to_value(&other).map_err(|error| {
                Error::protocol(format!(
                    "cannot read the result from '{}': {error}",
                    self.origin.server
                ))
            })?,
        };
        wire::classify(value, &self.origin)
    }

    /// Legacy: send the one request; rounds arrive as `elicitation/create`.
    async fn legacy_start(&mut self) -> Result<()> {
        let started = Instant::now();
        let slot = match tokio::time::timeout(
            self.shared.options.request_timeout,
            Arc::clone(&self.shared.legacy_slot).acquire_owned(),
        )
        .await
        {
            Ok(Ok(slot)) => slot,
            _ => {
                self.begin_attempt(None, None);
                let error = Error::timeout(format!(
                    "another operation on the legacy-era connection to '{}' is still in flight",
                    self.origin.server
                ));
                return Err(self.fail(error, started.elapsed()));
            }
        };
        let (sender, inputs) = mpsc::channel(8);
        self.shared.router.install(sender);
        self.begin_attempt(None, None);
        let request = self.wire_request(None, None);
        let handle = match self.send(request).await {
            Ok(handle) => handle,
            Err(error) => {
                self.shared.router.clear();
                return Err(self.fail(error, started.elapsed()));
            }
        };
        let request_id = handle.id.clone();
        self.legacy = Some(LegacyCall {
            response: handle.rx,
            inputs,
            request_id,
            finished: false,
            shared: Arc::clone(&self.shared),
            _slot: slot,
        });
        self.waited += started.elapsed();
        Ok(())
    }

    pub(super) fn note_legacy_answer(&mut self, responses: &ResponseMap, withdrawn: bool) {
        if let Some(exchange) = self
            .record
            .attempts
            .last_mut()
            .and_then(|a| a.rounds.last_mut())
        {
            exchange.responses = Some(responses.clone());
            exchange.withdrawn = withdrawn;
        }
        self.shared.publish(&self.record);
    }

    /// Legacy: wait for the result or the next `elicitation/create`.
    pub(super) async fn legacy_drive(mut self) -> Result<OperationProgress> {
        let timeout = self.shared.options.request_timeout;
        let Some(mut call) = self.legacy.take() else {
            let error = Error::transport("legacy operation lost its request");
            return Err(self.fail(error, Duration::ZERO));
        };
        let mut faults = self.shared.faults.clone();
        let remaining = timeout.saturating_sub(self.waited);
        let started = Instant::now();
        enum Step {
            Answer(
                Box<
                    std::result::Result<
                        std::result::Result<ServerResult, ServiceError>,
                        oneshot::error::RecvError,
                    >,
                >,
            ),
            Input(LegacyInput),
            Fault(Error),
            Timeout,
        }
        let step = tokio::select! {
            answer = &mut call.response => Step::Answer(Box::new(answer)),
            Some(input) = call.inputs.recv() => Step::Input(input),
            fault = wait_for_fault(&mut faults) => Step::Fault(fault.to_error(&self.shared.server)),
            () = tokio::time::sleep(remaining) => Step::Timeout,
        };
        self.waited += started.elapsed();
        let waited = self.waited;
        match step {
            Step::Answer(answer) => {
                call.finished = true;
                let request_id = call.request_id.clone();
                drop(call);
                let answer = match *answer {
                    Ok(Ok(result)) => self.classify(result, &request_id),
                    Ok(Err(error @ ServiceError::McpError(_))) => {
                        Err(wire::service_error(error, &self.origin))
                    }
                    Ok(Err(error)) => Err(self.closed_error(Some(error)).await),
                    Err(_) => Err(self.closed_error(None).await),
                };
                match answer {
                    Ok(Answer::Complete { result, is_error }) => {
                        Ok(self.complete(result, is_error, waited))
                    }
                    Ok(Answer::InputRequired { .. }) => {
                        let error = Error::protocol(format!(
                            "MCP server '{}' returned input_required on a legacy-era connection",
                            self.origin.server
                        ));
                        Err(self.fail(error, waited))
                    }
                    Err(error) => Err(self.fail(error, waited)),
                }
            }
            Step::Input(input) => self.legacy_round(call, input),
            Step::Fault(error) => {
                call.finished = true;
                Err(self.fail(error, waited))
            }
            Step::Timeout => {
                drop(call);
                let error = self.timeout_error(timeout);
                Err(self.fail(error, waited))
            }
        }
    }

    fn legacy_round(mut self, call: LegacyCall, input: LegacyInput) -> Result<OperationProgress> {
        let waited = self.waited;
        let request =
            match wire::elicitation_request(LEGACY_REQUEST_KEY, &input.params, &self.origin) {
                Ok(request) => request,
                Err(error) => {
                    let _ = input.reply.send(serde_json::json!({"action": "cancel"}));
                    drop(call);
                    return Err(self.fail(error, waited));
                }
            };
        self.record.rounds += 1;
        if self.record.rounds > self.round_limit {
            let _ = input.reply.send(serde_json::json!({"action": "cancel"}));
            drop(call);
            let error = self.round_limit_error();
            return Err(self.fail(error, waited));
        }
        let round_index = self.record.rounds;
        if let Some(last) = self.record.attempts.last_mut() {
            last.input_required = true;
            last.rounds.push(RoundExchange {
                round_index,
                request_keys: vec![LEGACY_REQUEST_KEY.to_owned()],
                responses: None,
                withdrawn: false,
            });
        }
        self.shared.publish(&self.record);
        let attempt = self.attempt_number().saturating_sub(1);
        self.legacy = Some(call);
        let mut requests = BTreeMap::new();
        requests.insert(LEGACY_REQUEST_KEY.to_owned(), request);
        Ok(OperationProgress::InputRequired(InputRound {
            driver: Box::new(self),
            requests,
            request_state: None,
            attempt,
            round_index,
            legacy: Some(LegacyPending {
                reply: input.reply,
                withdrawn: input.withdrawn,
            }),
        }))
    }
}
