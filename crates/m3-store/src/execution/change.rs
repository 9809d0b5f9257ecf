//! [`ExecutionChange`]: the one write a backend implements for the lifecycle, the cancel
//! flag and handovers.

use std::time::Duration;

use m3_types::ExecutionStatus;

use super::record::ExecutionLeaseRef;

/// A change of an execution's lifecycle or cancel flag: what
/// [`write_execution`](super::ExecutionStore::write_execution) receives from the provided
/// [`transition`](super::ExecutionStore::transition) and
/// [`request_cancel`](super::ExecutionStore::request_cancel).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExecutionChange {
    /// `transition`: lifecycle `to`, fenced by `lease`.
    Transition {
        /// The execution to change.
        execution_id: String,
        /// The lifecycle to move to.
        to: ExecutionStatus,
        /// The writer's worker lease; `None` for an unleased writer.
        lease: Option<ExecutionLeaseRef>,
    },
    /// `request_cancel`: the cancel flag, with an optional reason.
    Cancel {
        /// The execution to change.
        execution_id: String,
        /// Why (kept from the first request only).
        reason: Option<String>,
    },
    /// `hand_over`: the live lease `lease` passes to `successor`, under a fresh token,
    /// until `now + ttl`.
    HandOver {
        /// The execution to change.
        execution_id: String,
        /// The current owner's live lease (the compare-and-set's expected value).
        lease: ExecutionLeaseRef,
        /// The worker that holds the execution afterwards.
        successor: String,
        /// How long the successor's lease lasts before its first renewal.
        ttl: Duration,
    },
}

impl ExecutionChange {
    /// Moves `execution_id` to `to`, fenced by `lease`.
    pub fn transition(
        execution_id: impl Into<String>,
        to: ExecutionStatus,
        lease: Option<ExecutionLeaseRef>,
    ) -> Self {
        let execution_id = execution_id.into();
        Self::Transition {
            execution_id,
            to,
            lease,
        }
    }

    /// Requests the cancellation of `execution_id`.
    pub fn cancel(execution_id: impl Into<String>, reason: Option<String>) -> Self {
        let execution_id = execution_id.into();
        Self::Cancel {
            execution_id,
            reason,
        }
    }

    /// Hands `lease`'s execution to `successor` for `ttl` (see
    /// [`ExecutionStore::hand_over`](super::ExecutionStore::hand_over)).
    pub fn hand_over(
        lease: ExecutionLeaseRef,
        successor: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self::HandOver {
            execution_id: lease.execution_id.clone(),
            lease,
            successor: successor.into(),
            ttl,
        }
    }

    /// The execution this change is for.
    pub fn execution_id(&self) -> &str {
        match self {
            Self::Transition { execution_id, .. }
            | Self::Cancel { execution_id, .. }
            | Self::HandOver { execution_id, .. } => execution_id,
        }
    }
}
