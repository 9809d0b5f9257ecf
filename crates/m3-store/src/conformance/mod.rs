//! The [`ManagedInputStore`](crate::ManagedInputStore) contract as a test suite that any
//! backend runs from its own tests (feature `conformance`). **Not semver-stable**: cases
//! are added as the contract is clarified.
//!
//! Shaped like object_store's integration suite: one `pub async fn <behaviour>(&Harness)` per
//! contract clause, each starting from a fresh store built by the backend's factory and
//! asserting on [`Error::code`](m3_types::Error::code) (the error is logged with `tracing`).
//! [`run_all`] only calls the list in [`CASES`] and returns a [`ConformanceReport`].
//!
//! A backend provides a [`StoreFactory`]: given a clock, it builds a fresh [`Backend`]: the
//! store under test, a second independent store object on the same data (for replays,
//! reopening and concurrent writers), and a [`CorruptRecord`] capability that damages a
//! stored row the way a broken disk or a foreign writer would. [`run_all`] wraps it in a
//! [`Harness`] with the [`ManualClock`] it passed in. Capabilities are parameters, never
//! skips: every case runs against every backend.
//!
//! ```no_run
//! # async fn demo() -> m3_types::Result<()> {
//! use std::sync::Arc;
//! use m3_store::conformance::{Backend, run_all};
//! use m3_store::{SqliteManagedInputStore, SqliteStoreOptions};
//! use m3_types::Clock;
//!
//! let report = run_all(|clock: Arc<dyn Clock>| async move {
//!     let dir = std::env::temp_dir().join(m3_types::new_id());
//!     let path = dir.join("m3.sqlite");
//!     let options = SqliteStoreOptions::new().clock(clock);
//!     let store = SqliteManagedInputStore::open_with(&path, options.clone()).await?;
//!     let peer = SqliteManagedInputStore::open_with(&path, options).await?;
//!     Ok(Backend::new(Arc::new(store.clone()), Arc::new(peer), Arc::new(store)))
//! })
//! .await;
//! assert!(report.is_success(), "{report}");
//! # Ok(()) }
//! ```

pub mod batch;
mod check;
pub mod claim;
pub mod concurrency;
pub mod corruption;
pub mod create;
pub mod execution;
mod fixture;
mod harness;
pub mod inbox;
pub mod leases;
pub mod order;
mod outcome;
pub mod responses;
#[cfg(feature = "sqlite")]
mod sqlite;
pub mod staleness;
pub mod transitions;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use m3_types::ManualClock;

pub use check::CaseFailure;
pub use fixture::{create_fresh_round, other_address, sample_round, sample_submission, start_time};
pub use harness::{Backend, CorruptRecord, Corruption, Harness, StoreFactory};
pub use outcome::{CaseResult, ConformanceReport};

type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

/// How a case is run (a new kind of case may be added).
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Case {
    /// Runs against a fresh harness.
    Store(for<'a> fn(&'a Harness) -> CaseFuture<'a>),
    /// Runs against the factory itself (construction rules).
    Factory(for<'a> fn(&'a dyn StoreFactory) -> CaseFuture<'a>),
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Store(_) => f.write_str("Case::Store"),
            Self::Factory(_) => f.write_str("Case::Factory"),
        }
    }
}

macro_rules! store_cases {
    ($($module:ident :: $name:ident),* $(,)?) => {
        &[$((stringify!($name), Case::Store(|h| Box::pin($module::$name(h))))),*]
    };
}

/// Every store case, by name, in the order [`run_all`] runs them.
pub const CASES: &[(&str, Case)] = store_cases![
    create::create_round_persists_a_pending_round,
    create::create_round_preserves_optional_metadata,
    create::create_round_operation_parameters_default_to_an_empty_object,
    create::create_round_rejects_round_index_at_the_limit,
    create::create_round_rejects_a_zero_round_limit,
    create::create_round_rejects_an_empty_round,
    create::create_round_rejects_an_empty_owner,
    create::create_round_rejects_a_zero_lease,
    create::create_round_rejects_empty_optional_strings,
    create::create_round_validates_the_whole_round_before_writing,
    create::create_round_replay_with_identical_data_returns_the_stored_record,
    create::create_round_replay_after_progress_returns_the_current_record,
    create::create_round_replay_without_the_explicit_token_conflicts,
    create::create_round_with_different_request_state_conflicts,
    create::create_round_identity_includes_interaction_metadata,
    create::create_round_with_a_taken_round_index_conflicts,
    create::create_round_generates_distinct_lease_tokens,
    create::get_round_returns_none_for_a_missing_round,
    create::reads_reject_empty_identifiers,
    create::list_rounds_orders_by_round_index_within_one_execution,
    create::a_second_store_reads_the_same_round,
    order::create_round_keeps_the_servers_property_order,
    order::create_round_replay_in_another_key_order_is_the_same_round,
    responses::submit_moves_pending_to_response_validated,
    responses::submit_rejects_missing_keys_and_keeps_the_round_pending,
    responses::submit_rejects_unexpected_keys,
    responses::submit_rejects_schema_violations_and_keeps_the_round_pending,
    responses::submit_rejects_form_acceptance_without_content,
    responses::submit_rejects_url_content,
    responses::submit_accepts_decline_cancel_and_url_consent,
    responses::submit_rejects_an_empty_idempotency_key,
    responses::submit_to_a_missing_round_conflicts,
    responses::submit_with_a_foreign_lease_conflicts,
    responses::submit_after_lease_expiry_conflicts_and_keeps_the_round_pending,
    responses::submit_replay_with_same_key_and_payload_returns_the_stored_record,
    responses::submit_replay_with_same_key_and_other_payload_conflicts,
    responses::submit_with_another_key_conflicts,
    responses::submit_replay_succeeds_after_lease_expiry,
    responses::submit_replay_succeeds_after_resolve,
    responses::submit_replay_still_requires_the_lease_credentials,
    responses::submit_replay_validates_before_comparing,
    responses::submit_to_a_failed_round_is_a_state_error,
    responses::submit_replay_on_a_reopened_store_returns_the_stored_record,
    responses::redacted_responses_mask_secrets,
    responses::redacted_responses_are_absent_before_a_response,
    transitions::start_delivery_counts_one_attempt,
    transitions::start_delivery_requires_validated_responses,
    transitions::start_delivery_is_idempotent,
    transitions::mark_delivered_requires_delivery_started,
    transitions::mark_delivered_is_idempotent,
    transitions::resolve_requires_delivered,
    transitions::resolve_is_idempotent,
    transitions::full_lifecycle_records_every_timestamp,
    transitions::transitions_reject_an_expired_lease,
    transitions::transitions_reject_a_foreign_lease,
    transitions::transitions_after_resolve_are_state_errors,
    transitions::transitions_on_a_missing_round_conflict,
    leases::renew_extends_the_lease_and_keeps_the_token,
    leases::renew_rejects_an_expired_lease,
    leases::renew_refuses_a_delivered_round,
    leases::renew_refuses_resolved_and_failed_rounds,
    leases::renew_rejects_a_foreign_token,
    leases::renew_rejects_a_zero_lease,
    batch::renew_leases_decides_each_item_like_renew,
    batch::renew_leases_accepts_an_empty_batch_and_refuses_a_zero_duration,
    leases::lease_expiry_is_measured_by_the_store_clock,
    leases::fail_marks_the_round_failed_and_keeps_responses,
    leases::fail_is_idempotent_for_the_same_code_and_message,
    leases::fail_with_another_failure_conflicts,
    leases::fail_on_a_resolved_round_is_a_state_error,
    leases::fail_rejects_an_expired_lease,
    leases::fail_rejects_an_empty_code_or_message,
    leases::fail_recovery_requires_an_expired_lease,
    leases::fail_recovery_terminalizes_every_unresolved_state,
    leases::fail_recovery_is_idempotent,
    leases::fail_recovery_with_a_wrong_token_conflicts,
    leases::fail_recovery_after_another_failure_is_a_state_error,
    leases::fail_recovery_on_a_resolved_round_is_a_state_error,
    leases::late_responses_after_recovery_failure_are_state_errors,
    claim::claim_requires_delivery_state_evidence,
    claim::claim_of_a_live_lease_conflicts,
    claim::claim_of_an_expired_pending_round_hands_the_lease_over,
    claim::claim_with_a_wrong_expected_token_conflicts,
    claim::claim_of_validated_responses_requires_idempotent_proof,
    claim::claim_of_started_delivery_not_delivered_requires_proof_and_reverts,
    claim::claim_of_started_delivery_not_started_is_ambiguous,
    claim::claim_of_started_delivery_delivered_marks_delivered,
    claim::claim_with_mismatched_evidence_is_refused,
    claim::claim_of_a_recovery_failure_is_a_recovery_error,
    claim::claim_of_other_failures_and_resolved_rounds_are_state_errors,
    claim::claim_of_a_missing_round_conflicts,
    concurrency::concurrent_identical_submissions_both_succeed_with_one_write,
    concurrency::concurrent_different_submissions_have_one_winner,
    concurrency::submit_replay_races_fail_recovery_safely,
    concurrency::pending_submit_races_fail_recovery_safely,
    concurrency::concurrent_start_delivery_counts_one_attempt,
    concurrency::concurrent_identical_creates_return_one_round,
    concurrency::concurrent_creates_at_one_round_index_store_one,
    staleness::transitions_after_a_peer_renewed_see_the_renewed_lease,
    staleness::a_transition_after_a_peer_failed_the_round_is_a_state_error,
    staleness::a_submission_after_a_peer_accepted_is_a_replay_or_a_conflict,
    staleness::a_submission_after_a_peer_failed_the_round_is_a_state_error,
    corruption::corrupt_pending_json_is_a_stored_validation_error,
    corruption::corrupt_responses_json_is_a_stored_validation_error,
    corruption::corrupt_operation_parameters_are_a_stored_validation_error,
    corruption::corrupt_status_is_a_stored_validation_error,
    corruption::corrupt_timestamp_is_a_stored_validation_error,
    corruption::corrupt_redacted_projection_is_a_validation_error,
    corruption::one_unreadable_round_does_not_hide_the_others,
    inbox::pending_page_lists_only_pending_rounds,
    inbox::pending_page_filters_and_searches,
    inbox::pending_page_sorts_and_pages,
];

/// Cases that exercise the factory itself.
pub const FACTORY_CASES: &[(&str, Case)] = &[(
    "non_utc_clock_is_normalized_to_utc",
    Case::Factory(|f| Box::pin(create::non_utc_clock_is_normalized_to_utc(f))),
)];

/// The number of cases [`run_all`] runs.
pub fn case_count() -> usize {
    CASES.len() + FACTORY_CASES.len()
}

/// Runs every case against fresh harnesses from `factory` and reports the outcome.
///
/// Each case gets its own harness (a fresh, empty backend) with a [`ManualClock`] set to
/// [`start_time`]. A factory error fails that case.
pub async fn run_all(factory: impl StoreFactory) -> ConformanceReport {
    let mut report = ConformanceReport::default();
    for (name, case) in CASES.iter().chain(FACTORY_CASES) {
        let outcome = match case {
            Case::Store(run) => {
                let clock = ManualClock::new(start_time());
                match factory.create(Arc::new(clock.clone())).await {
                    Ok(backend) => run(&Harness::new(backend, clock)).await,
                    Err(error) => Err(CaseFailure::new(format!(
                        "the factory failed: {} ({error})",
                        error.code()
                    ))),
                }
            }
            Case::Factory(run) => run(&factory).await,
        };
        match outcome {
            Ok(()) => {
                tracing::debug!(case = name, "conformance case passed");
                report.passed.push(name);
            }
            Err(failure) => {
                tracing::warn!(case = name, %failure, "conformance case failed");
                report.failed.push((name, failure));
            }
        }
    }
    report
}
