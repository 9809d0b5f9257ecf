//! The values of the worker registry: a worker's entry, what it announces, its state.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// What a registered worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WorkerState {
    /// `running`: claiming and running executions.
    Running,
    /// `draining`: stopping; it claims nothing new and lets its executions finish.
    Draining,
}

impl WorkerState {
    /// The state's name (`running`, `draining`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Draining => "draining",
        }
    }
}

/// What a starting worker announces ([`WorkerRegistry::announce`](super::WorkerRegistry::announce)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewWorker {
    /// The worker's id: the owner id its leases carry (1 to 200 printable characters).
    pub worker_id: String,
    /// The host it runs on (1 to 255 printable characters).
    pub host: String,
    /// Its operating-system process id.
    pub pid: u32,
    /// Whether it only takes executions handed over by stopping workers and claims
    /// nothing new (`m3 worker --handover-only`).
    pub handover_only: bool,
}

impl NewWorker {
    /// Worker `worker_id` on `host`, process `pid`, claiming new executions.
    pub fn new(worker_id: impl Into<String>, host: impl Into<String>, pid: u32) -> Self {
        Self {
            worker_id: worker_id.into(),
            host: host.into(),
            pid,
            handover_only: false,
        }
    }

    /// This worker only takes handovers.
    pub fn handover_only(mut self, yes: bool) -> Self {
        self.handover_only = yes;
        self
    }
}

/// A registered worker, as every process on the store sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WorkerEntry {
    /// The worker's id (the owner id of its leases).
    pub worker_id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// Whether it claims nothing new and only takes handovers.
    pub handover_only: bool,
    /// What it is doing, as of its last heartbeat.
    pub state: WorkerState,
    /// When it announced itself, on the store's clock.
    #[serde(with = "m3_types::timestamp::serde")]
    pub started_at: OffsetDateTime,
    /// Its last heartbeat, on the store's clock.
    #[serde(with = "m3_types::timestamp::serde")]
    pub heartbeat_at: OffsetDateTime,
}

impl WorkerEntry {
    /// Whether its last heartbeat is at most `within` before `now`.
    pub fn is_live(&self, now: OffsetDateTime, within: Duration) -> bool {
        now - self.heartbeat_at <= within
    }
}
