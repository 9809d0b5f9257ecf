//! Handing a waiting execution to another live worker when this one stops, and taking one
//! over.
//!
//! The stopping worker ends the wait of a transferable round (the round stays pending),
//! records where the script is (the `execution.checkpoint` event: the step and the redacted
//! trace so far) under its lease, and hands the execution lease to a live worker of the
//! registry with one compare-and-set ([`ExecutionStore::hand_over`]). The successor finds
//! executions whose lease names it, waits for the round's answer (holding no connection
//! meanwhile), sends the retry and runs the script on from that step. A worker that
//! disappears hands nothing over: its rounds fail closed when its leases expire.

use std::time::Duration;

use m3_mcp::LogicalOperation;
use m3_store::{AppendEvent, ExecutionLeaseRef, ExecutionRecord, ExecutionStore, FinishExecution};
use m3_types::{Error, ExecutionOutcome, ManagedInputRecord, ManagedInputStatus, Result};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{Stops, Worker, parse_spec};
use crate::coordinator::Coordinator;
use crate::harness::{OperationLog, ResumedOperation};
use crate::spec::ExecutionSpec;
use crate::trace::ExecutionTrace;

/// Kind of the event a stopping worker appends before it hands an execution over: the
/// script step in progress and the redacted trace so far (`{"step", "trace"}`).
pub const EVENT_EXECUTION_CHECKPOINT: &str = "execution.checkpoint";

/// How often a stopping worker looks for a successor again when none is live.
const SUCCESSOR_RETRY: Duration = Duration::from_millis(500);

/// A registry entry older than this is not offered an execution.
const LIVE_WITHIN: Duration = Duration::from_secs(30);

/// What a successor needs to go on with a handed-over execution.
#[derive(Debug)]
pub(crate) struct Adoption {
    /// The script step whose round was handed over.
    pub(crate) step: usize,
    round: ManagedInputRecord,
    operations: Vec<LogicalOperation>,
    transcript: Vec<String>,
    /// Rounds of the round's operation so far, this one included.
    completed_rounds: u32,
}

impl Adoption {
    /// Restores the predecessor's trace into `log`, waits for the round's answer and starts
    /// its delivery; returns the operation the session continues.
    pub(crate) async fn take_over(
        &self,
        coordinator: &Coordinator,
        log: &OperationLog,
    ) -> Result<ResumedOperation> {
        let pending = &self.round.pending;
        log.restore(
            self.operations.clone(),
            self.transcript.clone(),
            &pending.logical_operation_id,
        );
        let delivery = coordinator.adopt(self.round.clone()).await?;
        Ok(ResumedOperation {
            server: pending.server.clone(),
            kind: pending.operation_kind,
            name: pending.operation_name.clone(),
            request_state: pending.request_state.clone(),
            completed_rounds: self.completed_rounds,
            responses: delivery.responses,
        })
    }
}

impl Worker {
    /// Hands the execution (its wait ended for a handover) to a live worker: records the
    /// checkpoint, then offers it until one takes it or `drained` fires. `None`: nobody took
    /// it (the caller fails it closed, as before handovers existed).
    pub(super) async fn pass_on(
        &self,
        spec: &ExecutionSpec,
        lease: &ExecutionLeaseRef,
        log: &OperationLog,
        drained: &CancellationToken,
    ) -> Option<ExecutionRecord> {
        if let Err(error) = self.record_checkpoint(spec, lease, log).await {
            tracing::warn!(%error, "could not record where the execution is; failing it closed");
            return None;
        }
        loop {
            match self.offer(lease, spec).await {
                Ok(Some(record)) => return Some(record),
                Ok(None) => {}
                Err(error) if error.is_conflict() || error.is_state() => {
                    tracing::warn!(%error, "the execution's lease is gone; recovery ends it");
                    return None;
                }
                Err(error) => {
                    tracing::warn!(%error, "handing the execution over failed; trying again")
                }
            }
            tokio::select! {
                () = tokio::time::sleep(SUCCESSOR_RETRY) => {}
                () = drained.cancelled() => return None,
            }
        }
    }

    /// Appends the checkpoint event under the lease.
    async fn record_checkpoint(
        &self,
        spec: &ExecutionSpec,
        lease: &ExecutionLeaseRef,
        log: &OperationLog,
    ) -> Result<()> {
        let step = log
            .step()
            .ok_or_else(|| Error::managed_input_state("the harness did not report its position"))?;
        let trace = ExecutionTrace {
            harness: spec.agent.harness_name().to_owned(),
            prompt: spec.prompt.clone(),
            final_text: Some(log.transcript().join("\n")),
            operations: log.snapshot(),
            token_usage: None,
        };
        let (trace, _) = trace.redacted(&log.secrets(), &log.marked_rounds())?;
        let payload = json!({"step": step, "trace": trace});
        let event = AppendEvent::new(&lease.execution_id, EVENT_EXECUTION_CHECKPOINT, payload)
            .with_lease(lease.clone());
        self.store().append_event(event).await.map(drop)
    }

    /// One offer: hands the lease to a live successor, if there is one.
    async fn offer(
        &self,
        lease: &ExecutionLeaseRef,
        spec: &ExecutionSpec,
    ) -> Result<Option<ExecutionRecord>> {
        let Some(successor) = successor(self.store().as_ref(), lease).await? else {
            return Ok(None);
        };
        let record = self
            .store()
            .hand_over(lease, &successor, spec.lease())
            .await?;
        tracing::info!(successor = %successor, "execution handed over");
        Ok(Some(record))
    }

    /// Goes on with an execution another worker handed to this one (its lease names this
    /// worker): waits for the round's answer, sends the retry, runs the script on.
    ///
    /// # Errors
    /// As [`run`](Self::run); an execution whose checkpoint or round cannot be read is failed
    /// closed (`managed_input_recovery_unavailable`).
    pub(crate) async fn run_adopted(
        &self,
        record: ExecutionRecord,
        stops: Stops,
    ) -> Result<ExecutionRecord> {
        let lease =
            record.lease.as_ref().map(|l| l.to_ref()).ok_or_else(|| {
                Error::managed_input_state("a handed-over execution has no lease")
            })?;
        let spec = parse_spec(&record)?;
        drop(record);
        self.store().renew_lease(&lease, spec.lease()).await?;
        match self.load_adoption(&lease.execution_id).await {
            Ok(adoption) => self.drive(spec, lease, stops, Some(adoption)).await,
            Err(error) => {
                tracing::warn!(%error, "cannot go on with a handed-over execution; failing it closed");
                let error = Error::managed_input_recovery(m3_types::messages::RECOVERY_UNAVAILABLE)
                    .with_detail("reason", "handover_incomplete");
                let request = FinishExecution::new(&lease.execution_id, ExecutionOutcome::Failed)
                    .with_error(error.to_error_info())
                    .with_lease(lease);
                self.store().finish(request).await
            }
        }
    }

    /// The checkpoint and the open round of a handed-over execution.
    async fn load_adoption(&self, execution_id: &str) -> Result<Adoption> {
        let events = self.store().list_events(execution_id, None).await?;
        let checkpoint = events
            .iter()
            .rev()
            .find(|e| e.kind == EVENT_EXECUTION_CHECKPOINT)
            .ok_or_else(|| Error::managed_input_state("no checkpoint was recorded"))?;
        let step = checkpoint.payload["step"]
            .as_u64()
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| Error::managed_input_state("the checkpoint has no step"))?;
        let trace = &checkpoint.payload["trace"];
        let operations: Vec<LogicalOperation> = serde_json::from_value(trace["operations"].clone())
            .map_err(|e| {
                Error::managed_input_state("the checkpoint's operations are unreadable")
                    .with_source(e)
            })?;
        let transcript = match &trace["final_text"] {
            Value::String(text) if !text.is_empty() => vec![text.clone()],
            _ => Vec::new(),
        };
        let rounds = self
            .store()
            .managed_input_store()
            .await?
            .list_rounds(execution_id)
            .await?;
        let round = rounds
            .iter()
            .find(|r| {
                matches!(
                    r.status,
                    ManagedInputStatus::Pending | ManagedInputStatus::ResponseValidated
                )
            })
            .cloned()
            .ok_or_else(|| Error::managed_input_state("the handed-over round is not open"))?;
        let completed_rounds = rounds
            .iter()
            .filter(|r| r.pending.logical_operation_id == round.pending.logical_operation_id)
            .count();
        Ok(Adoption {
            step,
            round,
            operations,
            transcript,
            completed_rounds: u32::try_from(completed_rounds).unwrap_or(u32::MAX),
        })
    }
}

/// A live, running worker other than the lease's owner; workers that only take handovers
/// first, then the one picked by the execution id (spreading many executions over many).
async fn successor(
    store: &dyn ExecutionStore,
    lease: &ExecutionLeaseRef,
) -> Result<Option<String>> {
    let registry = store.worker_registry().await?;
    let now = m3_store::store_now(store.clock().as_ref());
    let mut live: Vec<_> = registry
        .workers()
        .await?
        .into_iter()
        .filter(|w| {
            w.worker_id != lease.owner_id
                && w.state == m3_store::workers::WorkerState::Running
                && w.is_live(now, LIVE_WITHIN)
        })
        .collect();
    if live.iter().any(|w| w.handover_only) {
        live.retain(|w| w.handover_only);
    }
    live.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
    if live.is_empty() {
        return Ok(None);
    }
    let spread = lease.execution_id.bytes().map(usize::from).sum::<usize>() % live.len();
    Ok(live.into_iter().nth(spread).map(|w| w.worker_id))
}
