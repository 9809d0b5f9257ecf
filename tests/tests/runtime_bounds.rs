//! The bounds of `m3_types::limits` on every entry path of a real execution (real SQLite,
//! real server processes): an answer nested past the bound is refused and nothing is
//! stored; a server result nested past it fails the execution at once with
//! `protocol_error`, and the execution stays readable; a round over the configured
//! round limits is refused before it is stored; a listing that meets an unreadable row
//! reports it instead of leaving it out; a tool the server never lists is refused
//! (`tool_not_listed`), not called.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use m3_kit::{AgentSelection, AsyncExecutionHandle, AsyncMcpTestKit, Script, SubmitOptions};
use m3_tests::runtime_support::{WAIT, completes, ends, failure, pending, python};
use m3_types::limits::MAX_NESTING_DEPTH;
use m3_types::{
    ElicitationResponse, ExecutionOutcome, HumanInput, ManagedInputStatus, ResponseMap,
    RoundLimits, StdioServer,
};
use serde_json::{Map, Value, json};
use sqlx::{ConnectOptions, SqliteConnection};

const RAW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/peers/raw_elicitation_server.py"
);
const FAULTY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/fault_server.py");

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!({ "a": value });
    }
    value
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// The raw server asking one form question (`name`), as binding `raw` (tool `raw:ask`).
fn raw_server(message: &str) -> StdioServer {
    let params = json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    });
    StdioServer::new("raw", python()).with_args([
        RAW.to_owned(),
        "--era".to_owned(),
        "modern".to_owned(),
        "--params".to_owned(),
        params.to_string(),
    ])
}

/// The fault server with `fault` in `era`, as binding `faulty` (tool `faulty:ship`).
fn faulty_server(fault: &str, era: &str) -> StdioServer {
    StdioServer::new("faulty", python()).with_args([
        FAULTY.to_owned(),
        "--fault".to_owned(),
        fault.to_owned(),
        "--era".to_owned(),
        era.to_owned(),
    ])
}

async fn kit_with(db: &std::path::Path, limits: RoundLimits) -> AsyncMcpTestKit {
    AsyncMcpTestKit::builder()
        .database(db)
        .round_limits(limits)
        .build()
        .await
        .unwrap()
}

async fn submit(kit: &AsyncMcpTestKit, server: StdioServer, tool: &str) -> AsyncExecutionHandle {
    let agent = kit
        .agents([AgentSelection::scripted(Script::call(tool, Map::new()))])
        .unwrap()
        .remove(0);
    let options = SubmitOptions::new()
        .server(server)
        .tools([tool])
        .human_input(HumanInput::Managed);
    agent.submit("Call the tool.", options).await.unwrap()
}

/// Every read of the execution works: status, result, rounds, and the listing.
async fn readable(kit: &AsyncMcpTestKit, handle: &AsyncExecutionHandle) {
    handle.snapshot().await.unwrap();
    handle.result(Some(WAIT)).await.unwrap();
    handle.rounds().await.unwrap();
    let listed = kit.executions().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|s| s.state.execution_id == handle.execution_id()),
        "the listing shows the execution"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_nested_past_the_bound_is_refused_through_the_kit_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit_with(&dir.path().join("m3.sqlite"), RoundLimits::new()).await;
    let handle = submit(&kit, raw_server("Your name?"), "raw:ask").await;
    let round = pending(&handle).await;
    let content = object(json!({"name": "Ada"}));
    let deep = ResponseMap::from([(
        "q".to_owned(),
        ElicitationResponse::accept(content.clone()).with_meta(object(nested(120))),
    )]);
    let error = handle
        .respond_elicitation(&round.round_id, deep, "k-deep")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid", "{error}");
    assert_eq!(error.details()["reason"], "limit_exceeded", "{error:?}");
    assert_eq!(error.details()["limit"], "nesting_depth", "{error:?}");
    assert_eq!(error.details()["max"], json!(MAX_NESTING_DEPTH));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(
        rounds[0].status,
        ManagedInputStatus::Pending,
        "nothing stored"
    );
    // A good answer still completes the execution, and everything reads.
    let good = ResponseMap::from([(
        "q".to_owned(),
        ElicitationResponse::accept(content).with_meta(object(nested(MAX_NESTING_DEPTH))),
    )]);
    handle
        .respond_elicitation(&round.round_id, good, "k-good")
        .await
        .unwrap();
    completes(&handle, WAIT).await.unwrap();
    readable(&kit, &handle).await;
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_result_nested_past_the_bound_fails_the_execution_and_it_stays_readable() {
    for era in ["modern", "legacy"] {
        let dir = tempfile::tempdir().unwrap();
        let kit = kit_with(&dir.path().join("m3.sqlite"), RoundLimits::new()).await;
        let handle = submit(&kit, faulty_server("deep-result", era), "faulty:ship").await;
        // Before the bound, the finish step failed and the execution sat until its lease
        // expired, then failed `managed_input_recovery_unavailable`.
        let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await.unwrap();
        let error = failure(&result, "protocol_error", "limit_exceeded").unwrap();
        assert_eq!(error.details["limit"], "nesting_depth", "{era}: {error:?}");
        readable(&kit, &handle).await;
        kit.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_server_never_lists_is_refused_and_never_called() {
    // Calling `ship` would crash this server; `nope` is not listed, so it must not be called.
    let dir = tempfile::tempdir().unwrap();
    let kit = kit_with(&dir.path().join("m3.sqlite"), RoundLimits::new()).await;
    let handle = submit(
        &kit,
        faulty_server("crash-mid-call", "modern"),
        "faulty:nope",
    )
    .await;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await.unwrap();
    let error = failure(&result, "invalid_argument", "tool_not_listed").unwrap();
    assert_eq!(error.details["tool"], "nope", "{error:?}");
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_over_the_configured_limits_is_refused_before_it_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let limits = RoundLimits::new().with_max_message_bytes(8);
    let kit = kit_with(&dir.path().join("m3.sqlite"), limits).await;
    let handle = submit(&kit, raw_server("A message over eight bytes"), "raw:ask").await;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await.unwrap();
    let error = failure(&result, "protocol_error", "limit_exceeded").unwrap();
    assert_eq!(error.details["limit"], "message_bytes", "{error:?}");
    assert_eq!(error.details["max"], json!(8), "{error:?}");
    assert!(handle.rounds().await.unwrap().is_empty(), "no round stored");
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reports_an_unreadable_row_instead_of_leaving_it_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m3.sqlite");
    let kit = kit_with(&path, RoundLimits::new()).await;
    let handle = submit(&kit, raw_server("Your name?"), "raw:ask").await;
    let round = pending(&handle).await;
    let answer = ResponseMap::from([(
        "q".to_owned(),
        ElicitationResponse::accept(object(json!({"name": "Ada"}))),
    )]);
    handle
        .respond_elicitation(&round.round_id, answer, "k")
        .await
        .unwrap();
    completes(&handle, WAIT).await.unwrap();
    // A foreign writer stores a result past serde_json's recursion limit.
    let deep = json!({"snapshot": nested(200)}).to_string();
    let mut foreign = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    sqlx::query("UPDATE m3rs_executions SET result_json = ? WHERE id = ?")
        .bind(deep)
        .bind(handle.execution_id())
        .execute(&mut foreign)
        .await
        .unwrap();
    close(foreign).await;
    let error = kit.executions().await.unwrap_err();
    assert_eq!(error.code(), "storage_error", "{error}");
    assert_eq!(error.details()["reason"], "stored_record_invalid");
    assert_eq!(
        error.details()["execution_id"],
        json!(handle.execution_id())
    );
    assert_eq!(error.details()["column"], "result_json");
    kit.close().await.unwrap();
}

async fn close(connection: SqliteConnection) {
    sqlx::Connection::close(connection).await.unwrap();
}
