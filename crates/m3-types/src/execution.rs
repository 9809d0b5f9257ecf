//! Execution values: human-input policy, lifecycle, outcome, state, result and error info.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{Error, ErrorCode, ErrorInfo, Result};

wire_enum! {
    /// How an execution handles elicitation requests: fail them (default) or manage them durably.
    #[derive(Default)]
    frozen pub enum HumanInput {
        /// `"fail"`: elicitation requests fail the operation (the default).
        #[default]
        Fail => "fail",
        /// `"managed"`: rounds are stored and answered through the handle.
        Managed => "managed",
    }
    unknown = |s: &str| {
        Error::model_validation(crate::messages::HUMAN_INPUT)
            .with_detail("operation", "execution.submit")
            .with_detail("value", s)
    }
}

wire_enum! {
    /// Execution lifecycle (`lifecycle` field of [`ExecutionState`]).
    frozen pub enum ExecutionStatus {
        /// `"created"`
        Created => "created",
        /// `"queued"`
        Queued => "queued",
        /// `"starting"`
        Starting => "starting",
        /// `"idle"`
        Idle => "idle",
        /// `"running_turn"`
        RunningTurn => "running_turn",
        /// `"waiting_for_input"`: paused on a managed round.
        WaitingForInput => "waiting_for_input",
        /// `"closing"`
        Closing => "closing",
        /// `"finished"` (terminal)
        Finished => "finished",
    }
    what = "execution status"
}

impl ExecutionStatus {
    /// The transition table of sf-m3 (the Python implementation): whether `self -> next` is allowed.
    ///
    /// created→{queued, starting, finished}; queued→{starting, finished};
    /// starting→{idle, running_turn, closing, finished}; idle→{running_turn, closing, finished};
    /// running_turn→{idle, waiting_for_input, closing, finished};
    /// waiting_for_input→{running_turn, closing, finished}; closing→{finished}; finished→∅.
    pub fn can_transition_to(self, next: Self) -> bool {
        use ExecutionStatus::*;
        matches!(
            (self, next),
            (Created, Queued | Starting | Finished)
                | (Queued, Starting | Finished)
                | (Starting, Idle | RunningTurn | Closing | Finished)
                | (Idle, RunningTurn | Closing | Finished)
                | (RunningTurn, Idle | WaitingForInput | Closing | Finished)
                | (WaitingForInput, RunningTurn | Closing | Finished)
                | (Closing, Finished)
        )
    }

    /// Whether this is `finished`.
    pub fn is_terminal(self) -> bool {
        self == Self::Finished
    }
}

wire_enum! {
    /// How a finished execution ended.
    frozen pub enum ExecutionOutcome {
        /// `"completed"`
        Completed => "completed",
        /// `"failed"`
        Failed => "failed",
        /// `"timed_out"`
        TimedOut => "timed_out",
        /// `"cancelled"`
        Cancelled => "cancelled",
        /// `"interrupted"` (store-owned terminalization only)
        Interrupted => "interrupted",
    }
    what = "execution outcome"
}

impl ExecutionOutcome {
    /// The outcome mapping of sf-m3: no error → completed, timeout → timed_out,
    /// cancelled → cancelled, anything else → failed.
    pub fn for_error(error: Option<&Error>) -> Self {
        match error {
            None => Self::Completed,
            Some(e) if e.is_timeout() => Self::TimedOut,
            Some(e) if e.is_cancelled() => Self::Cancelled,
            Some(_) => Self::Failed,
        }
    }
}

wire_enum! {
    /// Summary of the MCP activity of an execution.
    #[derive(Default)]
    frozen pub enum ActivityHealth {
        /// `"no_calls"` (default)
        #[default]
        NoCalls => "no_calls",
        /// `"all_succeeded"`
        AllSucceeded => "all_succeeded",
        /// `"all_failed"`
        AllFailed => "all_failed",
        /// `"mixed"`
        Mixed => "mixed",
    }
    what = "activity health"
}

/// Snapshot of an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ExecutionState {
    /// Execution id.
    pub execution_id: String,
    /// Project id.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Run id.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Suite id.
    #[serde(default)]
    pub suite_id: Option<String>,
    /// Suite name.
    #[serde(default)]
    pub suite_name: Option<String>,
    /// Lifecycle.
    pub lifecycle: ExecutionStatus,
    /// Outcome (set exactly when finished).
    #[serde(default)]
    pub outcome: Option<ExecutionOutcome>,
    /// Event sequence number.
    #[serde(default)]
    pub sequence: u64,
    /// Number of tool calls.
    #[serde(default)]
    pub tool_call_count: u64,
    /// Creation time.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub created_at: OffsetDateTime,
    /// Finish time (set exactly when finished).
    #[serde(default, with = "crate::timestamp::serde::option")]
    #[schemars(with = "Option<String>")]
    pub finished_at: Option<OffsetDateTime>,
    /// Session provenance (free-form).
    #[serde(default)]
    pub provenance: Option<Value>,
    /// Agent identity (free-form).
    #[serde(default)]
    pub agent: Option<Value>,
}

impl ExecutionState {
    /// A `created` snapshot.
    pub fn new(execution_id: impl Into<String>, created_at: OffsetDateTime) -> Self {
        Self {
            execution_id: execution_id.into(),
            project_id: None,
            run_id: None,
            suite_id: None,
            suite_name: None,
            lifecycle: ExecutionStatus::Created,
            outcome: None,
            sequence: 0,
            tool_call_count: 0,
            created_at,
            finished_at: None,
            provenance: None,
            agent: None,
        }
    }

    /// Moves to `next` following the transition table.
    ///
    /// # Errors
    /// `invalid_argument` (details `code: invalid_transition`) for a refused transition.
    pub fn transition(&mut self, next: ExecutionStatus) -> Result<()> {
        if !self.lifecycle.can_transition_to(next) {
            return Err(Error::from_code(
                ErrorCode::InvalidTransition,
                format!(
                    "invalid lifecycle transition from {} to {next}",
                    self.lifecycle
                ),
            )
            .with_detail("from", self.lifecycle.as_str())
            .with_detail("to", next.as_str()));
        }
        self.lifecycle = next;
        Ok(())
    }

    /// Moves to `finished` with `outcome` at `at`.
    ///
    /// # Errors
    /// As [`transition`](Self::transition).
    pub fn finish(&mut self, outcome: ExecutionOutcome, at: OffsetDateTime) -> Result<()> {
        self.transition(ExecutionStatus::Finished)?;
        self.outcome = Some(outcome);
        self.finished_at = Some(at);
        Ok(())
    }

    /// Checks `finished` ⇔ `outcome` and `finished_at` set, and a non-empty id.
    ///
    /// # Errors
    /// `invalid_argument`.
    pub fn validate(&self) -> Result<()> {
        if self.execution_id.is_empty() {
            return Err(Error::model_validation(
                "execution_id must be a non-empty string",
            ));
        }
        let finished = self.lifecycle == ExecutionStatus::Finished;
        if finished != (self.outcome.is_some() && self.finished_at.is_some())
            || (!finished && (self.outcome.is_some() || self.finished_at.is_some()))
        {
            return Err(Error::model_validation(
                "finished executions require outcome and finished_at, and only they have them",
            ));
        }
        Ok(())
    }
}

/// The terminal result of an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ExecutionResult {
    /// Final snapshot (`finished`).
    pub snapshot: ExecutionState,
    /// Turn results (free-form).
    #[serde(default)]
    pub turns: Vec<Value>,
    /// Trace (free-form).
    #[serde(default)]
    pub trace: Option<Value>,
    /// Direct operation result (free-form).
    #[serde(default)]
    pub direct_result: Option<Value>,
    /// Evaluations (free-form).
    #[serde(default)]
    pub evaluations: Vec<Value>,
    /// Artifacts (free-form).
    #[serde(default)]
    pub artifacts: Vec<Value>,
    /// Activity summary.
    #[serde(default)]
    pub activity_health: ActivityHealth,
    /// Error, when the execution did not complete.
    #[serde(default)]
    pub error: Option<ErrorInfo>,
    /// Provenance (free-form).
    #[serde(default)]
    pub provenance: Option<Value>,
}

impl ExecutionResult {
    /// A result for a finished snapshot, with no turns, trace or error.
    ///
    /// # Errors
    /// `invalid_argument` when `snapshot` is not `finished`.
    pub fn new(snapshot: ExecutionState) -> Result<Self> {
        if snapshot.lifecycle != ExecutionStatus::Finished {
            return Err(Error::model_validation(
                "execution results require a finished snapshot",
            ));
        }
        Ok(Self {
            snapshot,
            turns: Vec::new(),
            trace: None,
            direct_result: None,
            evaluations: Vec::new(),
            artifacts: Vec::new(),
            activity_health: ActivityHealth::NoCalls,
            error: None,
            provenance: None,
        })
    }

    /// Sets the error.
    #[must_use]
    pub fn with_error(mut self, error: ErrorInfo) -> Self {
        self.error = Some(error);
        self
    }

    /// The outcome of the snapshot.
    pub fn outcome(&self) -> Option<ExecutionOutcome> {
        self.snapshot.outcome
    }
}
