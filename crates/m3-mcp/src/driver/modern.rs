//! The 2026-07-28 era: every wire attempt is one request; an `input_required`
//! answer ends the attempt, and the answers go out on a new attempt that echoes
//! the round's `requestState`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use m3_types::{ElicitationRequest, OperationKind, ResponseMap, Result};
use rmcp::ServiceError;
use rmcp::model::{InputResponses, RequestId, ServerResult};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::super::fault::wait_for_fault;
use super::super::record::AttemptOutcome;
use super::super::wire::{self, Answer};
use super::common::{Driver, RoundOpened, Step};

/// Sends `notifications/cancelled` for a request if dropped while armed (the
/// caller abandoned a 2026-07-28 attempt mid-flight).
struct CancelOnDrop<'a> {
    shared: &'a std::sync::Arc<super::super::shared::Shared>,
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
            self.shared
                .cancel_request(id, "request abandoned by the caller");
        }
    }
}

/// One answered attempt.
struct Attempted {
    attempt: u32,
    answer: Reply,
    waited: Duration,
}

/// What an attempt was answered with: an answer of the core protocol, or a task
/// (`resultType: "task"`, the tasks extension; its `CreateTaskResult` object).
enum Reply {
    Answer(Answer),
    Task(Map<String, Value>),
}

impl Driver {
    /// 2026-07-28: send attempts until the result or a round with requests.
    pub(crate) async fn modern_attempts(
        mut self,
        mut input_responses: Option<ResponseMap>,
        mut request_state: Option<String>,
    ) -> Result<Step> {
        loop {
            let Attempted {
                attempt,
                answer,
                waited,
            } = self
                .modern_attempt(input_responses.take(), request_state.clone())
                .await?;
            match answer {
                Reply::Task(created) => return self.follow_task(&created, waited).await,
                Reply::Answer(Answer::Complete { result, is_error }) => {
                    return Ok(self.complete(result, is_error, waited));
                }
                Reply::Answer(Answer::InputRequired {
                    requests,
                    request_state: state,
                }) => {
                    self.end_attempt(
                        AttemptOutcome::InputRequired {
                            request_keys: requests.keys().cloned().collect(),
                            request_state: state.clone(),
                        },
                        waited,
                    );
                    if requests.is_empty() {
                        // State-only round: retry at once without a round.
                        self.count_state_only_retry()?;
                        request_state = state;
                        continue;
                    }
                    return self.modern_round(requests, state, attempt);
                }
            }
        }
    }

    /// Sends one attempt and waits for its answer; a failure ends the operation.
    async fn modern_attempt(
        &mut self,
        input_responses: Option<ResponseMap>,
        request_state: Option<String>,
    ) -> Result<Attempted> {
        let wire_responses: Option<InputResponses> = input_responses.as_ref().map(|map| {
            map.iter()
                .map(|(k, v)| (k.clone(), wire::response_json(v)))
                .collect()
        });
        let attempt = self.begin_attempt(request_state.clone(), input_responses);
        let request = self.wire_request(wire_responses, request_state);
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
        match outcome {
            Ok(answer) => Ok(Attempted {
                attempt,
                answer,
                waited,
            }),
            Err(error) => Err(self.fail(error, waited)),
        }
    }

    /// A state-only `input_required` is retried at once, up to the round limit.
    fn count_state_only_retry(&mut self) -> Result<()> {
        self.state_only_retries += 1;
        if self.state_only_retries > self.round_limit {
            let error = self.round_limit_error();
            return Err(self.fail(error, Duration::ZERO));
        }
        Ok(())
    }

    /// A round with requests is handed to the caller (within the round limit).
    fn modern_round(
        mut self,
        requests: BTreeMap<String, ElicitationRequest>,
        request_state: Option<String>,
        attempt: u32,
    ) -> Result<Step> {
        self.record.rounds += 1;
        if self.record.rounds > self.round_limit {
            let error = self.round_limit_error();
            return Err(self.fail(error, Duration::ZERO));
        }
        self.shared.publish(&self.record);
        let round_index = self.record.rounds;
        Ok(Step::Input(
            Box::new(self),
            RoundOpened {
                requests,
                request_state,
                attempt,
                round_index,
                legacy: None,
            },
        ))
    }

    /// Wait for one response, bounded by the request timeout and faults.
    async fn await_answer(
        &self,
        response: oneshot::Receiver<std::result::Result<ServerResult, ServiceError>>,
        request_id: &RequestId,
    ) -> Result<Reply> {
        let mut faults = self.shared.faults.clone();
        let timeout = self.shared.options.request_timeout;
        tokio::select! {
            answer = tokio::time::timeout(timeout, response) => match answer {
                Ok(Ok(Ok(result))) => self.reply(result, request_id),
                Ok(Ok(Err(error))) => Err(match error {
                    ServiceError::McpError(_) => wire::modern_service_error(error, &self.origin),
                    other => self.closed_error(Some(other)).await,
                }),
                Ok(Err(_)) => Err(self.closed_error(None).await),
                Err(_) => {
                    self.shared.cancel_request(request_id.clone(), "request timeout");
                    Err(self.timeout_error(timeout))
                }
            },
            fault = wait_for_fault(&mut faults) => Err(fault.to_error(&self.shared.server)),
        }
    }

    /// A task for a `tools/call`; anything else is classified as the core protocol's answer.
    /// A task for a prompt or a resource is invalid (the extension covers `tools/call` only).
    fn reply(&self, result: ServerResult, request_id: &RequestId) -> Result<Reply> {
        let value = self.result_json(result, request_id)?;
        match value {
            Value::Object(object)
                if object.get("resultType").and_then(Value::as_str) == Some("task")
                    && self.origin.kind == OperationKind::Tool =>
            {
                Ok(Reply::Task(object))
            }
            other => wire::classify(other, &self.origin).map(Reply::Answer),
        }
    }
}
