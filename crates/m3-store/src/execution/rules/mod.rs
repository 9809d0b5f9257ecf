//! The storage-independent rules of [`ExecutionStore`](super::ExecutionStore): the toolkit
//! of every backend author.
//!
//! Every backend, the shipped ones included, calls these for each decision (argument checks,
//! lease expiry, the fence, the lifecycle table, `finish` idempotency, the recovery
//! preconditions, reserved event kinds, the store's own event payloads) and keeps only
//! storage code. Errors come from [`errors`], each with its [`Reason`](m3_types::Reason).
//! Take "now" from [`store_now`](crate::store_now).

mod decisions;
pub mod errors;
mod payloads;
mod staged;
mod steps;

pub use decisions::{
    Acquire, CLAIMED_LIFECYCLE, RESERVED_KINDS, ROUND_CLOSED_AT_FINISH, TerminalData,
    acquire_token, apply_claim, check_acquire, check_append, check_claim_request, check_event_kind,
    check_fence, check_finish, check_lease_write, check_terminalize, check_transition,
    created_record, diagnose, is_claimable, lease_expiry, mark_finished, new_execution_lease_token,
    require_non_empty,
};
pub use payloads::{
    created_payload, finished_payload, state_changed_payload, terminalized_payload, to_canonical,
    to_canonical_opt,
};
pub use staged::StagedWrite;
pub use steps::{
    ExecutionSlot, append_step, cancel_step, change_step, check_release, claim_step, created_event,
    finish_step, granted_lease, hand_over_step, lease_step, release_step, renew_step,
    renewed_lease, terminalize_step, transition_step,
};
