//! The PostgreSQL change signal on a real server (`M3_TEST_POSTGRES_URL`): a waiter on one
//! store object is woken by `NOTIFY` when another store object commits, its listener comes
//! back after its connection is killed, and schemas never wake each other. Every positive
//! check is on the wake-up's kind ([`Wake::Signalled`] against the fallback's
//! [`Wake::Poll`]), never on elapsed time.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_store::conformance::{sample_round, sample_submission};
use m3_store::signal::{ChangeSubscription, Topic, Wake};
use m3_store::{CreateRound, ExecutionStore, FinishExecution, LeaseRef, NewExecution, RoundRef};
use m3_store_postgres::testing::{fresh_schema, isolated_options, test_server_url};
use m3_store_postgres::{PgExecutionStore, PgStoreOptions, channel_name};
use m3_types::{ExecutionOutcome, ExecutionStatus, ManagedInputStatus};
use serde_json::json;

/// Upper bound of every wait, so a broken signal fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(60);

async fn open(options: &PgStoreOptions) -> PgExecutionStore {
    PgExecutionStore::open_with(options.clone()).await.unwrap()
}

/// Waits until `store`'s listener is `LISTEN`ing, then takes any wake-up kept from before
/// (so the next [`Wake::Signalled`] is a notification's).
async fn await_listening(store: &PgExecutionStore, subscriptions: &mut [&mut ChangeSubscription]) {
    tokio::time::timeout(PATIENCE, async {
        while !store.is_listening_for_changes() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the change listener connects");
    for subscription in subscriptions {
        let _ = tokio::time::timeout(Duration::ZERO, subscription.changed()).await;
    }
}

/// Waits for a signalled wake-up; fallback polls on a slow machine are allowed in between.
async fn signalled(subscription: &mut ChangeSubscription, what: &str) {
    let woken = tokio::time::timeout(PATIENCE, async {
        while subscription.changed().await != Wake::Signalled {}
    })
    .await;
    assert!(woken.is_ok(), "{what}: no notification woke the waiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_in_another_store_object_wake_the_waiter_by_notify() {
    let options = isolated_options().unwrap();
    let waiter = open(&options).await;
    let committer = open(&options).await;
    let signal = waiter.change_signal();
    assert_eq!(signal.mechanism(), "postgres-notify");
    let id = m3_types::new_id();
    let mut execution = signal.subscribe(Topic::Execution(id.clone()));
    let mut queue = signal.subscribe(Topic::Queue);
    let mut rounds = signal.subscribe(Topic::Rounds);
    await_listening(&waiter, &mut [&mut execution, &mut queue, &mut rounds]).await;

    // Nothing in the waiter's store object writes: only a notification can signal it.
    let spec = NewExecution::new(json!({"prompt": "x"})).with_execution_id(id.clone());
    committer.create_execution(spec).await.unwrap();
    signalled(&mut execution, "a created execution").await;

    committer
        .transition(&id, ExecutionStatus::Queued, None)
        .await
        .unwrap();
    signalled(&mut queue, "a queued execution").await;
    let seen = waiter.get_execution(&id).await.unwrap().unwrap();
    assert_eq!(seen.lifecycle, ExecutionStatus::Queued);

    let committed_rounds = committer.managed_input_store().await.unwrap();
    let created = committed_rounds
        .create_round(CreateRound::new(
            sample_round(&id, "r1"),
            "worker-a",
            PATIENCE,
        ))
        .await
        .unwrap();
    signalled(&mut rounds, "a created round").await;
    let _ = tokio::time::timeout(Duration::ZERO, execution.changed()).await;

    let round = RoundRef::new(id.clone(), "r1");
    committed_rounds
        .submit_responses(
            &round,
            &LeaseRef::of(&created.lease),
            sample_submission("key-1"),
        )
        .await
        .unwrap();
    signalled(&mut execution, "a committed response").await;
    let waiter_rounds = waiter.managed_input_store().await.unwrap();
    let seen = waiter_rounds.get_round(&round).await.unwrap().unwrap();
    assert_eq!(seen.status, ManagedInputStatus::ResponseValidated);

    let finish = FinishExecution::new(id.clone(), ExecutionOutcome::Cancelled);
    committer.finish(finish).await.unwrap();
    signalled(&mut execution, "a finished execution").await;
    assert!(
        waiter
            .get_execution(&id)
            .await
            .unwrap()
            .unwrap()
            .is_finished()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_after_its_connection_is_terminated() {
    let options = isolated_options().unwrap();
    let waiter = open(&options).await;
    let committer = open(&options).await;
    let id = committer
        .create_execution(NewExecution::new(json!({})))
        .await
        .unwrap()
        .execution_id;
    let mut changes = waiter.change_signal().subscribe(Topic::All);
    await_listening(&waiter, &mut [&mut changes]).await;
    let admin = sqlx::PgPool::connect(&test_server_url().unwrap())
        .await
        .unwrap();
    let channel = channel_name(options.schema());
    let listener_pid = || async {
        sqlx::query_scalar::<_, i32>(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'm3rs-change-listener' \
             AND query = 'LISTEN \"' || $1::text || '\"'",
        )
        .bind(&channel)
        .fetch_optional(&admin)
        .await
        .unwrap()
    };
    let killed = listener_pid()
        .await
        .expect("the listener's connection is visible");
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(killed)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(terminated);
    // Losing the connection wakes every waiter (notifications may have been lost).
    signalled(&mut changes, "the lost listener connection").await;
    tokio::time::timeout(PATIENCE, async {
        while listener_pid().await.is_none_or(|pid| pid == killed)
            || !waiter.is_listening_for_changes()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listener reconnects");
    let _ = tokio::time::timeout(Duration::ZERO, changes.changed()).await;

    committer.request_cancel(&id, Some("test")).await.unwrap();
    signalled(&mut changes, "a cancel request after the reconnect").await;
    assert!(waiter.is_cancel_requested(&id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_in_other_schemas_do_not_wake_each_other() {
    let tenant_a = isolated_options().unwrap();
    let tenant_b = tenant_a.clone().schema_name(&fresh_schema()).unwrap();
    assert_ne!(
        channel_name(tenant_a.schema()),
        channel_name(tenant_b.schema())
    );
    let waiter = open(&tenant_a).await;
    let neighbour = open(&tenant_b).await;
    let mut changes = waiter.change_signal().subscribe(Topic::All);
    await_listening(&waiter, &mut [&mut changes]).await;
    // Listening: the waiter re-reads on its own only at the rare safety poll.
    assert_eq!(changes.fallback(), m3_store::signal::SAFETY_POLL);
    neighbour
        .create_execution(NewExecution::new(json!({})))
        .await
        .unwrap();
    // Nothing wakes a waiter of tenant A (a live signal's safety poll is 30 s away; a
    // notification arrives within milliseconds, so two seconds of silence say enough).
    let woken = tokio::time::timeout(Duration::from_secs(2), changes.changed()).await;
    assert!(
        woken.is_err(),
        "woken by another schema's commit: {woken:?}"
    );
    let colleague = open(&tenant_a).await;
    colleague
        .create_execution(NewExecution::new(json!({})))
        .await
        .unwrap();
    signalled(&mut changes, "a commit in the same schema").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_signal_off_a_commit_elsewhere_is_seen_at_the_fallback_poll() {
    let options = isolated_options().unwrap().change_signal(false);
    let waiter = open(&options).await;
    let committer = open(&options).await;
    assert_eq!(waiter.change_signal().mechanism(), "in-process");
    let id = committer
        .create_execution(NewExecution::new(json!({})))
        .await
        .unwrap()
        .execution_id;
    let mut changes = waiter
        .change_signal()
        .subscribe(Topic::Execution(id.clone()));
    // Nobody listens: the short fallback poll.
    assert_eq!(changes.fallback(), m3_store::signal::DEFAULT_FALLBACK_POLL);
    committer.request_cancel(&id, None).await.unwrap();
    assert_eq!(changes.changed().await, Wake::Poll);
    assert!(waiter.is_cancel_requested(&id).await.unwrap());
    assert!(!waiter.is_listening_for_changes());
    // The store object's own commits still wake its own waiters at once.
    waiter
        .transition(&id, ExecutionStatus::Queued, None)
        .await
        .unwrap();
    assert_eq!(changes.changed().await, Wake::Signalled);
}
