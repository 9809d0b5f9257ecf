//! The legacy eras (2025-11-25 / 2025-06-18): the operation is one request that
//! stays open; each round arrives as a server-to-client `elicitation/create` and
//! is answered on that request while the operation waits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_types::{Error, ResponseMap, Result};
use rmcp::ServiceError;
use rmcp::model::{RequestId, ServerResult};
use tokio::sync::{mpsc, oneshot};

use super::super::fault::wait_for_fault;
use super::super::handler::LegacyInput;
use super::super::record::RoundExchange;
use super::super::request::LEGACY_REQUEST_KEY;
use super::super::wire::{self, Answer};
use super::common::{Driver, RoundOpened, Step};
use super::legacy_call::{LegacyCall, LegacyPending};

/// The open request's response, as its channel delivers it.
type LegacyResponse =
    std::result::Result<std::result::Result<ServerResult, ServiceError>, oneshot::error::RecvError>;

/// What ended one wait on the open request.
enum LegacyStep {
    /// The operation's answer (boxed: it is much larger than the other steps).
    Answer(Box<LegacyResponse>),
    /// A round: the server's `elicitation/create`.
    Input(LegacyInput),
    /// The connection failed.
    Fault(Error),
    /// The request timeout ran out.
    Timeout,
}

/// The reply that withdraws a round the operation cannot take.
fn cancel_reply() -> serde_json::Value {
    serde_json::json!({"action": "cancel"})
}

impl Driver {
    /// Legacy: send the one request; rounds arrive as `elicitation/create`.
    pub(super) async fn legacy_start(&mut self) -> Result<()> {
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

    /// Records the caller's answer to the current legacy round.
    pub(crate) fn note_legacy_answer(&mut self, responses: &ResponseMap, withdrawn: bool) {
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
    pub(crate) async fn legacy_drive(mut self) -> Result<Step> {
        let timeout = self.shared.options.request_timeout;
        let Some(mut call) = self.legacy.take() else {
            let error = Error::transport("legacy operation lost its request");
            return Err(self.fail(error, Duration::ZERO));
        };
        let remaining = timeout.saturating_sub(self.waited);
        let started = Instant::now();
        let step = self.next_legacy_step(&mut call, remaining).await;
        self.waited += started.elapsed();
        let waited = self.waited;
        match step {
            LegacyStep::Answer(answer) => {
                call.finished = true;
                let request_id = call.request_id.clone();
                drop(call);
                self.legacy_answer(*answer, &request_id, waited).await
            }
            LegacyStep::Input(input) => self.legacy_round(call, input),
            LegacyStep::Fault(error) => {
                call.finished = true;
                Err(self.fail(error, waited))
            }
            LegacyStep::Timeout => {
                drop(call);
                let error = self.timeout_error(timeout);
                Err(self.fail(error, waited))
            }
        }
    }

    async fn next_legacy_step(&self, call: &mut LegacyCall, remaining: Duration) -> LegacyStep {
        let mut faults = self.shared.faults.clone();
        tokio::select! {
            answer = &mut call.response => LegacyStep::Answer(Box::new(answer)),
            Some(input) = call.inputs.recv() => LegacyStep::Input(input),
            fault = wait_for_fault(&mut faults) => LegacyStep::Fault(fault.to_error(&self.shared.server)),
            () = tokio::time::sleep(remaining) => LegacyStep::Timeout,
        }
    }

    /// The open request answered: the operation's result, or its failure.
    async fn legacy_answer(
        mut self,
        answer: LegacyResponse,
        request_id: &RequestId,
        waited: Duration,
    ) -> Result<Step> {
        let answer = match answer {
            Ok(Ok(result)) => self.classify(result, request_id),
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

    fn legacy_round(mut self, call: LegacyCall, input: LegacyInput) -> Result<Step> {
        let waited = self.waited;
        let request =
            match wire::elicitation_request(LEGACY_REQUEST_KEY, &input.params, &self.origin) {
                Ok(request) => request,
                Err(error) => {
                    let _ = input.reply.send(cancel_reply());
                    drop(call);
                    return Err(self.fail(error, waited));
                }
            };
        self.record.rounds += 1;
        if self.record.rounds > self.round_limit {
            let _ = input.reply.send(cancel_reply());
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
        Ok(Step::Input(
            Box::new(self),
            RoundOpened {
                requests,
                request_state: None,
                attempt,
                round_index,
                legacy: Some(LegacyPending {
                    reply: input.reply,
                    withdrawn: input.withdrawn,
                }),
            },
        ))
    }
}
