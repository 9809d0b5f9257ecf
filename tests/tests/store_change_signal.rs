//! The store's change signal across OS processes: a commit in another process wakes a
//! waiter by datagram; with the signal off everything still works, at the fallback poll;
//! the socket file a killed process leaves behind breaks nothing.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use m3_kit::AsyncMcpTestKit;
use m3_store::signal::{SIGNAL_ENV, Topic, Wake};
use m3_store::{ExecutionStore, NewExecution, SqliteExecutionStore, SqliteStoreOptions};
use m3_tests::runtime_support::{WAIT, completes, respond_from_another_process, submit_booking};
use m3_types::ManagedInputStatus;

const PROBE: &str = env!("CARGO_BIN_EXE_store_execution_probe");
const RESPONDER: &str = env!("CARGO_BIN_EXE_m3-test-responder");
const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

fn signal_dir(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-signals");
    PathBuf::from(name)
}

fn sockets(db: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(signal_dir(db))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Requests cancellation of `execution_id` from another process (`signal`: whether that
/// process announces it).
fn cancel_from_another_process(db: &Path, execution_id: &str, signal: bool) {
    let mut command = Command::new(PROBE);
    command.args(["cancel", db.to_str().unwrap(), execution_id, "probe"]);
    if signal {
        command.env_remove(SIGNAL_ENV);
    } else {
        command.env(SIGNAL_ENV, "off");
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn store_with_execution(db: &Path, signal: bool) -> (SqliteExecutionStore, String) {
    let store =
        SqliteExecutionStore::open_with(db, SqliteStoreOptions::new().change_signal(signal))
            .await
            .unwrap();
    let record = store
        .create_execution(NewExecution::new(serde_json::json!({"prompt": "x"})))
        .await
        .unwrap();
    (store, record.execution_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_in_another_process_wakes_the_waiter_by_datagram() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let (store, id) = store_with_execution(&db, true).await;
    let mut changes = store
        .change_signal()
        .subscribe(Topic::Execution(id.clone()));
    assert_eq!(store.change_signal().mechanism(), "unix-datagram");
    assert_eq!(sockets(&db).len(), 1, "this process listens");
    // Nothing in this process writes: only the other process's datagram can signal.
    cancel_from_another_process(&db, &id, true);
    assert_eq!(changes.changed().await, Wake::Signalled);
    assert!(store.is_cancel_requested(&id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_signal_off_another_process_commit_is_seen_at_the_fallback_poll() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let (store, id) = store_with_execution(&db, false).await;
    let mut changes = store
        .change_signal()
        .subscribe(Topic::Execution(id.clone()));
    // Signal off here too: nothing but the short fallback poll can see other processes.
    assert_eq!(changes.fallback(), m3_store::signal::DEFAULT_FALLBACK_POLL);
    cancel_from_another_process(&db, &id, false);
    // No datagram came: the subscription wakes by its poll, and the row has the truth.
    assert_eq!(changes.changed().await, Wake::Poll);
    assert!(store.is_cancel_requested(&id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_signal_off_an_answer_from_another_process_still_completes_the_execution() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let store =
        SqliteExecutionStore::open_with(&db, SqliteStoreOptions::new().change_signal(false))
            .await
            .unwrap();
    let kit = AsyncMcpTestKit::builder()
        .store(store)
        .build()
        .await
        .unwrap();
    assert_eq!(kit.store().change_signal().mechanism(), "in-process");
    let handle = submit_booking(&kit, SERVER).await.unwrap();
    respond_from_another_process(
        RESPONDER,
        db.to_str().unwrap(),
        handle.execution_id(),
        "Nagpur",
        &[(SIGNAL_ENV, "off")],
    )
    .await;
    assert!(sockets(&db).is_empty(), "no process bound a socket");
    let trace = completes(&handle, WAIT).await.unwrap();
    let retry = trace.tool_calls().next().unwrap().attempts[1]
        .input_responses
        .clone()
        .unwrap();
    assert_eq!(
        retry["shipping_address"].content.as_ref().unwrap()["city"],
        "Nagpur"
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
    assert_eq!(rounds[0].delivery_attempts, 1);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_of_a_killed_process_is_removed_and_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let (store, id) = store_with_execution(&db, true).await;
    // A responder waits for a round that never comes: it listens, then is killed.
    let mut waiter = Command::new(RESPONDER)
        .args([db.to_str().unwrap(), &id, "Pune"])
        .env_remove(SIGNAL_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sockets(&db).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    waiter.kill().unwrap();
    waiter.wait().unwrap();
    let stale = sockets(&db);
    assert_eq!(stale.len(), 1, "SIGKILL leaves the socket file behind");

    let mut changes = store
        .change_signal()
        .subscribe(Topic::Execution(id.clone()));
    cancel_from_another_process(&db, &id, true);
    assert_eq!(changes.changed().await, Wake::Signalled);
    assert!(!stale[0].exists(), "the next sender removed the stale file");
    assert_eq!(sockets(&db).len(), 1, "only this process's socket is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_in_another_process_wakes_the_waiter_by_notify_on_postgres() {
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    let store = m3_store_postgres::PgExecutionStore::open(&url)
        .await
        .unwrap();
    let id = store
        .create_execution(NewExecution::new(serde_json::json!({"prompt": "x"})))
        .await
        .unwrap()
        .execution_id;
    let mut changes = store
        .change_signal()
        .subscribe(Topic::Execution(id.clone()));
    assert_eq!(store.change_signal().mechanism(), "postgres-notify");
    tokio::time::timeout(WAIT, async {
        while !store.is_listening_for_changes() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the change listener connects");
    // Take the wake-up the listener's connecting published.
    let _ = tokio::time::timeout(Duration::ZERO, changes.changed()).await;
    // Nothing in this process writes: only the other process's NOTIFY can signal. The
    // process starts slower than a fallback interval on a loaded machine: polls may come first.
    cancel_from_another_process(Path::new(&url), &id, true);
    let woken = tokio::time::timeout(WAIT, async {
        while changes.changed().await != Wake::Signalled {}
    })
    .await;
    assert!(woken.is_ok(), "no notification woke the waiter");
    assert!(store.is_cancel_requested(&id).await.unwrap());
}
