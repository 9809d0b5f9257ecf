//! The tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`): a `tools/call`
//! answered with a task is followed with `tasks/get` until the task ends. A task that
//! asks for input (`input_required` with `inputRequests`) opens a round exactly like an
//! `input_required` result does; its answers go out with `tasks/update` and polling
//! continues. The task's result is the operation's result; a `failed` task is its error.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use m3_types::{ElicitationRequest, Error, ResponseMap, Result};
use rmcp::ServiceError;
use rmcp::model::{ClientRequest, CustomRequest};
use serde_json::{Map, Value};

use super::super::fault::wait_for_fault;
use super::super::record::RoundExchange;
use super::super::tasks::{self, TaskSnapshot, TaskStatus};
use super::super::wire::{self, Answer};
use super::common::{Driver, RoundOpened, Step};
use super::task_call::TaskCall;

impl Driver {
    /// Whether the operation is following a task (its rounds are answered by `tasks/update`).
    pub(crate) fn in_task(&self) -> bool {
        self.task.is_some()
    }

    /// The `tools/call` attempt was answered with a task: follow it.
    pub(super) async fn follow_task(
        mut self,
        created: &Map<String, Value>,
        waited: Duration,
    ) -> Result<Step> {
        self.waited = waited;
        let snapshot = match tasks::created(created, &self.origin) {
            Ok(snapshot) => snapshot,
            Err(error) => return Err(self.fail(error, waited)),
        };
        tracing::debug!(
            server = %self.origin.server,
            task_id = %snapshot.task_id,
            status = snapshot.status.as_str(),
            "tools/call answered with a task"
        );
        if let Some(last) = self.record.attempts.last_mut() {
            last.task_id = Some(snapshot.task_id.clone());
        }
        self.shared.publish(&self.record);
        self.task = Some(TaskCall::new(
            std::sync::Arc::clone(&self.shared),
            &snapshot,
        ));
        self.poll_task().await
    }

    /// Sends the answers to the task's open round with `tasks/update`, then polls on.
    pub(crate) async fn task_update(mut self, responses: ResponseMap) -> Result<Step> {
        self.note_task_answer(&responses);
        let wire_responses: Map<String, Value> = responses
            .iter()
            .map(|(key, response)| (key.clone(), wire::response_json(response)))
            .collect();
        let Some(call) = self.task.as_mut() else {
            return Err(self.fail(lost_task(), Duration::ZERO));
        };
        call.answered.extend(responses.keys().cloned());
        call.reset_backoff();
        let params = tasks::params(
            &call.task_id,
            call.request_state.as_deref(),
            Some(Value::Object(wire_responses)),
        );
        let started = Instant::now();
        let ack = self.task_request("tasks/update", params).await;
        self.waited += started.elapsed();
        if let Err(error) = ack {
            let waited = self.waited;
            return Err(self.fail(error, waited));
        }
        self.poll_task().await
    }

    /// Polls `tasks/get` until the task ends or asks for input not answered yet.
    async fn poll_task(mut self) -> Result<Step> {
        loop {
            let Some(call) = self.task.as_mut() else {
                return Err(self.fail(lost_task(), Duration::ZERO));
            };
            let wait = call.next_wait();
            let params = tasks::params(&call.task_id, call.request_state.as_deref(), None);
            let task_id = call.task_id.clone();
            // Waiting for the task is waiting for the server: the attempt's time counts it.
            let started = Instant::now();
            tokio::time::sleep(wait).await;
            let snapshot = self
                .task_request("tasks/get", params)
                .await
                .and_then(|value| tasks::detailed(value, &self.origin, &task_id));
            self.waited += started.elapsed();
            let snapshot = match snapshot {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    let waited = self.waited;
                    return Err(self.fail(error, waited));
                }
            };
            if let Some(call) = self.task.as_mut() {
                call.observe(&snapshot);
            }
            match snapshot.status {
                TaskStatus::Working => {}
                TaskStatus::InputRequired => {
                    let fresh = self.unanswered(snapshot.input_requests);
                    if !fresh.is_empty() {
                        return self.task_round(fresh);
                    }
                }
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled => {
                    return self.task_ended(snapshot);
                }
            }
        }
    }

    /// The requests of an `input_required` poll the caller has not answered yet.
    fn unanswered(
        &self,
        requests: BTreeMap<String, ElicitationRequest>,
    ) -> BTreeMap<String, ElicitationRequest> {
        let answered = self.task.as_ref().map(|call| &call.answered);
        requests
            .into_iter()
            .filter(|(key, _)| !answered.is_some_and(|done| done.contains(key)))
            .collect()
    }

    /// The task ended: its result completes the operation; `failed` and `cancelled` end it
    /// with a typed error.
    fn task_ended(mut self, snapshot: TaskSnapshot) -> Result<Step> {
        if let Some(call) = self.task.as_mut() {
            call.finished = true;
        }
        self.task = None;
        let waited = self.waited;
        let error = match snapshot.status {
            TaskStatus::Completed => {
                let result = snapshot.result.unwrap_or(Value::Null);
                match wire::classify(result, &self.origin) {
                    Ok(Answer::Complete { result, is_error }) => {
                        return Ok(self.complete(result, is_error, waited));
                    }
                    Ok(Answer::InputRequired { .. }) => Error::protocol(format!(
                        "MCP server '{}' completed task '{}' with an input_required result",
                        self.origin.server, snapshot.task_id
                    ))
                    .with_detail("server", self.origin.server.clone())
                    .with_detail("reason", "malformed_task"),
                    Err(error) => error.with_detail("task_id", snapshot.task_id.clone()),
                }
            }
            TaskStatus::Failed => tasks::failed(&snapshot, &self.origin),
            _ => tasks::cancelled(&snapshot, &self.origin),
        };
        Err(self.fail(error, waited))
    }

    /// The task asks for input: a round, counted against the round limit like any other.
    fn task_round(mut self, requests: BTreeMap<String, ElicitationRequest>) -> Result<Step> {
        self.record.rounds += 1;
        if self.record.rounds > self.round_limit {
            let error = self.round_limit_error();
            let waited = self.waited;
            return Err(self.fail(error, waited));
        }
        let round_index = self.record.rounds;
        if let Some(last) = self.record.attempts.last_mut() {
            last.input_required = true;
            last.rounds.push(RoundExchange::asked(
                round_index,
                requests.keys().cloned().collect(),
            ));
        }
        self.shared.publish(&self.record);
        let attempt = self.attempt_number().saturating_sub(1);
        Ok(Step::Input(
            Box::new(self),
            RoundOpened {
                requests,
                request_state: None,
                attempt,
                round_index,
                legacy: None,
            },
        ))
    }

    /// Records the caller's answer to the task's open round.
    fn note_task_answer(&mut self, responses: &ResponseMap) {
        if let Some(exchange) = self
            .record
            .attempts
            .last_mut()
            .and_then(|a| a.rounds.last_mut())
        {
            exchange.responses = Some(responses.clone());
        }
        self.shared.publish(&self.record);
    }

    /// One `tasks/*` request and its result's JSON, bounded by the request timeout and the
    /// connection's faults; a JSON-RPC error is a typed `protocol_error`.
    async fn task_request(&self, method: &str, params: Value) -> Result<Value> {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let handle = self.send(request).await?;
        let request_id = handle.id.clone();
        let timeout = self.shared.options.request_timeout;
        let mut faults = self.shared.faults.clone();
        tokio::select! {
            answer = tokio::time::timeout(timeout, handle.rx) => match answer {
                Ok(Ok(Ok(result))) => self.result_json(result, &request_id),
                Ok(Ok(Err(ServiceError::McpError(data)))) => Err(Error::protocol(format!(
                    "MCP server '{}' answered {method} for {} '{}' with error {}: {}",
                    self.origin.server, self.origin.kind.as_str(), self.origin.name,
                    data.code.0, data.message
                ))
                .with_detail("server", self.origin.server.clone())
                .with_detail("jsonrpc_code", data.code.0)
                .with_detail("method", method.to_owned())),
                Ok(Ok(Err(other))) => Err(self.closed_error(Some(other)).await),
                Ok(Err(_)) => Err(self.closed_error(None).await),
                Err(_) => {
                    self.shared.cancel_request(request_id, "request timeout");
                    Err(self.timeout_error(timeout).with_detail("method", method.to_owned()))
                }
            },
            fault = wait_for_fault(&mut faults) => Err(fault.to_error(&self.shared.server)),
        }
    }
}

fn lost_task() -> Error {
    Error::managed_input_state("the operation lost the task it follows")
}
