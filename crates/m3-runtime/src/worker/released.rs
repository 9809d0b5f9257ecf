//! What a run leaves when its wait is released with the round still pending: how the run
//! ended, what a checkpoint records, what a parked execution keeps, and what a successor (or
//! this worker, later) needs to go on.

use std::time::Duration;

use m3_mcp::LogicalOperation;
use m3_store::{ExecutionLeaseRef, ExecutionRecord, LeaseRef, RoundRef};
use m3_types::{Error, ManagedInputRecord, Result};
use time::OffsetDateTime;

use crate::coordinator::Coordinator;
use crate::harness::{OperationLog, ResumedOperation};
use crate::spec::ExecutionSpec;

/// How a run ended: its record (finished, or handed to another worker: the lease names the
/// successor), or parked in this worker until its round is answered.
#[derive(Debug)]
pub(crate) enum RunEnd {
    /// The stored record after the run.
    Record(Box<ExecutionRecord>),
    /// Parked: the leases to keep and when to look again.
    Parked(Box<Parked>),
}

impl RunEnd {
    /// The record, for a caller that never parks.
    ///
    /// # Errors
    /// `managed_input_state` for a parked run (only a pool parks).
    pub(crate) fn into_record(self) -> Result<ExecutionRecord> {
        match self {
            Self::Record(record) => Ok(*record),
            Self::Parked(_) => Err(Error::managed_input_state(
                "the execution was parked by a caller that cannot keep it",
            )),
        }
    }
}

/// An execution whose wait was released, as the runner holds it: what a checkpoint records.
pub(super) struct Held<'a> {
    pub(super) spec: &'a ExecutionSpec,
    pub(super) lease: &'a ExecutionLeaseRef,
    pub(super) log: &'a OperationLog,
    /// What is left of the execution timeout.
    pub(super) timeout_left: Duration,
}

/// What a successor needs to go on with a handed-over execution.
#[derive(Debug)]
pub(crate) struct Adoption {
    /// The script step whose round was handed over.
    pub(crate) step: usize,
    /// What was left of the execution timeout when it was handed over.
    pub(crate) timeout_left: Option<Duration>,
    /// Whether the round is reported pending again (taken from another worker; not when
    /// this worker parked it).
    pub(super) announce: bool,
    pub(super) round: ManagedInputRecord,
    pub(super) operations: Vec<LogicalOperation>,
    pub(super) transcript: Vec<String>,
    /// Rounds of the round's operation so far, this one included.
    pub(super) completed_rounds: u32,
}

impl Adoption {
    /// The round left pending.
    pub(crate) fn round(&self) -> &ManagedInputRecord {
        &self.round
    }

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
        // Where the script is, should this run be released again before the step resumes.
        log.begin_step(self.step);
        let delivery = coordinator.adopt(self.round.clone(), self.announce).await?;
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

/// A parked execution: its leases and when to look at it again.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) lease: ExecutionLeaseRef,
    pub(super) round: RoundRef,
    pub(super) round_lease: LeaseRef,
    /// When a deadline, reminder or policy is due, or the execution timeout ends (store
    /// clock): it is brought back then.
    pub(crate) wake_at: OffsetDateTime,
    pub(super) ttl: Duration,
    pub(super) renew_every: Duration,
}

impl Parked {
    /// The round the execution waits on.
    pub(crate) fn round_id(&self) -> &str {
        &self.round.round_id
    }
}
