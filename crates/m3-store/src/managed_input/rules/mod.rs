//! The storage-independent rules of [`ManagedInputStore`](super::ManagedInputStore): the
//! toolkit of every backend author.
//!
//! Every backend, the shipped ones included, calls these functions for each decision and
//! keeps only storage code of its own: argument checks, whole-round validation before any
//! write, lease authorization and expiry arithmetic, the claim-evidence table, transition
//! preconditions and targets, idempotent-replay comparison, and lease-token generation.
//! Each rule returns the error (code and [`Reason`](m3_types::Reason)) the contract
//! documents, so two backends give the same answer to the same call; the conformance suite
//! checks codes and reasons, never message wording.
//!
//! Times: pass the store's "now" from [`store_now`](crate::store_now) (UTC, whole
//! microseconds). [`lease_expiry`] returns expiries at that precision too, so a stored and
//! re-read timestamp compares equal to the one returned.
//!
//! The `check_*` functions take the current stored record and decide; the `apply_*`
//! functions give the record a write leaves behind, for backends that store records (the
//! memory backend); a SQL backend writes the same columns with a guarded `UPDATE` and may
//! use the record as its image.

mod arguments;
mod create;
mod errors;
mod leases;
mod steps;
mod token;
mod writes;

pub use arguments::{
    check_claim_args, check_fail_args, check_fail_recovery_args, check_lease_args,
    check_renew_args, check_submit_args, json_text, lease_expiry, optional_text, ordered_json_text,
    require_lease, require_lease_duration, require_round, require_text, to_json_value,
};
pub use create::{PreparedRound, prepare_create, replay_create, round_index_taken, same_round};
pub use errors::{missing_round, raced, stored_invalid};
pub(crate) use leases::token_mismatch;
pub use leases::{
    RENEWABLE, UNRESOLVED, apply_claim, apply_renew, authorize, check_claim, check_renew,
    claimed_status,
};
pub use m3_types::RECOVERY_UNAVAILABLE;
pub use steps::{
    Decision, EncodedSubmission, Submission, Transition, apply_fail, apply_recovery_failure,
    apply_submission, check_fail, check_fail_recovery, check_submission, check_transition,
    encode_submission,
};
pub use token::new_lease_token;
pub use writes::{RoundWrite, renew_item};
