//! The [`ExecutionStore`](crate::ExecutionStore) contract as a test suite (feature
//! `conformance`), beside the managed-input suite of the [parent module](super). **Not
//! semver-stable.**
//!
//! A backend provides a factory: given a clock, a fresh, empty [`ExecutionBackend`] (the
//! store under test and a second store object on the same data). [`run_all`] runs every
//! case in [`CASES`] against a fresh backend whose clock is a [`ManualClock`] at
//! [`start_time`](super::start_time); cases assert codes and [`Reason`](m3_types::Reason)s,
//! never message wording.
//!
//! ```
//! # async fn demo() {
//! use std::sync::Arc;
//! use m3_store::conformance::execution::{ExecutionBackend, run_all};
//! use m3_store::memory::MemoryExecutionStore;
//!
//! let report = run_all(|clock| async move {
//!     let store = MemoryExecutionStore::with_clock(clock);
//!     Ok(ExecutionBackend::new(Arc::new(store.clone()), Arc::new(store)))
//! })
//! .await;
//! assert!(report.is_success(), "{report}");
//! # }
//! ```

pub mod answers;
pub mod batch;
pub mod concurrency;
pub mod feed;
pub mod handover;
mod harness;
pub mod leases;
pub mod lifecycle;
pub mod policies;
pub mod queue;
pub mod recovery;
pub mod signals;
pub mod subscriptions;
mod support;
pub mod tokens;
pub mod workers;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use m3_types::ManualClock;

use super::{CaseFailure, CaseResult, ConformanceReport};
pub use harness::{ExecutionBackend, ExecutionHarness, ExecutionStoreFactory};

type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

/// One case of the suite.
pub type ExecutionCase = for<'a> fn(&'a ExecutionHarness) -> CaseFuture<'a>;

macro_rules! cases {
    ($($module:ident :: $name:ident),* $(,)?) => {
        &[$((stringify!($name), (|h| Box::pin($module::$name(h))) as ExecutionCase)),*]
    };
}

/// Every case, by name, in the order [`run_all`] runs them.
pub const CASES: &[(&str, ExecutionCase)] = cases![
    lifecycle::created_execution_reads_back_with_its_created_event,
    lifecycle::create_with_chosen_id_is_idempotent_and_conflicts_on_other_data,
    lifecycle::list_executions_filters_and_orders_oldest_first,
    lifecycle::transition_table_is_enforced_for_every_pair,
    lifecycle::operations_on_a_missing_execution_are_not_found,
    lifecycle::finish_happens_once_and_is_idempotent_for_identical_data,
    lifecycle::appended_events_get_consecutive_sequences_and_page,
    lifecycle::append_event_refuses_bad_kinds_and_finished_executions,
    lifecycle::cancel_request_keeps_the_first_reason_and_ignores_finished,
    lifecycle::a_peer_reads_the_same_executions,
    leases::acquire_sets_owner_token_and_expiry,
    leases::acquire_is_idempotent_for_the_same_lease_and_exclusive_otherwise,
    leases::acquire_validates_its_arguments_and_the_execution,
    leases::lease_expires_by_the_store_clock_and_is_never_taken_over,
    leases::renew_and_release_refuse_a_wrong_owner_or_token,
    leases::a_released_lease_can_be_acquired_again_and_the_old_token_is_dead,
    leases::leased_writes_need_the_live_lease_and_unleased_writes_need_none,
    leases::finish_with_the_lease_ends_it_and_release_afterwards_succeeds,
    handover::the_live_owner_hands_its_lease_to_a_successor,
    handover::a_handover_needs_the_live_lease_and_changes_nothing_when_refused,
    handover::racing_handovers_of_one_lease_apply_once,
    batch::renew_leases_decides_each_item_like_renew_lease,
    batch::renew_leases_accepts_an_empty_batch_and_refuses_a_zero_ttl,
    recovery::expired_leases_are_listed_in_expiry_order,
    recovery::terminalize_finishes_an_expired_execution_once,
    recovery::terminalize_fails_the_unresolved_rounds_of_the_same_backend,
    recovery::finish_fails_the_unresolved_rounds_so_none_accepts_an_answer,
    concurrency::concurrent_appenders_get_distinct_gap_free_sequences,
    concurrency::racing_workers_get_exactly_one_lease,
    concurrency::racing_transitions_apply_once,
    queue::claim_takes_the_oldest_queued_execution_once,
    queue::claim_of_one_execution_skips_the_others,
    queue::claim_validates_its_arguments,
    queue::claimed_executions_are_recovered_never_claimed_again,
    queue::racing_claimers_never_share_an_execution,
    signals::a_committed_change_is_observable_through_the_signal_or_its_poll,
    feed::every_change_appends_one_record_in_commit_order,
    feed::a_reader_resumes_exactly_once_from_any_cursor,
    feed::a_refused_change_appends_nothing,
    feed::concurrent_writers_get_distinct_cursors,
    feed::a_reader_beside_concurrent_writers_misses_nothing,
    feed::bad_pages_and_cursors_are_refused,
    feed::prune_removes_old_records_and_expires_cursors_behind_them,
    feed::pruning_every_record_never_reuses_a_cursor,
    answers::an_answer_keeps_its_actor_in_the_store_and_the_feed,
    answers::an_answer_without_an_actor_records_none,
    tokens::a_token_authenticates_until_it_is_revoked,
    tokens::names_are_unique_and_tokens_expire,
    workers::a_worker_is_announced_renewed_and_retired,
    workers::silent_workers_are_pruned_and_bad_announcements_refused,
    policies::policies_are_shared_unique_and_removed,
    policies::deadline_reminders_are_appended_once_per_fraction,
    subscriptions::a_subscription_is_added_listed_and_removed_without_its_secret,
    subscriptions::bad_subscriptions_are_refused_and_add_nothing,
    subscriptions::one_notifier_holds_a_subscription_until_its_lease_expires,
    subscriptions::reports_move_the_cursor_and_keep_failures_and_dead_letters,
    subscriptions::edits_enable_disable_and_rotate_the_secret,
    subscriptions::racing_claimers_never_share_a_subscription,
    subscriptions::the_link_key_is_made_once_and_rotation_replaces_it,
];

/// Runs every case against fresh backends from `factory`.
pub async fn run_all(factory: impl ExecutionStoreFactory) -> ConformanceReport {
    let mut report = ConformanceReport::default();
    for (name, case) in CASES {
        let clock = ManualClock::new(super::start_time());
        let outcome = match factory.create(Arc::new(clock.clone())).await {
            Ok(backend) => {
                let harness = ExecutionHarness {
                    store: Arc::clone(&backend.store),
                    peer: Arc::clone(&backend.peer),
                    clock,
                    _backend: backend,
                };
                case(&harness).await
            }
            Err(error) => Err(CaseFailure::new(format!(
                "the factory failed: {} ({error})",
                error.code()
            ))),
        };
        match outcome {
            Ok(()) => report.passed.push(name),
            Err(failure) => {
                tracing::warn!(case = name, %failure, "execution conformance case failed");
                report.failed.push((name, failure));
            }
        }
    }
    report
}
