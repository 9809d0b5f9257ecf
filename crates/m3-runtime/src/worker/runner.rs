//! The [`Worker`] and how it runs one execution: claim or load it, take its lease, run
//! the harness's turn under the coordinator against cancel requests, the timeout and
//! the lease's loss, then write the terminal result.

use std::collections::BTreeMap;
use std::sync::Arc;

use m3_store::{
    AcquireLease, ClaimedExecution, ExecutionLeaseRef, ExecutionRecord, ExecutionStore,
    FinishExecution,
};
use m3_types::{
    Error, ExecutionOutcome, ExecutionResult, ExecutionStatus, HumanInput, Result, RoundLimits,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::background;
use super::ending::Ending;
use super::released::{Adoption, Held, RunEnd};
use crate::coordinator::{Coordinator, CoordinatorSettings, ResponseNotifier, RoundPendingHook};
use crate::harness::{
    AgentSession, Harness, InputPolicy, OperationLog, SessionSetup, harness_for, harness_resuming,
};
use crate::lease::LeaseKeeper;
use crate::spec::ExecutionSpec;
use crate::store_retry;
use crate::telemetry;
use crate::trace::ExecutionTrace;

/// Runs executions stored in an [`ExecutionStore`].
///
/// One worker (cheap to clone) serves a kit; each execution runs in its own task
/// with its own lease, owner id `m3-worker:<ulid>`.
#[derive(Debug, Clone)]
pub struct Worker {
    executions: Arc<dyn ExecutionStore>,
    notifier: Arc<ResponseNotifier>,
    env: Arc<BTreeMap<String, String>>,
    on_round_pending: Option<RoundPendingHook>,
    /// Bounds on the rounds the servers of its executions send.
    round_limits: RoundLimits,
    /// Where OAuth tokens of HTTP servers are kept and who is shown an authorization URL.
    oauth: m3_mcp::oauth::OAuthContext,
    /// Renews the leases of every execution this worker (and its clones) runs, in batches.
    keeper: LeaseKeeper,
}

/// How an execution ended, for the terminal write.
struct Ended {
    final_text: Option<String>,
    error: Option<Error>,
    /// The outcome when it is not the one `error` implies.
    outcome: Option<ExecutionOutcome>,
}

/// The local signals of one running execution: cancel it, fail it closed (the drain
/// timeout), hand it to another worker (a stop while it waits for a transferable round).
#[derive(Debug, Clone, Default)]
pub(crate) struct Stops {
    pub(crate) cancel: CancellationToken,
    pub(crate) drained: CancellationToken,
    pub(crate) handover: CancellationToken,
    /// Park a long wait for a transferable round (see `CoordinatorSettings::park`).
    pub(crate) park: bool,
}

/// What ends a running turn early.
struct Watch<'a> {
    /// How long the turn may still run (the execution timeout, less what a predecessor or
    /// an earlier part of this run used).
    timeout: std::time::Duration,
    cancel: &'a CancellationToken,
    drained: &'a CancellationToken,
    lost: &'a CancellationToken,
    lost_error: &'a background::LostError,
}

impl Worker {
    /// A worker on `executions`, waking coordinators through `notifier` and
    /// adding `env` to every server binding's environment.
    pub fn new(
        executions: Arc<dyn ExecutionStore>,
        notifier: Arc<ResponseNotifier>,
        env: BTreeMap<String, String>,
    ) -> Self {
        Self {
            executions,
            notifier,
            env: Arc::new(env),
            on_round_pending: None,
            round_limits: RoundLimits::new(),
            oauth: m3_mcp::oauth::OAuthContext::new(),
            keeper: LeaseKeeper::default(),
        }
    }

    /// This worker, calling `hook` whenever a round of one of its executions becomes
    /// pending (what `m3 --json worker` prints as `round_pending`).
    #[must_use]
    pub fn with_round_pending(mut self, hook: RoundPendingHook) -> Self {
        self.on_round_pending = Some(hook);
        self
    }

    /// This worker, bounding every round a server sends by `limits` (default
    /// [`RoundLimits::new`]); a round over one fails its operation with `protocol_error`.
    #[must_use]
    pub fn with_round_limits(mut self, limits: RoundLimits) -> Self {
        self.round_limits = limits;
        self
    }

    /// This worker, keeping the OAuth tokens of its executions' HTTP servers and showing
    /// authorization URLs as `oauth` says (default: tokens in memory, nobody to show a
    /// URL to, so only the client credentials grant can succeed).
    #[must_use]
    pub fn with_oauth(mut self, oauth: m3_mcp::oauth::OAuthContext) -> Self {
        self.oauth = oauth;
        self
    }

    /// The renewer of this worker's leases.
    pub(super) fn keeper(&self) -> &LeaseKeeper {
        &self.keeper
    }

    /// The store this worker runs executions of.
    pub fn store(&self) -> &Arc<dyn ExecutionStore> {
        &self.executions
    }

    /// The notifier handles use after committing a response.
    pub fn notifier(&self) -> &Arc<ResponseNotifier> {
        &self.notifier
    }

    /// Runs execution `execution_id` to its end and returns the finished record.
    ///
    /// `cancel` is a local cancellation (the durable cancel flag is polled too).
    ///
    /// # Errors
    /// `managed_input_conflict` when the execution does not exist or is leased by
    /// another worker; `managed_input_state` when it already finished;
    /// `invalid_argument` for a spec this runtime cannot run; `storage_error`.
    /// Failures of the execution itself are not errors: they are its outcome.
    pub async fn run(
        &self,
        execution_id: &str,
        cancel: CancellationToken,
    ) -> Result<ExecutionRecord> {
        let run = async {
            let (record, spec) = self.load(execution_id).await?;
            let lease = self.claim(&record, &spec).await?;
            drop(record);
            let stops = Stops {
                cancel,
                ..Stops::default()
            };
            self.drive(spec, lease, stops, None).await?.into_record()
        };
        run.instrument(telemetry::execution_span(execution_id))
            .await
    }

    /// Runs an execution this worker claimed from the queue
    /// ([`ExecutionStore::claim_queued`]) to its end and returns the finished record.
    ///
    /// The lease is renewed at once to the execution's own lease duration. `cancel` is a
    /// local cancellation; `drained` ends the execution closed, exactly as recovery would
    /// (managed: `failed` with `managed_input_recovery_unavailable` and its unresolved
    /// rounds `recovery_unavailable`; otherwise `interrupted`): a worker stopping after its
    /// drain timeout.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn run_claimed(
        &self,
        claimed: ClaimedExecution,
        cancel: CancellationToken,
        drained: CancellationToken,
    ) -> Result<ExecutionRecord> {
        let stops = Stops {
            cancel,
            drained,
            ..Stops::default()
        };
        self.run_claimed_stoppable(claimed, stops)
            .await?
            .into_record()
    }

    /// [`run_claimed`](Self::run_claimed) with every local signal, handing over included.
    pub(crate) async fn run_claimed_stoppable(
        &self,
        claimed: ClaimedExecution,
        stops: Stops,
    ) -> Result<RunEnd> {
        let span = telemetry::execution_span(&claimed.record.execution_id);
        self.run_claimed_in_span(claimed, stops)
            .instrument(span)
            .await
    }

    async fn run_claimed_in_span(&self, claimed: ClaimedExecution, stops: Stops) -> Result<RunEnd> {
        let lease = claimed.lease.to_ref();
        let parsed = parse_spec(&claimed.record);
        // The stored record (its spec as JSON) is not needed past here: a waiting execution
        // should not hold it for as long as the answer takes.
        drop(claimed);
        let spec = match parsed {
            Ok(spec) => spec,
            Err(error) => {
                // A spec this build cannot read fails the execution instead of leaving it.
                let request = FinishExecution::new(&lease.execution_id, ExecutionOutcome::Failed)
                    .with_error(error.to_error_info())
                    .with_lease(lease.clone());
                return self
                    .executions
                    .finish(request)
                    .await
                    .map(|record| RunEnd::Record(Box::new(record)));
            }
        };
        self.executions.renew_lease(&lease, spec.lease()).await?;
        self.drive(spec, lease, stops, None).await
    }

    /// Runs a leased execution in lifecycle `starting` (or, `adoption`, one handed over while
    /// it waited) to its end, or hands it to another worker.
    pub(super) async fn drive(
        &self,
        spec: ExecutionSpec,
        lease: ExecutionLeaseRef,
        stops: Stops,
        adoption: Option<Adoption>,
    ) -> Result<RunEnd> {
        let Stops {
            cancel,
            drained,
            handover,
            park,
        } = stops;
        let started = tokio::time::Instant::now();
        let timeout = adoption
            .as_ref()
            .and_then(|a| a.timeout_left)
            .unwrap_or_else(|| spec.timeout());
        let execution_id = lease.execution_id.as_str();
        let stop = CancellationToken::new();
        let _stop_guard = stop.clone().drop_guard();
        let lost = CancellationToken::new();
        let lost_error = background::spawn_heartbeat(
            &self.keeper,
            Arc::clone(&self.executions),
            lease.clone(),
            spec.lease(),
            spec.renew_every(),
            lost.clone(),
            stop.clone(),
        );
        background::spawn_cancel_poll(
            Arc::clone(&self.executions),
            execution_id.to_owned(),
            cancel.clone(),
            stop.clone(),
        );
        let log = Arc::new(OperationLog::default());
        let coordinator = self
            .coordinator_for(&spec, &lease, (&handover, park))
            .await?;
        if let (Some(adoption), Some(coordinator)) = (&adoption, &coordinator) {
            coordinator.hold(adoption.round());
        }
        let mut ending = if self.executions.is_cancel_requested(execution_id).await? {
            Ending::Cancelled
        } else {
            let watch = Watch {
                timeout,
                cancel: &cancel,
                drained: &drained,
                lost: &lost,
                lost_error: &lost_error,
            };
            let turn = Turn {
                spec: &spec,
                lease: &lease,
                coordinator: coordinator.clone(),
                log: Arc::clone(&log),
                adoption,
            };
            self.race(turn, watch).await
        };
        if let Some(release) = coordinator.as_ref().and_then(|c| c.released()) {
            // Passed on or parked while its lease (renewed by the heartbeat) is still this
            // worker's.
            let left = timeout.saturating_sub(started.elapsed());
            let held = Held {
                spec: &spec,
                lease: &lease,
                log: &log,
                timeout_left: left,
            };
            match Box::pin(self.release(held, release, &drained)).await {
                Ok(end) => return Ok(end),
                Err(fallback) => ending = fallback,
            }
        }
        let outcome = ending.outcome_override(&spec);
        let (final_text, error) = ending.into_outcome(&spec);
        if let Some(coordinator) = &coordinator {
            let closing = error
                .as_ref()
                .map(Error::clone_without_source)
                .unwrap_or_else(|| Error::cancelled("managed input session closed"));
            coordinator.close(&closing).await;
            log.add_marked_rounds(coordinator.marked_rounds());
        }
        stop.cancel();
        let ended = Ended {
            final_text,
            error,
            outcome,
        };
        // Boxed, like every step that is not alive while the execution waits for an answer:
        // the task keeps only the waiting path's state for its whole life.
        Box::pin(self.finish(&spec, &lease, ended, &log))
            .await
            .map(|record| RunEnd::Record(Box::new(record)))
    }

    /// The stored execution and its spec.
    async fn load(&self, execution_id: &str) -> Result<(ExecutionRecord, ExecutionSpec)> {
        let record = self
            .executions
            .get_execution(execution_id)
            .await?
            .ok_or_else(|| {
                Error::managed_input_conflict("execution does not exist")
                    .with_detail("execution_id", execution_id)
            })?;
        let spec = parse_spec(&record)?;
        Ok((record, spec))
    }

    /// Takes the execution lease under a fresh owner id and moves to `starting`.
    async fn claim(
        &self,
        record: &ExecutionRecord,
        spec: &ExecutionSpec,
    ) -> Result<ExecutionLeaseRef> {
        let execution_id = record.execution_id.as_str();
        let owner = format!("m3-worker:{}", m3_types::new_id());
        let lease = self
            .executions
            .acquire_lease(AcquireLease::new(execution_id, owner, spec.lease()))
            .await?;
        let lease = lease.to_ref();
        if record.lifecycle != ExecutionStatus::Starting {
            self.executions
                .transition(execution_id, ExecutionStatus::Starting, Some(&lease))
                .await?;
        }
        Ok(lease)
    }

    /// The managed-input coordinator, when `human_input = managed`.
    async fn coordinator_for(
        &self,
        spec: &ExecutionSpec,
        lease: &ExecutionLeaseRef,
        (handover, park): (&CancellationToken, bool),
    ) -> Result<Option<Arc<Coordinator>>> {
        if spec.human_input != HumanInput::Managed {
            return Ok(None);
        }
        let store = self.executions.managed_input_store().await?;
        Ok(Some(Arc::new(Coordinator::new(
            Arc::clone(&self.executions),
            store,
            lease.clone(),
            Arc::clone(&self.notifier),
            self.on_round_pending.clone(),
            CoordinatorSettings {
                round_limit: spec.elicitation_round_limit,
                lease: spec.lease(),
                renew_every: spec.renew_every(),
                input_deadline: spec.input_deadline_ms.map(std::time::Duration::from_millis),
                remind_at: spec.remind_at(),
                keeper: self.keeper.clone(),
                handover: handover.clone(),
                park,
            },
        ))))
    }

    /// Runs the turn against cancellation, the execution timeout and lease loss;
    /// a harness that interrupts gracefully gets [`INTERRUPT_GRACE`] to do so.
    async fn race(&self, turn: Turn<'_>, watch: Watch<'_>) -> Ending {
        let spec = turn.spec;
        let interrupt = CancellationToken::new();
        // A harness that cannot be built fails the execution (inside `body`), not `run`.
        let harness = match &turn.adoption {
            None => harness_for(&spec.agent),
            Some(adoption) => harness_resuming(&spec.agent, adoption.step),
        };
        let graceful = harness.as_ref().is_ok_and(|h| h.interrupts_gracefully());
        let body = self.body(harness, turn, interrupt.clone());
        tokio::pin!(body);
        let ending = tokio::select! {
            done = &mut body => Ending::Done(done),
            () = watch.cancel.cancelled() => Ending::Cancelled,
            () = watch.drained.cancelled() => Ending::Drained,
            () = tokio::time::sleep(watch.timeout) => Ending::TimedOut,
            () = watch.lost.cancelled() => Ending::LeaseLost(watch.lost_error.take().unwrap_or_else(|| {
                Error::managed_input_recovery("managed interaction cannot be resumed safely after worker loss")
            })),
        };
        if !matches!(ending, Ending::Done(_)) && graceful {
            // Let the harness interrupt its agent (Codex: `turn/interrupt`).
            interrupt.cancel();
            let _ = tokio::time::timeout(INTERRUPT_GRACE, &mut body).await;
        }
        ending
    }

    async fn body(
        &self,
        harness: Result<Box<dyn Harness>>,
        turn: Turn<'_>,
        interrupt: CancellationToken,
    ) -> Result<String> {
        let Turn {
            spec,
            lease,
            coordinator,
            log,
            adoption,
        } = turn;
        let harness = harness?;
        // A handed-over execution waits for its round's answer before it connects anything.
        let resumed = match (&adoption, &coordinator) {
            (Some(adoption), Some(coordinator)) => {
                Some(Box::pin(adoption.take_over(coordinator, &log)).await?)
            }
            (Some(_), None) => {
                return Err(Error::managed_input_state(
                    "only a managed execution is handed over",
                ));
            }
            (None, _) => None,
        };
        let input = match (coordinator, &spec.elicitation_plan) {
            (Some(coordinator), _) => InputPolicy::Managed(coordinator),
            (None, Some(plan)) => InputPolicy::Plan(plan.matcher()),
            (None, None) => InputPolicy::Fail,
        };
        let mut session = Box::pin(AgentSession::connect(SessionSetup {
            execution_id: &lease.execution_id,
            servers: &spec.servers,
            env: &self.env,
            tools: spec.tool_selection()?,
            oauth: super::oauth_prompt::for_execution(&self.oauth, &self.executions, lease),
            input,
            round_limit: spec.elicitation_round_limit,
            round_limits: self.round_limits,
            permission_policy: spec.permission_policy,
            interrupt,
            log,
            clock: self.executions.clock(),
            connect: harness.connects_servers(),
        }))
        .await?;
        let (store, id) = (&*self.executions, lease.execution_id.as_str());
        match resumed {
            Some(resumed) => session.resume_with(resumed),
            None => {
                store_retry::transition(
                    store,
                    id,
                    ExecutionStatus::RunningTurn,
                    lease,
                    spec.lease(),
                )
                .await?;
            }
        }
        let text = harness.run_turn(&spec.prompt, &mut session).await;
        Box::pin(session.close()).await;
        let text = text?;
        store_retry::transition(store, id, ExecutionStatus::Idle, lease, spec.lease()).await?;
        Ok(text)
    }

    async fn finish(
        &self,
        spec: &ExecutionSpec,
        lease: &ExecutionLeaseRef,
        ended: Ended,
        log: &OperationLog,
    ) -> Result<ExecutionRecord> {
        let Ended {
            final_text,
            error,
            outcome,
        } = ended;
        let outcome = outcome.unwrap_or_else(|| ExecutionOutcome::for_error(error.as_ref()));
        let trace = ExecutionTrace {
            harness: spec.agent.harness_name().to_owned(),
            prompt: spec.prompt.clone(),
            final_text,
            operations: log.snapshot(),
            token_usage: log.token_usage(),
        };
        let execution_id = lease.execution_id.as_str();
        // After the turn, a lost database connection must not decide the outcome (an answer
        // may have been delivered): the reads and the finish are repeated while the lease
        // can still be live; `finish` is idempotent for the same request.
        let current = store_retry::retrying("get_execution", spec.lease(), |_| {
            self.executions.get_execution(execution_id)
        })
        .await?
        .ok_or_else(|| {
            Error::not_found(format!("execution '{execution_id}' does not exist"))
                .with_detail("execution_id", execution_id)
        })?;
        let mut snapshot = current.state();
        snapshot.lifecycle = ExecutionStatus::Finished;
        snapshot.outcome = Some(outcome);
        snapshot.finished_at = Some(m3_types::Clock::now(&m3_types::SystemClock));
        snapshot.tool_call_count = trace.tool_calls().count() as u64;
        let mut result = ExecutionResult::new(snapshot)?;
        result.activity_health = trace.activity_health();
        trace.persist_into(
            &mut result,
            error.as_ref(),
            &log.secrets(),
            &log.marked_rounds(),
        )?;
        let stored_error = result.error.clone();
        let mut request = FinishExecution::new(execution_id, outcome)
            .with_result(result)
            .with_lease(lease.clone());
        if let Some(error) = stored_error {
            request = request.with_error(error);
        }
        let finished = store_retry::retrying("finish", spec.lease(), |_| {
            self.executions.finish(request.clone())
        })
        .await;
        match finished {
            Ok(finished) => {
                tracing::info!(outcome = outcome.as_str(), "execution finished");
                Ok(finished)
            }
            Err(finish_error) => {
                // The lease is gone: recovery (in any process) terminalizes it.
                tracing::warn!(error = %finish_error, "could not finish the execution; left for recovery");
                Err(finish_error)
            }
        }
    }
}

/// How long a harness that interrupts gracefully gets after cancel or timeout.
const INTERRUPT_GRACE: std::time::Duration = std::time::Duration::from_secs(8);

/// One turn to run: the execution, its coordinator and log, and what a predecessor handed
/// over (if it did).
struct Turn<'a> {
    spec: &'a ExecutionSpec,
    lease: &'a ExecutionLeaseRef,
    coordinator: Option<Arc<Coordinator>>,
    log: Arc<OperationLog>,
    adoption: Option<Adoption>,
}

/// The stored spec of `record`.
pub(super) fn parse_spec(record: &ExecutionRecord) -> Result<ExecutionSpec> {
    serde_json::from_value(record.spec.clone())
        .map_err(|e| Error::model_validation("stored execution spec is invalid").with_source(e))
}
