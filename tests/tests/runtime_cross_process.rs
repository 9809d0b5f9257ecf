//! End-to-end across OS processes: a response committed by another process
//! wakes the worker (durable poll), and a worker killed with SIGKILL while a
//! round is pending is terminalized by the next kit that opens the store. Each runs on a
//! SQLite file and on a PostgreSQL schema.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use m3_tests::runtime_support::{
    WAIT, address, completes, kit, respond_from_another_process, submit_booking,
};
use m3_tests::store_support::TestDb;
use m3_types::{ExecutionOutcome, ManagedInputStatus};

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");
const RESPONDER: &str = env!("CARGO_BIN_EXE_m3-test-responder");
const WORKER: &str = env!("CARGO_BIN_EXE_m3-test-worker");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_committed_by_another_process_wakes_the_worker() {
    response_from_another_process(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_committed_by_another_process_wakes_the_worker_on_postgres() {
    response_from_another_process(TestDb::Postgres).await;
}

async fn response_from_another_process(backend: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = backend.location(dir.path()).unwrap();
    let kit = kit(&db).await.unwrap();
    let handle = submit_booking(&kit, SERVER).await.unwrap();
    let round_id =
        respond_from_another_process(RESPONDER, &db, handle.execution_id(), "Nagpur", &[]).await;

    let trace = completes(&handle, WAIT).await.unwrap();
    let call = trace.tool_calls().next().unwrap();
    let retry = call.attempts[1].input_responses.as_ref().unwrap();
    assert_eq!(
        retry["shipping_address"].content.as_ref().unwrap()["city"],
        "Nagpur"
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].round_id, round_id);
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_waiting_is_terminalized_by_the_next_kit() {
    killed_worker_terminalized(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_waiting_is_terminalized_by_the_next_kit_on_postgres() {
    killed_worker_terminalized(TestDb::Postgres).await;
}

async fn killed_worker_terminalized(backend: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = backend.location(dir.path()).unwrap();
    let mut worker = Command::new(WORKER)
        .args([db.as_str(), SERVER, "1500"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(worker.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut ids = line.split_whitespace();
    let (execution_id, round_id) = (
        ids.next().unwrap().to_owned(),
        ids.next().unwrap().to_owned(),
    );
    worker.kill().unwrap(); // SIGKILL: no cleanup runs
    worker.wait().unwrap();

    tokio::time::sleep(Duration::from_millis(1700)).await;
    let kit = kit(&db).await.unwrap(); // opening runs recovery
    let handle = kit.attach(&execution_id).await.unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    assert_eq!(
        result.error.unwrap().code.as_str(),
        "managed_input_recovery_unavailable"
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].round_id, round_id);
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(
        rounds[0].failure_code.as_deref(),
        Some("recovery_unavailable")
    );
    assert!(
        handle.pending_elicitation().await.unwrap().is_none(),
        "never pending again"
    );
    let late = handle
        .respond_elicitation(&round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(late.code(), "managed_input_state", "{late}");
    assert!(
        kit.recover().await.unwrap().executions.is_empty(),
        "recovery runs once"
    );
    kit.close().await.unwrap();
}
