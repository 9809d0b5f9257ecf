//! What a backend's read-decide-write stores: the shapes every backend's `update` step
//! returns, so no backend spells them out again.

use m3_types::{ManagedInputRecord, Result};
use time::OffsetDateTime;

use super::steps::{Decision, Submission, apply_submission, check_submission};
use crate::managed_input::request::{LeaseRef, ResponseSubmission};

/// One mutation's write: the next record and, after an accepted submission, the redacted
/// projection of its responses as canonical JSON text (store it beside the record).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RoundWrite {
    /// The record to store.
    pub record: ManagedInputRecord,
    /// A new redacted projection (`None`: keep the stored one).
    pub redacted_json: Option<String>,
}

impl RoundWrite {
    /// A write of `record` alone.
    pub fn record(record: ManagedInputRecord) -> Option<Self> {
        Some(Self {
            record,
            redacted_json: None,
        })
    }

    /// The write `decision` asks for: none for an idempotent repeat
    /// ([`Decision::AlreadyDone`]), else the record `next` builds.
    pub fn decided(decision: Decision, next: impl FnOnce() -> ManagedInputRecord) -> Option<Self> {
        match decision {
            Decision::AlreadyDone => None,
            _ => Self::record(next()),
        }
    }

    /// `submit_responses`' write on `current`: [`check_submission`], then the accepted
    /// record and its redacted projection; none for an idempotent replay.
    ///
    /// # Errors
    /// As [`check_submission`].
    pub fn submission(
        current: &ManagedInputRecord,
        lease: &LeaseRef,
        submission: &ResponseSubmission,
        now: OffsetDateTime,
    ) -> Result<Option<Self>> {
        Ok(match check_submission(current, lease, submission, now)? {
            Submission::Accept(encoded) => Some(Self {
                record: apply_submission(current, submission, now),
                redacted_json: Some(encoded.redacted_json),
            }),
            _ => None,
        })
    }
}
