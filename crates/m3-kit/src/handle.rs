//! [`AsyncExecutionHandle`]: read, answer, wait for and cancel one execution.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::signal::{ChangeSubscription, Topic};
use m3_store::{
    ExecutionEvent, ExecutionLease, ExecutionRecord, LeaseRef, ManagedInputStore,
    ResponseSubmission, RoundRef,
};
use m3_types::{
    Actor, Error, ExecutionResult, ExecutionState, ExecutionStatus, HumanInput, ManagedInputRecord,
    ManagedInputStatus, PendingElicitationRound, Reason, ResponseMap, Result, messages,
};
use serde::Serialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::context::{execution_spec, round_context, spec_prompt, transferable};
use crate::shared::KitInner;

/// Diagnostics of one round (never the raw responses).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RoundDiagnostics {
    /// Round id.
    pub round_id: String,
    /// Zero-based index within the execution.
    pub round_index: u32,
    /// Current status.
    pub status: ManagedInputStatus,
    /// The request keys of the round.
    pub request_keys: Vec<String>,
    /// Server, kind and name of the operation.
    pub server: String,
    /// `tool`, `prompt` or `resource`.
    pub operation_kind: m3_types::OperationKind,
    /// Tool or prompt name, or resource URI.
    pub operation_name: String,
    /// Times the response was handed to the server.
    pub delivery_attempts: u32,
    /// Creation time.
    #[serde(with = "m3_types::timestamp::serde")]
    pub created_at: OffsetDateTime,
    /// When the response was accepted.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub response_validated_at: Option<OffsetDateTime>,
    /// When the round resolved.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub resolved_at: Option<OffsetDateTime>,
    /// When the round failed.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub failed_at: Option<OffsetDateTime>,
    /// Failure code (`cancelled`, `timeout`, `recovery_unavailable`, ...).
    pub failure_code: Option<String>,
    /// Failure message.
    pub failure_message: Option<String>,
    /// The idempotency key of the accepted response.
    pub response_idempotency_key: Option<String>,
    /// The redacted projection of the accepted responses.
    pub redacted_responses: Option<Map<String, Value>>,
    /// Who answered (`None` before an answer, or for one given without an actor, as the
    /// Python original gives them).
    pub answered_by: Option<Actor>,
    /// What the round decides on: the operation's arguments and the agent's prompt,
    /// redacted (see [`RoundContext`](m3_types::RoundContext)).
    pub context: m3_types::RoundContext,
    /// Whether the round, pending, survives its worker's restart (handed to another live
    /// worker when its worker stops; docs/workers.md). False once it is not pending.
    pub transferable: bool,
}

/// One round with its requests and its redacted diagnostics, from
/// [`AsyncExecutionHandle::round`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RoundDetails {
    /// The public round: server, operation, requests, deadline.
    pub round: PendingElicitationRound,
    /// Status, timestamps, failure and the redacted responses.
    pub diagnostics: RoundDiagnostics,
    /// From [`AsyncMcpTestKit::answer`](crate::AsyncMcpTestKit::answer): the round already
    /// held these responses under this idempotency key when it was read, so the call wrote
    /// nothing and returned the stored answer (a replay). `false` when the call committed
    /// them, and wherever a round is only read. Two first answers racing with the same key
    /// and responses may both say `false`; the store keeps one answer either way.
    pub replayed: bool,
}

/// A handle on one execution, from [`AsyncAgent::submit`](crate::AsyncAgent::submit)
/// or [`AsyncMcpTestKit::attach`](crate::AsyncMcpTestKit::attach). Cheap to clone.
#[derive(Debug, Clone)]
pub struct AsyncExecutionHandle {
    kit: Arc<KitInner>,
    execution_id: String,
    human_input: HumanInput,
    /// The round this handle (or a clone) last returned from `pending_elicitation`, with the
    /// lease it held then: an answer to that round presents it instead of reading the round
    /// again (see `respond_elicitation`).
    seen_pending: Arc<Mutex<Option<(String, LeaseRef)>>>,
}

pub(crate) fn not_found(what: &str, id: &str) -> Error {
    Error::not_found(format!("{what} '{id}' does not exist"))
}

impl AsyncExecutionHandle {
    pub(crate) fn new(kit: Arc<KitInner>, execution_id: String, human_input: HumanInput) -> Self {
        Self {
            kit,
            execution_id,
            human_input,
            seen_pending: Arc::default(),
        }
    }

    /// The kit this handle reads through (for the handle's methods in other modules).
    pub(crate) fn kit(&self) -> &KitInner {
        &self.kit
    }

    fn seen_pending(&self) -> std::sync::MutexGuard<'_, Option<(String, LeaseRef)>> {
        // Only a cache: a panicking holder cannot leave it half-written.
        self.seen_pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The lease last seen on round `round_id`, if this handle saw it pending.
    fn seen_lease(&self, round_id: &str) -> Option<LeaseRef> {
        self.seen_pending()
            .as_ref()
            .filter(|(seen, _)| seen == round_id)
            .map(|(_, lease)| lease.clone())
    }

    /// The execution id.
    pub fn execution_id(&self) -> &str {
        &self.execution_id
    }

    /// The execution's human-input policy.
    pub fn human_input(&self) -> HumanInput {
        self.human_input
    }

    /// A subscription to this execution's changes: waits re-read the store when it wakes
    /// (and at its slow fallback poll), instead of polling on a short timer.
    fn changes(&self) -> ChangeSubscription {
        self.kit
            .store
            .change_signal()
            .subscribe(Topic::Execution(self.execution_id.clone()))
    }

    async fn record(&self) -> Result<ExecutionRecord> {
        self.kit
            .store
            .get_execution(&self.execution_id)
            .await?
            .ok_or_else(|| {
                not_found("execution", &self.execution_id)
                    .with_detail("execution_id", self.execution_id.clone())
            })
    }

    /// The single pending round, or `None` (always `None` for `human_input = fail`).
    ///
    /// # Errors
    /// `managed_input_state` ("multiple") if storage holds more than one pending
    /// round; `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn pending_elicitation(&self) -> Result<Option<PendingElicitationRound>> {
        if self.human_input != HumanInput::Managed {
            return Ok(None);
        }
        let store = self.kit.store.managed_input_store().await?;
        let mut pending: Vec<ManagedInputRecord> = store
            .list_rounds(&self.execution_id)
            .await?
            .into_iter()
            .filter(|r| r.status == ManagedInputStatus::Pending)
            .collect();
        match pending.len() {
            0 => Ok(None),
            1 => Ok(pending.pop().map(|record| {
                *self.seen_pending() =
                    Some((record.pending.round_id.clone(), LeaseRef::of(&record.lease)));
                record.pending
            })),
            n => Err(Error::managed_input_state(messages::MULTIPLE_PENDING)
                .with_detail("pending_rounds", n)),
        }
    }

    /// Commits `responses` for round `round_id` through the store (validated,
    /// idempotent under `idempotency_key`), answered by the kit's actor
    /// ([`AsyncMcpTestKitBuilder::actor`](crate::AsyncMcpTestKitBuilder::actor)), then wakes
    /// this process's worker.
    ///
    /// # Errors
    /// - `invalid_argument` for a handle that is not managed;
    /// - `managed_input_invalid` for an empty round id or key, responses that do
    ///   not match the round (the round stays pending), or an unknown round
    ///   (code `not_found`);
    /// - `managed_input_conflict` for the same key with another response, or a
    ///   lease that expired;
    /// - `managed_input_state` for a failed or terminal round (for example after
    ///   recovery).
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe in the strict sense: dropped mid-way, the responses may or may not have been
    /// committed (the commit is one transaction, never half). Call it again with the same
    /// idempotency key and the same responses to learn which: it succeeds either way.
    pub async fn respond_elicitation(
        &self,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<()> {
        let actor = self.kit.actor.clone();
        self.respond_elicitation_as(round_id, responses, idempotency_key, actor)
            .await
    }

    /// [`respond_elicitation`](Self::respond_elicitation) answered by `actor`: stored with
    /// the response in the same transaction and carried by the `round.answered` change
    /// record. A repeat of the same answer keeps the first answer's actor.
    ///
    /// # Errors
    /// As [`respond_elicitation`](Self::respond_elicitation).
    ///
    /// # Cancel safety
    ///
    /// As [`respond_elicitation`](Self::respond_elicitation).
    pub async fn respond_elicitation_as(
        &self,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
        actor: Actor,
    ) -> Result<()> {
        if self.human_input != HumanInput::Managed {
            return Err(Error::model_validation(messages::RESPONSES_REQUIRE_MANAGED)
                .with_detail("operation", "execution.respond_elicitation"));
        }
        if round_id.is_empty() {
            return Err(Error::managed_input_validation(
                "round_id must be a non-empty string",
            ));
        }
        if idempotency_key.is_empty() {
            return Err(Error::managed_input_validation(
                "idempotency_key must be a non-empty string",
            ));
        }
        let store = self.kit.store.managed_input_store().await?;
        let round = RoundRef::new(self.execution_id.clone(), round_id);
        let submission = ResponseSubmission::new(responses, idempotency_key).with_actor(actor);
        // The responder borrows the worker's lease (the reference's contract). The lease this
        // handle saw on the pending round saves reading it again; the store checks it in the
        // write, and only a lease that is no longer the stored one needs the read.
        let answered = match self.seen_lease(round_id) {
            Some(lease) => match store
                .submit_responses(&round, &lease, submission.clone())
                .await
            {
                Err(error) if error.reason() == Some(Reason::LeaseNotHeld) => false,
                done => done.map(|_| true)?,
            },
            None => false,
        };
        if !answered {
            self.submit_under_current_lease(&store, &round, submission)
                .await?;
        }
        self.kit.notifier.notify_response(round_id);
        Ok(())
    }

    /// Reads `round` and submits under the lease it holds now.
    async fn submit_under_current_lease(
        &self,
        store: &Arc<dyn ManagedInputStore>,
        round: &RoundRef,
        submission: ResponseSubmission,
    ) -> Result<()> {
        let record = store.get_round(round).await?.ok_or_else(|| {
            not_found("managed-input round", &round.round_id)
                .with_detail("round_id", round.round_id.clone())
        })?;
        store
            .submit_responses(round, &LeaseRef::of(&record.lease), submission)
            .await?;
        Ok(())
    }

    /// The execution's lifecycle snapshot.
    ///
    /// # Errors
    /// `not_found` if the execution is gone; `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn snapshot(&self) -> Result<ExecutionState> {
        Ok(self.record().await?.state())
    }

    /// The worker lease while a worker holds one (live or expired): who runs the execution
    /// and until when. `None` before a worker claimed it and once it finished. An expired
    /// lease on an unfinished execution means its worker is gone: recovery (opening the store,
    /// `recover`) terminalizes it.
    ///
    /// # Errors
    /// `managed_input_invalid` (`not_found`) if the execution is gone; `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn worker_lease(&self) -> Result<Option<ExecutionLease>> {
        Ok(self.record().await?.lease)
    }

    /// Waits for the terminal result (`None`: no limit).
    ///
    /// # Errors
    /// `invalid_argument` for a zero timeout; `timeout` (detail `wait_only`) when
    /// the wait expires; the execution keeps running.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it waits by reading the store; dropping it leaves the execution running and a
    /// later call waits again.
    pub async fn result(&self, timeout: Option<Duration>) -> Result<ExecutionResult> {
        if timeout == Some(Duration::ZERO) {
            return Err(Error::model_validation(messages::WAIT_TIMEOUT_POSITIVE));
        }
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut changes = self.changes();
        loop {
            let record = self.record().await?;
            if record.is_finished() {
                return terminal_result(record);
            }
            if !wait_until(&mut changes, deadline).await {
                return Err(Error::timeout(messages::RESULT_WAIT_TIMED_OUT)
                    .with_detail("operation", "execution.result")
                    .with_detail("wait_only", true));
            }
        }
    }

    /// Cancels the execution (durable flag, seen by the worker in any process);
    /// if this kit runs it, waits until the outcome is recorded. No-op once
    /// finished. Distinct from answering a request with `action = "cancel"`.
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Dropped mid-way, the durable cancel request may already be recorded (the execution then
    /// still ends `cancelled`); calling again is harmless. The wait for the outcome (when this kit
    /// runs the execution) is cancel-safe.
    pub async fn cancel(&self) -> Result<()> {
        let record = self.record().await?;
        if record.is_finished() {
            return Ok(());
        }
        self.kit
            .store
            .request_cancel(&self.execution_id, Some("caller requested cancellation"))
            .await?;
        if let Some(token) = self.kit.local_token(&self.execution_id) {
            token.cancel();
            let _ = self.result(Some(Duration::from_secs(30))).await?;
        }
        Ok(())
    }

    /// Committed events, only those after `after_sequence` when given.
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn events(&self, after_sequence: Option<u64>) -> Result<Vec<ExecutionEvent>> {
        self.kit
            .store
            .list_events(&self.execution_id, after_sequence)
            .await
    }

    /// Every round of the execution with redacted diagnostics.
    ///
    /// # Errors
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn rounds(&self) -> Result<Vec<RoundDiagnostics>> {
        if self.human_input != HumanInput::Managed {
            return Ok(Vec::new());
        }
        let store = self.kit.store.managed_input_store().await?;
        let spec = execution_spec(&*self.kit.store, &self.execution_id).await?;
        let mut out = Vec::new();
        for record in store.list_rounds(&self.execution_id).await? {
            out.push(diagnostics(&*store, &record, spec.as_ref()).await?);
        }
        Ok(out)
    }

    /// One round in any status: its requests (the public round) and its
    /// redacted diagnostics.
    ///
    /// # Errors
    /// `managed_input_invalid` with detail `not_found = true` for an unknown
    /// round (or a handle that is not managed); `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads; dropping the future (a lost `select!` branch) changes nothing.
    pub async fn round(&self, round_id: &str) -> Result<RoundDetails> {
        let missing =
            || not_found("managed-input round", round_id).with_detail("round_id", round_id);
        if self.human_input != HumanInput::Managed || round_id.is_empty() {
            return Err(missing());
        }
        let store = self.kit.store.managed_input_store().await?;
        let record = store
            .get_round(&RoundRef::new(self.execution_id.clone(), round_id))
            .await?
            .ok_or_else(missing)?;
        let spec = execution_spec(&*self.kit.store, &self.execution_id).await?;
        let diagnostics = diagnostics(&*store, &record, spec.as_ref()).await?;
        Ok(RoundDetails {
            round: record.pending,
            diagnostics,
            replayed: false,
        })
    }

    /// Waits until a round is pending (returns it), the execution finishes
    /// before asking (returns `None`), or `timeout` passes. Woken by the store's
    /// change signal; it re-reads the store at least every second.
    ///
    /// # Errors
    /// `timeout` when nothing happened in time; as
    /// [`pending_elicitation`](Self::pending_elicitation).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it waits by reading the store; dropping it loses no round, and a later call
    /// returns the same pending round.
    pub async fn wait_for_pending(
        &self,
        timeout: Duration,
    ) -> Result<Option<PendingElicitationRound>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changes = self.changes();
        loop {
            if let Some(pending) = self.pending_elicitation().await? {
                return Ok(Some(pending));
            }
            if self.snapshot().await?.lifecycle == ExecutionStatus::Finished {
                return Ok(None);
            }
            if !wait_until(&mut changes, Some(deadline)).await {
                return Err(
                    Error::timeout("execution did not request managed input in time")
                        .with_detail("operation", "execution.wait_for_pending")
                        .with_detail("wait_only", true),
                );
            }
        }
    }
}

/// Waits for the next wake-up of `changes` (a signalled change or its fallback poll);
/// `false` once `deadline` has passed, without waiting further.
async fn wait_until(
    changes: &mut ChangeSubscription,
    deadline: Option<tokio::time::Instant>,
) -> bool {
    match deadline {
        None => {
            changes.changed().await;
            true
        }
        Some(deadline) if tokio::time::Instant::now() >= deadline => false,
        Some(deadline) => {
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
            true
        }
    }
}

/// The redacted diagnostics of one stored round.
pub(crate) async fn diagnostics(
    store: &dyn ManagedInputStore,
    r: &ManagedInputRecord,
    spec: Option<&Value>,
) -> Result<RoundDiagnostics> {
    let round = RoundRef::of(r);
    let redacted_responses = store.redacted_responses(&round).await?;
    let answered_by = match redacted_responses {
        Some(_) => store.answered_by(&round).await?,
        None => None,
    };
    Ok(RoundDiagnostics::of(
        r,
        redacted_responses,
        answered_by,
        spec,
    ))
}

impl RoundDiagnostics {
    /// The diagnostics of round `r` with its stored redacted projection, of an execution
    /// whose agent was given `prompt`.
    pub(crate) fn of(
        r: &ManagedInputRecord,
        redacted_responses: Option<Map<String, Value>>,
        answered_by: Option<Actor>,
        spec: Option<&Value>,
    ) -> Self {
        Self {
            round_id: r.pending.round_id.clone(),
            round_index: r.round_index,
            status: r.status,
            request_keys: r.pending.requests.keys().cloned().collect(),
            server: r.pending.server.clone(),
            operation_kind: r.pending.operation_kind,
            operation_name: r.pending.operation_name.clone(),
            delivery_attempts: r.delivery_attempts,
            created_at: r.created_at,
            response_validated_at: r.response_validated_at,
            resolved_at: r.resolved_at,
            failed_at: r.failed_at,
            failure_code: r.failure_code.clone(),
            failure_message: r.failure_message.clone(),
            response_idempotency_key: r.response_idempotency_key.clone(),
            redacted_responses,
            answered_by,
            context: round_context(r, spec.and_then(spec_prompt)),
            transferable: transferable(r),
        }
    }
}

/// The result of a finished record: the worker's, or one rebuilt from the
/// record (recovery and cancellation before start write no result).
fn terminal_result(record: ExecutionRecord) -> Result<ExecutionResult> {
    if let Some(result) = record.result {
        return Ok(result);
    }
    let mut result = ExecutionResult::new(record.state())?;
    result.error = record.error;
    Ok(result)
}
