//! A kit with executions in SQLite and managed-input rounds in a store of the caller's
//! choosing (here the in-memory backend, handed over as any custom `ManagedInputStore`):
//! the shipping scenario completes with its round in that store, and recovery fails that
//! store's unresolved rounds. Both recovery and a round deadline are driven by a
//! `ManualClock` the stores share: the tests move time instead of sleeping through it.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_store::memory::MemoryManagedInputStore;
use m3_store::{
    AcquireLease, CreateRound, ExecutionStore, ManagedInputStore, NewExecution,
    SqliteExecutionStore, SqliteStoreOptions,
};
use m3_tests::runtime_support::{WAIT, address, call, completes, pending, shipping};
use m3_tests::store_support::address_round;
use m3_types::{ExecutionOutcome, HumanInput, ManagedInputStatus, ManualClock};
use serde_json::json;
use time::macros::datetime;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

/// The SQLite execution store at `path` and a memory rounds store, both on `clock`.
async fn stores(
    path: &std::path::Path,
    clock: &ManualClock,
) -> (Arc<dyn ExecutionStore>, Arc<MemoryManagedInputStore>) {
    let clock = Arc::new(clock.clone());
    let executions =
        SqliteExecutionStore::open_with(path, SqliteStoreOptions::new().clock(clock.clone()))
            .await
            .unwrap();
    (
        Arc::new(executions),
        Arc::new(MemoryManagedInputStore::with_clock(clock)),
    )
}

async fn kit_on(
    executions: &Arc<dyn ExecutionStore>,
    rounds: &Arc<MemoryManagedInputStore>,
) -> AsyncMcpTestKit {
    let rounds: Arc<dyn ManagedInputStore> = rounds.clone();
    AsyncMcpTestKit::builder()
        .shared_store(Arc::clone(executions))
        .managed_input_store(rounds)
        .build()
        .await
        .unwrap()
}

fn managed() -> SubmitOptions {
    SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .tools(["shipping:book_shipment"])
        .human_input(HumanInput::Managed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipping_scenario_keeps_its_round_in_the_custom_store() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(datetime!(2026-12-01 12:00:00 UTC));
    let (executions, rounds) = stores(&dir.path().join("m3.sqlite"), &clock).await;
    let kit = kit_on(&executions, &rounds).await;
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent.submit("Book a shipment.", managed()).await.unwrap();
    let round = pending(&handle).await;
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "k-1")
        .await
        .unwrap();
    completes(&handle, WAIT).await.unwrap();
    // The round lives in the custom store, and the SQLite file's own rounds store has none.
    let custom = rounds.list_rounds(handle.execution_id()).await.unwrap();
    assert_eq!(custom.len(), 1);
    assert_eq!(custom[0].round_id(), round.round_id);
    assert_eq!(custom[0].status, ManagedInputStatus::Resolved);
    let own = SqliteExecutionStore::open(dir.path().join("m3.sqlite"))
        .await
        .unwrap()
        .managed_input_store()
        .await
        .unwrap();
    assert!(
        own.list_rounds(handle.execution_id())
            .await
            .unwrap()
            .is_empty()
    );
    // The round's creation time is the shared manual clock's.
    assert_eq!(custom[0].created_at, datetime!(2026-12-01 12:00:00 UTC));
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_fails_the_custom_stores_unresolved_round_once_the_manual_clock_passes_the_lease()
{
    let dir = tempfile::tempdir().unwrap();
    let start = datetime!(2026-12-01 12:00:00 UTC);
    let clock = ManualClock::new(start);
    let (executions, rounds) = stores(&dir.path().join("m3.sqlite"), &clock).await;
    // A worker that took the execution and asked for input, then vanished.
    let record = executions
        .create_execution(
            NewExecution::new(json!({"agent": "scripted"})).with_human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let id = record.execution_id.clone();
    executions
        .acquire_lease(AcquireLease::new(
            &id,
            "lost-worker",
            Duration::from_secs(60),
        ))
        .await
        .unwrap();
    rounds
        .create_round(CreateRound::new(
            address_round(&id, "round-1", start),
            "lost-worker",
            Duration::from_secs(60),
        ))
        .await
        .unwrap();
    // Before the lease ends, a kit opening the stores recovers nothing.
    let kit = kit_on(&executions, &rounds).await;
    assert!(kit.recover().await.unwrap().executions.is_empty());
    clock.advance(time::Duration::seconds(61));
    let report = kit.recover().await.unwrap();
    assert_eq!(report.executions.len(), 1, "{report:?}");
    let failed = rounds.list_rounds(&id).await.unwrap();
    assert_eq!(failed[0].status, ManagedInputStatus::Failed);
    assert_eq!(
        failed[0].failure_code.as_deref(),
        Some("recovery_unavailable")
    );
    let finished = executions.get_execution(&id).await.unwrap().unwrap();
    assert_eq!(finished.outcome, Some(ExecutionOutcome::Failed));
    assert!(kit.recover().await.unwrap().executions.is_empty(), "once");
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_deadline_passes_when_the_manual_clock_does() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(datetime!(2026-12-01 12:00:00 UTC));
    let (executions, rounds) = stores(&dir.path().join("m3.sqlite"), &clock).await;
    let kit = kit_on(&executions, &rounds).await;
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    // An hour to answer, a day of worker lease: only the deadline can end the wait.
    let options = managed()
        .input_deadline(Duration::from_secs(3600))
        .lease(Duration::from_secs(86_400));
    let handle = agent.submit("Book a shipment.", options).await.unwrap();
    let round = pending(&handle).await;
    assert_eq!(round.deadline, Some(datetime!(2026-12-01 13:00:00 UTC)));
    clock.advance(time::Duration::hours(2));
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::TimedOut),
        "{:?}",
        result.error
    );
    let error = result.error.unwrap();
    assert_eq!(error.details["reason"], json!("elicitation_deadline"));
    let stored = rounds.list_rounds(handle.execution_id()).await.unwrap();
    assert_eq!(stored[0].status, ManagedInputStatus::Failed);
    assert_eq!(stored[0].failure_code.as_deref(), Some("timeout"));
    kit.close().await.unwrap();
}
