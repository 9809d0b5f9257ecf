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
use m3_types::{Error, ExecutionOutcome, ManagedInputStatus, Result};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ending::Ending;
use super::released::{Adoption, Held, RunEnd};
use super::runner::{Stops, Worker, parse_spec};
use crate::coordinator::Release;
use crate::spec::ExecutionSpec;
use crate::trace::ExecutionTrace;

/// Kind of the event a stopping worker appends before it hands an execution over: the
/// script step in progress and the redacted trace so far (`{"step", "trace"}`).
pub const EVENT_EXECUTION_CHECKPOINT: &str = "execution.checkpoint";

/// How often a stopping worker looks for a successor again when none is live.
const SUCCESSOR_RETRY: Duration = Duration::from_millis(500);

/// A registry entry older than this is not offered an execution.
const LIVE_WITHIN: Duration = Duration::from_secs(30);

impl Worker {
    /// Goes on with an execution whose wait was released with its round pending: hands it
    /// over, or parks it. `Err`: how the run ends instead (failed closed: nobody took it
    /// before the drain timeout, or its checkpoint could not be written).
    pub(super) async fn release(
        &self,
        held: Held<'_>,
        release: Release,
        drained: &CancellationToken,
    ) -> std::result::Result<RunEnd, Ending> {
        match release {
            Release::HandOver => match self.pass_on(&held, drained).await {
                Some(record) => Ok(RunEnd::Record(Box::new(record))),
                None => Err(Ending::Drained),
            },
            Release::Park {
                round,
                lease,
                wake_at,
            } => match self.park(&held, round, lease, wake_at).await {
                Ok(parked) => Ok(RunEnd::Parked(Box::new(parked))),
                Err(error) => Err(Ending::LeaseLost(error)),
            },
        }
    }

    /// Hands the execution (its wait ended for a handover) to a live worker: records the
    /// checkpoint, then offers it until one takes it or `drained` fires. `None`: nobody took
    /// it (the caller fails it closed, as before handovers existed).
    async fn pass_on(
        &self,
        held: &Held<'_>,
        drained: &CancellationToken,
    ) -> Option<ExecutionRecord> {
        let (spec, lease) = (held.spec, held.lease);
        if let Err(error) = self.record_checkpoint(held).await {
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

    /// Appends the checkpoint event under the lease: the script step, the redacted trace so
    /// far, and when the execution timeout ends (store clock).
    pub(super) async fn record_checkpoint(&self, held: &Held<'_>) -> Result<()> {
        let (spec, lease, log) = (held.spec, held.lease, held.log);
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
        let now = m3_store::store_now(self.store().clock().as_ref());
        let turn_deadline = m3_types::timestamp::format(now + held.timeout_left);
        let payload = json!({"step": step, "trace": trace, "turn_deadline": turn_deadline});
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
    /// `from_elsewhere`: handed over by another worker (not parked by this one).
    pub(crate) async fn run_adopted(
        &self,
        record: ExecutionRecord,
        stops: Stops,
        from_elsewhere: bool,
    ) -> Result<RunEnd> {
        let lease =
            record.lease.as_ref().map(|l| l.to_ref()).ok_or_else(|| {
                Error::managed_input_state("a handed-over execution has no lease")
            })?;
        let spec = parse_spec(&record)?;
        drop(record);
        self.store().renew_lease(&lease, spec.lease()).await?;
        match self
            .load_adoption(&lease.execution_id, from_elsewhere)
            .await
        {
            Ok(adoption) => self.drive(spec, lease, stops, Some(adoption)).await,
            Err(error) => {
                tracing::warn!(%error, "cannot go on with a handed-over execution; failing it closed");
                let error = Error::managed_input_recovery(m3_types::messages::RECOVERY_UNAVAILABLE)
                    .with_detail("reason", "handover_incomplete");
                let request = FinishExecution::new(&lease.execution_id, ExecutionOutcome::Failed)
                    .with_error(error.to_error_info())
                    .with_lease(lease);
                self.store()
                    .finish(request)
                    .await
                    .map(|record| RunEnd::Record(Box::new(record)))
            }
        }
    }

    /// The checkpoint and the open round of a handed-over execution.
    async fn load_adoption(&self, execution_id: &str, announce: bool) -> Result<Adoption> {
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
        let timeout_left = checkpoint.payload["turn_deadline"]
            .as_str()
            .and_then(|at| m3_types::timestamp::parse(at).ok())
            .map(|at| {
                let now = m3_store::store_now(self.store().clock().as_ref());
                (at - now).try_into().unwrap_or(Duration::ZERO)
            });
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
            timeout_left,
            announce,
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
