//! How the turn of an execution ended, and what that means for its terminal write.

use m3_types::{Error, ExecutionOutcome, HumanInput, Result, messages};

use crate::spec::ExecutionSpec;

/// How the turn of an execution ended.
pub(super) enum Ending {
    Done(Result<String>),
    Cancelled,
    TimedOut,
    LeaseLost(Error),
    /// The worker stopped (drain timeout) before the execution ended.
    Drained,
}

impl Ending {
    /// The final text, or the error the execution ends with.
    pub(super) fn into_outcome(self, spec: &ExecutionSpec) -> (Option<String>, Option<Error>) {
        match self {
            Self::Done(Ok(text)) => (Some(text), None),
            Self::Done(Err(error)) | Self::LeaseLost(error) => (None, Some(error)),
            Self::Drained if spec.human_input == HumanInput::Managed => (
                None,
                Some(
                    Error::managed_input_recovery(messages::RECOVERY_UNAVAILABLE)
                        .with_detail("reason", DRAINED_REASON),
                ),
            ),
            Self::Drained => (None, None),
            Self::Cancelled => (
                None,
                Some(Error::cancelled(
                    "execution cancelled: caller requested cancellation",
                )),
            ),
            Self::TimedOut => (
                None,
                Some(
                    Error::timeout(format!("execution timed out after {} ms", spec.timeout_ms))
                        .with_detail("reason", "execution_timeout"),
                ),
            ),
        }
    }
}

impl Ending {
    /// The outcome when it is not the one the error implies: a drained execution that is
    /// not managed ends `interrupted`, as recovery would end it.
    pub(super) fn outcome_override(&self, spec: &ExecutionSpec) -> Option<ExecutionOutcome> {
        match self {
            Self::Drained if spec.human_input != HumanInput::Managed => {
                Some(ExecutionOutcome::Interrupted)
            }
            _ => None,
        }
    }
}

/// Why a worker that stopped failed the executions it still ran.
pub const DRAINED_REASON: &str = "worker stopped after its drain timeout";
