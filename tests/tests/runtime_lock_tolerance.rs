//! A busy database is not a lost lease: while another connection holds the SQLite write lock
//! longer than the busy timeout, a waiting managed execution keeps its leases (the failed
//! renewals are retried while the lease is live) and completes once answered; opening a kit
//! on the busy store still works (recovery at open is skipped, reads go on).

use std::path::Path;
use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_store::{
    AcquireLease, ExecutionStore, NewExecution, SqliteExecutionStore, SqliteStoreOptions,
};
use m3_tests::runtime_support::{
    WAIT, address, call, lifecycle, pending, shipping, submit_booking,
};
use m3_types::{ExecutionOutcome, ExecutionStatus, HumanInput, ManagedInputStatus};
use serde_json::json;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The busy timeout of the kit's store: a renewal waiting this long for the lock fails.
const BUSY: Duration = Duration::from_millis(100);

/// A connection of its own (outside every m3 store and its in-process writer queue) that
/// holds the write lock from [`hold`] until [`release`].
async fn hold(db: &Path) -> Result<SqliteConnection, sqlx::Error> {
    let mut conn = SqliteConnectOptions::new().filename(db).connect().await?;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await?;
    Ok(conn)
}

async fn release(mut conn: SqliteConnection) -> Result<(), sqlx::Error> {
    sqlx::query("ROLLBACK").execute(&mut conn).await?;
    Ok(())
}

async fn busy_kit(db: &Path) -> m3_types::Result<AsyncMcpTestKit> {
    let store =
        SqliteExecutionStore::open_with(db, SqliteStoreOptions::new().busy_timeout(BUSY)).await?;
    AsyncMcpTestKit::builder().store(store).build().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_lock_held_past_the_busy_timeout_does_not_fail_a_waiting_execution() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("m3.sqlite");
    let kit = busy_kit(&db).await?;
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    let handle = agent
        .submit(
            "Book a shipment.",
            SubmitOptions::new()
                .server(shipping(SERVER, "modern"))
                .human_input(HumanInput::Managed)
                .lease(Duration::from_secs(6))
                .renew_every(Duration::from_millis(200)),
        )
        .await?;
    let round = pending(&handle).await;
    lifecycle(&handle, ExecutionStatus::WaitingForInput).await;

    // Many renewals of both leases (execution and round) fail with SQLITE_BUSY meanwhile;
    // the leases themselves have seconds left.
    let lock = hold(&db).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    release(lock).await?;

    let stored = handle.rounds().await?;
    assert_eq!(stored[0].status, ManagedInputStatus::Pending, "{stored:?}");
    let key = round.requests.keys().next().ok_or("no request")?.clone();
    handle
        .respond_elicitation(&round.round_id, address(&key, "Pune"), "after-the-lock")
        .await?;
    let result = handle.result(Some(WAIT)).await?;
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    kit.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kit_opens_and_reads_a_store_whose_write_lock_is_held() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("m3.sqlite");
    let kit = busy_kit(&db).await?;
    let handle = submit_booking(&kit, SERVER).await?;
    let round = pending(&handle).await;

    let lock = hold(&db).await?;
    let reader = busy_kit(&db).await?;
    let seen = reader.attach(handle.execution_id()).await?;
    let waiting = seen
        .pending_elicitation()
        .await?
        .ok_or("no pending round")?;
    assert_eq!(waiting.round_id, round.round_id);
    assert_eq!(reader.executions().await?.len(), 1);
    reader.close().await?;
    release(lock).await?;

    handle.cancel().await?;
    handle.result(Some(WAIT)).await?;
    kit.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_at_open_is_skipped_while_the_write_lock_is_held() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("m3.sqlite");
    let store =
        SqliteExecutionStore::open_with(&db, SqliteStoreOptions::new().busy_timeout(BUSY)).await?;
    let id = store
        .create_execution(NewExecution::new(json!({"prompt": "gone"})))
        .await?
        .execution_id;
    // A worker that took the lease and vanished: it expires at once.
    store
        .acquire_lease(AcquireLease::new(
            &id,
            "worker-gone",
            Duration::from_millis(1),
        ))
        .await?;
    tokio::time::sleep(Duration::from_millis(20)).await;

    let lock = hold(&db).await?;
    let reader = busy_kit(&db).await?;
    let snapshot = reader.attach(&id).await?.snapshot().await?;
    assert!(!snapshot.lifecycle.is_terminal(), "{snapshot:?}");
    assert!(
        reader.recover().await.is_err(),
        "recover itself reports the busy store"
    );
    reader.close().await?;
    release(lock).await?;

    let next = busy_kit(&db).await?;
    let snapshot = next.attach(&id).await?.snapshot().await?;
    assert_eq!(snapshot.outcome, Some(ExecutionOutcome::Interrupted));
    next.close().await?;
    Ok(())
}
