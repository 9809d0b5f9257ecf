//! The [`Coordinator`] of one execution and the life of each of its rounds: the budget,
//! the waiter registered before the round is persisted, `create_round` with its lease and
//! renewal, the wait on the waiter and the change signal under the deadline, the hand-over
//! of the responses, and the round's resolution.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_store::signal::Topic;
use m3_store::{
    AppendEvent, CreateRound, EVENT_ELICITATION_REQUEST, EVENT_ELICITATION_RESPONSE,
    ExecutionLeaseRef, ExecutionStore, LeaseRef, ManagedInputStore, RoundRef,
};
use m3_types::messages;
use m3_types::{
    Error, ExecutionStatus, ManagedInputRecord, PendingElicitationRound, ResponseMap, Result,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::instrument;

use super::notify::{self, ResponseNotifier, RoundPendingHook, Waiters};
use super::records;
use super::unattended::Unattended;
use crate::lease::LeaseKeeper;
use crate::lease::round::{self as renewal, RecoverySlot};
use crate::store_retry;
use crate::trace::MarkedRound;

/// Settings of one coordinator.
#[derive(Debug, Clone)]
pub(crate) struct CoordinatorSettings {
    pub(crate) round_limit: u32,
    pub(crate) lease: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) input_deadline: Option<Duration>,
    /// The fractions of a round's deadline window at which a reminder is appended.
    pub(crate) remind_at: Vec<f64>,
    /// The worker's renewer, which keeps the round leases in batches.
    pub(crate) keeper: LeaseKeeper,
    /// Cancelled when the worker stops and hands its waiting executions over: a wait for a
    /// transferable round then ends, leaving the round pending for the successor.
    pub(crate) handover: CancellationToken,
    /// Whether a wait for a transferable round that lasts [`PARK_AFTER`] is parked: the
    /// task ends, the worker keeps only the leases and an index entry, and the answer
    /// brings the execution back from the store (`m3 worker`; off for an embedded worker).
    pub(crate) park: bool,
}

/// How long a transferable round is waited for in memory before its execution is parked
/// (an answer within it is delivered without rebuilding anything).
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);

/// Why a wait ended with the round still pending, for this worker or another to go on.
#[derive(Debug, Clone)]
pub(crate) enum Release {
    /// The worker stops: the execution goes to another live worker.
    HandOver,
    /// The wait is parked: the round and its lease, and when a deadline, reminder or policy
    /// is due (store clock).
    Park {
        round: RoundRef,
        lease: LeaseRef,
        wake_at: Option<OffsetDateTime>,
    },
}

#[derive(Debug)]
pub(super) struct Active {
    pub(super) round: RoundRef,
    pub(super) lease: LeaseRef,
    pub(super) round_index: u32,
    pub(super) recovery: Arc<RecoverySlot>,
    pub(super) renewal: DropGuard,
    /// Whether another worker can go on with this round (see `AgentSession`).
    pub(super) transferable: bool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) rounds: u32,
    pub(super) closed: bool,
    pub(super) active: Option<Active>,
    /// The wait ended with the round pending, for a successor or for this worker later:
    /// nothing in this run may fail the round.
    pub(super) released: Option<Release>,
    /// Handed-over rounds whose answers hold values their schema marks secret.
    marked: Vec<MarkedRound>,
}

/// The managed-input coordinator of one execution.
#[derive(Debug)]
pub(crate) struct Coordinator {
    pub(super) executions: Arc<dyn ExecutionStore>,
    pub(super) store: Arc<dyn ManagedInputStore>,
    execution_lease: ExecutionLeaseRef,
    pub(super) notifier: Arc<ResponseNotifier>,
    pub(super) on_pending: Option<RoundPendingHook>,
    pub(super) settings: CoordinatorSettings,
    owner_id: String,
    state: Mutex<State>,
}

/// What the caller needs to continue after a response arrived.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) responses: ResponseMap,
}

impl Coordinator {
    pub(crate) fn new(
        executions: Arc<dyn ExecutionStore>,
        store: Arc<dyn ManagedInputStore>,
        execution_lease: ExecutionLeaseRef,
        notifier: Arc<ResponseNotifier>,
        on_pending: Option<RoundPendingHook>,
        settings: CoordinatorSettings,
    ) -> Self {
        let owner_id = format!("managed-runtime:{}", execution_lease.execution_id);
        Self {
            executions,
            store,
            execution_lease,
            notifier,
            on_pending,
            settings,
            owner_id,
            state: Mutex::new(State::default()),
        }
    }

    pub(super) fn execution_id(&self) -> &str {
        &self.execution_lease.execution_id
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// "Now" from the store's clock: round creation times and deadlines use it, so a
    /// test's manual clock drives them.
    pub(crate) fn now(&self) -> OffsetDateTime {
        m3_store::store_now(self.executions.clock().as_ref())
    }

    /// The per-round deadline for a round created now, if configured.
    pub(crate) fn deadline_for(&self, created_at: OffsetDateTime) -> Option<OffsetDateTime> {
        self.settings.input_deadline.map(|d| created_at + d)
    }

    /// Persists `pending` as the next round and waits for its response.
    ///
    /// Returns the unredacted responses, with the round in `delivery_started`; the caller
    /// sends them and runs [`Coordinator::record_delivery`] meanwhile.
    #[instrument(name = "m3.round.wait", skip_all, fields(execution.id = %pending.execution_id, round.id = %pending.round_id))]
    pub(crate) async fn await_round(
        &self,
        pending: PendingElicitationRound,
        operation_parameters: Map<String, Value>,
        transferable: bool,
    ) -> Result<Delivery> {
        let round_id = pending.round_id.clone();
        let deadline = pending.deadline;
        let (round_index, waiter) = {
            let state = self.lock();
            if state.closed {
                return Err(Error::cancelled("managed input coordinator is closed"));
            }
            if pending.execution_id != self.execution_id() {
                return Err(Error::from_code(
                    m3_types::ErrorCode::ManagedInputIdentityMismatch,
                    "elicitation execution identity mismatched",
                ));
            }
            if state.rounds >= self.settings.round_limit {
                return Err(Error::round_limit(messages::ROUND_LIMIT_EXCEEDED)
                    .with_detail("round_limit", self.settings.round_limit)
                    .with_detail("rounds", state.rounds));
            }
            if state.active.is_some() {
                return Err(Error::managed_input_state(
                    "more than one eliciting operation is active",
                ));
            }
            // Register the waiter before the round exists, so that a response
            // committed right after create_round is never missed.
            (state.rounds, self.notifier.register(&round_id)?)
        };
        // Likewise the store's signal, which also carries other processes' answers.
        let changes = self
            .executions
            .change_signal()
            .subscribe(Topic::Execution(self.execution_id().to_owned()));
        // Unregistered on every way out, also when a harness drops this future
        // (the codex harness does when the app-server dies mid-wait).
        let registration = notify::Registration::new(&self.notifier, &round_id);
        let result = self
            .create_and_wait(
                pending,
                (operation_parameters, transferable),
                round_index,
                deadline,
                Waiters {
                    local: &waiter,
                    changes,
                },
            )
            .await;
        drop(registration);
        match result {
            Ok(delivery) => Ok(delivery),
            Err(error) => {
                // A wait released for a handover or parking is not a failure.
                if self.lock().released.is_none() {
                    tracing::error!(%error, "managed elicitation round ended with an error");
                }
                self.fail_active(&error).await;
                Err(error)
            }
        }
    }

    /// The round's steps, in order: persist the round, start its lease renewal, enter
    /// `waiting_for_input`, await the response, hand it over for delivery.
    async fn create_and_wait(
        &self,
        pending: PendingElicitationRound,
        (operation_parameters, transferable): (Map<String, Value>, bool),
        round_index: u32,
        deadline: Option<OffsetDateTime>,
        waiters: Waiters<'_>,
    ) -> Result<Delivery> {
        let request_event = records::request_event(&pending, round_index)?;
        let unattended = pending.clone();
        let (round, lease) = self
            .persist_round(pending, (operation_parameters, transferable), round_index)
            .await?;
        let recovery = self.start_renewal(&round, &lease, round_index, transferable);
        self.enter_waiting(request_event).await?;
        if let Some(hook) = &self.on_pending {
            hook.call(self.execution_id(), &round.round_id);
        }
        let mut unattended =
            Unattended::load(&self.executions, unattended, &self.settings.remind_at).await;
        let record = self
            .await_response(
                &round,
                &lease,
                deadline,
                waiters,
                &recovery,
                &mut unattended,
            )
            .await?;
        self.hand_over(&round, &lease, &record, deadline).await
    }

    /// Stores the round under this coordinator's lease.
    async fn persist_round(
        &self,
        pending: PendingElicitationRound,
        (operation_parameters, transferable): (Map<String, Value>, bool),
        round_index: u32,
    ) -> Result<(RoundRef, LeaseRef)> {
        let operation_parameters =
            records::round_parameters(&pending, operation_parameters, transferable);
        let request = CreateRound::new(pending, self.owner_id.clone(), self.settings.lease)
            .with_round_index(round_index)
            .with_round_limit(self.settings.round_limit)
            .with_session_id(self.execution_id().to_owned())
            .with_operation_parameters(operation_parameters);
        // A repeat after a lost acknowledgement is an idempotent replay of the same round.
        let record = self
            .retrying("create_round", |_| self.store.create_round(request.clone()))
            .await?;
        tracing::info!(round_index, "managed elicitation round created");
        Ok((RoundRef::of(&record), LeaseRef::of(&record.lease)))
    }

    /// Starts renewing the round's lease and makes it the active round (from here on a
    /// failure fails it). Returns where the renewal reports a lost lease.
    pub(super) fn start_renewal(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        round_index: u32,
        transferable: bool,
    ) -> Arc<RecoverySlot> {
        let recovery = Arc::new(RecoverySlot::default());
        let token = CancellationToken::new();
        renewal::spawn(
            &self.settings.keeper,
            Arc::clone(&self.store),
            round.clone(),
            lease.clone(),
            self.settings.lease,
            self.settings.renew_every,
            Arc::clone(&recovery),
            token.clone(),
        );
        self.lock().active = Some(Active {
            round: round.clone(),
            lease: lease.clone(),
            round_index,
            recovery: Arc::clone(&recovery),
            renewal: token.drop_guard(),
            transferable,
        });
        recovery
    }

    /// Records the (redacted) request event and moves the execution to
    /// `waiting_for_input`; any failure is a `managed_input_state` setup failure.
    async fn enter_waiting(&self, request_event: Value) -> Result<()> {
        self.setup_waiting(request_event).await.map_err(|error| {
            Error::managed_input_state("managed-input setup failed")
                .with_detail("cause", error.to_string())
                .with_source(error)
        })
    }

    /// Checks the committed response against the deadline, then starts its delivery: what
    /// the MCP retry carries.
    pub(super) async fn hand_over(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        record: &ManagedInputRecord,
        deadline: Option<OffsetDateTime>,
    ) -> Result<Delivery> {
        let responses = record.responses.clone().ok_or_else(|| {
            Error::managed_input_state("managed-input response commit is missing")
        })?;
        if let (Some(deadline), Some(at)) = (deadline, record.response_validated_at)
            && at > deadline
        {
            return Err(records::deadline_error(round));
        }
        // The compare-and-set that makes this the one delivery attempt; the bookkeeping
        // that does not guard the retry waits for `record_delivery`.
        // Repeated after a lost connection: a repeat of a committed step is idempotent.
        self.retrying("start_delivery", |_| {
            self.store.start_delivery(round, lease)
        })
        .await?;
        if let Some(marked) = MarkedRound::of(&record.pending, &responses) {
            self.lock().marked.push(marked);
        }
        Ok(Delivery { responses })
    }

    /// The delivered rounds whose answers hold values their request's schema marks secret
    /// (`format: password`, `writeOnly`): the trace redacts them too.
    pub(crate) fn marked_rounds(&self) -> Vec<MarkedRound> {
        self.lock().marked.clone()
    }

    /// Records the (redacted) response event of the round whose delivery started and resumes
    /// the turn (`waiting_for_input -> running_turn`). The caller runs it while the MCP retry
    /// is in flight: neither write guards the retry, and a worker that dies before them is
    /// failed closed by recovery exactly as one that dies during the retry.
    pub(crate) async fn record_delivery(&self) -> Result<()> {
        let Some((round, round_index)) = self
            .lock()
            .active
            .as_ref()
            .map(|a| (a.round.clone(), a.round_index))
        else {
            return Err(Error::managed_input_state(
                "no managed-input round is being delivered",
            ));
        };
        let redacted = self
            .retrying("redacted_responses", |_| {
                self.store.redacted_responses(&round)
            })
            .await?
            .unwrap_or_default();
        let event = AppendEvent::new(
            self.execution_id(),
            EVENT_ELICITATION_RESPONSE,
            json!({"round_id": round.round_id, "round_index": round_index, "responses": redacted}),
        )
        .with_lease(self.execution_lease.clone());
        self.retrying("append_event", |_| {
            self.executions.append_event(event.clone())
        })
        .await?;
        self.transition(ExecutionStatus::RunningTurn).await?;
        Ok(())
    }

    async fn setup_waiting(&self, request_event: Value) -> Result<()> {
        let event = AppendEvent::new(
            self.execution_id(),
            EVENT_ELICITATION_REQUEST,
            request_event,
        )
        .with_lease(self.execution_lease.clone());
        self.retrying("append_event", |_| {
            self.executions.append_event(event.clone())
        })
        .await?;
        let current = self
            .retrying("get_execution", |_| {
                self.executions.get_execution(self.execution_id())
            })
            .await?;
        if current.map(|r| r.lifecycle) != Some(ExecutionStatus::RunningTurn) {
            return Err(Error::managed_input_state(
                "managed input requires an active running turn",
            ));
        }
        self.transition(ExecutionStatus::WaitingForInput).await?;
        Ok(())
    }

    /// Runs a store call of this coordinator, repeated after a lost database connection
    /// for at most the lease duration ([`store_retry::retrying`]).
    pub(super) async fn retrying<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T>
    where
        F: FnMut(bool) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        store_retry::retrying(what, self.settings.lease, attempt).await
    }

    /// Moves the execution to `to` under its lease, riding out a lost connection.
    async fn transition(&self, to: ExecutionStatus) -> Result<()> {
        store_retry::transition(
            &*self.executions,
            self.execution_id(),
            to,
            &self.execution_lease,
            self.settings.lease,
        )
        .await
        .map(drop)
    }

    /// The active round was delivered and the server answered: `mark_delivered`
    /// and `resolve` it. `operation_complete` is informational (the budget is per
    /// execution).
    #[instrument(skip(self), fields(execution.id = %self.execution_lease.execution_id), err)]
    pub(crate) async fn resolve_round(&self, operation_complete: bool) -> Result<()> {
        let Some((round, lease)) = self
            .lock()
            .active
            .as_ref()
            .map(|a| (a.round.clone(), a.lease.clone()))
        else {
            return Err(Error::managed_input_state(
                "managed-input round identity mismatched",
            ));
        };
        // The server has the answer: a lost connection must not turn that into a failure,
        // so both (idempotent) steps are repeated until the database is back.
        let resolved = async {
            self.retrying("mark_delivered", |_| {
                self.store.mark_delivered(&round, &lease)
            })
            .await?;
            self.retrying("resolve", |_| self.store.resolve(&round, &lease))
                .await
        }
        .await;
        match resolved {
            Ok(_) => {
                let mut state = self.lock();
                state.rounds += 1;
                state.active = None;
                tracing::info!(round.id = %round.round_id, operation_complete, "managed elicitation round resolved");
                Ok(())
            }
            Err(error) => {
                let failure = Error::managed_input_state("managed-input resolution failed")
                    .with_detail("cause", error.to_string())
                    .with_source(error);
                self.fail_active(&failure).await;
                Err(failure)
            }
        }
    }

    /// Moves the execution back to `running_turn` if a round failed while it waited.
    pub(super) async fn resume_running_turn(&self) {
        if let Ok(Some(record)) = self.executions.get_execution(self.execution_id()).await
            && record.lifecycle == ExecutionStatus::WaitingForInput
        {
            let _ = self.transition(ExecutionStatus::RunningTurn).await;
        }
    }
}
