//! A SQLite write whose caller is dropped while it waits for the file's write lock leaves
//! nothing behind: the next write of the same store object succeeds as soon as the lock is
//! free. (Before, the dropped write's connection went back to the pool and entered the
//! transaction once the lock came free, holding the lock with nobody to end it: a codex
//! execution cancelled mid-setup could then record neither its round's failure nor its end.)

use std::time::Duration;

use m3_store::{ExecutionStore, NewExecution, SqliteExecutionStore, SqliteStoreOptions};
use serde_json::json;
use sqlx::Connection;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_while_waiting_for_the_lock_does_not_keep_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let options = SqliteStoreOptions::new().busy_timeout(Duration::from_secs(2));
    let store = SqliteExecutionStore::open_with(&path, options).await?;
    let execution = store
        .create_execution(NewExecution::new(json!({"prompt": "p"})))
        .await?;
    let id = execution.execution_id.as_str();

    // Another connection holds the write lock.
    let mut other =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await?;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut other).await?;

    // A write starts, waits for the lock, and its caller gives up on it.
    let waited = tokio::time::timeout(
        Duration::from_millis(300),
        store.request_cancel(id, Some("dropped")),
    )
    .await;
    assert!(
        waited.is_err(),
        "the write should still be waiting for the lock"
    );

    // The lock comes free; the dropped write must not take it and keep it.
    sqlx::query("ROLLBACK").execute(&mut other).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let cancelled = store.request_cancel(id, Some("kept")).await?;
    assert!(cancelled.cancel_requested_at.is_some());
    // And another connection can write too: nobody holds the lock.
    sqlx::query("BEGIN IMMEDIATE").execute(&mut other).await?;
    sqlx::query("ROLLBACK").execute(&mut other).await?;
    other.close().await?;
    Ok(())
}
