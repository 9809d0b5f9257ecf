//! The tasks extension of MCP 2026-07-28 (`io.modelcontextprotocol/tasks`) against a server
//! that runs tool calls as tasks (`tests/peers/task_server.py`, written from the
//! specification: the MCP Python SDK 2.3.0 does not ship the extension). A task that asks
//! for input is a managed round like any other: `m3 run --human-input managed` in one
//! process, the question seen by `m3 pending` and answered by `m3 respond` from another,
//! delivered once with `tasks/update`; on SQLite and on PostgreSQL. A task that needs no
//! input completes, a failed task is a typed error, and a cancelled execution cancels its
//! task on the server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{Store, python, refs, shell_quote};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// `tk=python task_server.py --log LOG` (stdio).
fn task_server(log: &Path) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/task_server.py");
    format!(
        "tk={} {} --log {}",
        shell_quote(&python()),
        shell_quote(&script.display().to_string()),
        shell_quote(&log.display().to_string())
    )
}

fn run_args(server: &str, tool: &str, arguments: &str) -> Vec<String> {
    [
        "--json",
        "run",
        "--server",
        server,
        "--call",
        &format!("tk:{tool}"),
        "--arguments",
        arguments,
        "--human-input",
        "managed",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

/// The requests the server received, in order (its `--log`).
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn methods(log: &Path, method: &str) -> Vec<Value> {
    received(log)
        .into_iter()
        .filter(|r| r["method"] == method)
        .collect()
}

#[test]
fn a_task_asking_for_input_is_a_managed_round_answered_from_another_process() {
    answered_through_tasks_update(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn a_task_asking_for_input_is_a_managed_round_on_postgres() {
    answered_through_tasks_update(&Store::postgres());
}

fn answered_through_tasks_update(store: &Store) {
    let log = store.db().with_file_name("task-server.jsonl");
    let args = run_args(
        &task_server(&log),
        "confirm_delete",
        r#"{"filename": "a.txt"}"#,
    );
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["type"], "round_pending", "{round}");
    assert_eq!(round["operation_name"], "confirm_delete", "{round}");
    let requests = round["requests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{round}");
    let (key, request) = requests.iter().next().unwrap();
    assert!(key.starts_with("confirm-"), "{round}");
    assert_eq!(request["message"], "Delete a.txt?", "{round}");
    let round_id = round["round_id"].as_str().unwrap().to_owned();

    // Another process sees the task's question.
    let pending = store.m3(&["pending", &execution]).expect_code(0);
    assert!(
        pending.stdout.contains("Delete a.txt?"),
        "{}",
        pending.stdout
    );
    store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "task-1",
            "--accept",
            &format!(r#"{key}={{"confirm": true}}"#),
        ])
        .expect_code(0);
    // The same answer again is the same delivery, not a second one.
    store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "task-1",
            "--accept",
            &format!(r#"{key}={{"confirm": true}}"#),
        ])
        .expect_code(0);
    let done = run.finish();
    assert_eq!(
        done.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert_eq!(
        result["turns"][0]["final_text"], "deleted a.txt",
        "{result}"
    );
    let attempts = &result["trace"]["operations"][0]["attempts"];
    assert_eq!(attempts.as_array().unwrap().len(), 1, "{result}");
    let task_id = attempts[0]["task_id"].as_str().unwrap().to_owned();
    assert_eq!(attempts[0]["rounds"][0]["request_keys"][0], key.as_str());

    // The server got the answer exactly once, for its task, with the key it asked under.
    let updates = methods(&log, "tasks/update");
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["params"]["taskId"], task_id.as_str());
    assert_eq!(
        updates[0]["params"]["inputResponses"][key.as_str()],
        serde_json::json!({"action": "accept", "content": {"confirm": true}})
    );
    // Every request declared the extension; the task ended, so nothing was cancelled.
    for request in received(&log) {
        assert!(
            request["params"]["declared"]["extensions"]
                .get("io.modelcontextprotocol/tasks")
                .is_some(),
            "{request}"
        );
    }
    assert!(methods(&log, "tasks/cancel").is_empty());
}

#[test]
fn a_task_without_input_completes_and_a_failed_task_is_a_typed_error() {
    let store = Store::new();
    let log = store.db().with_file_name("task-server.jsonl");
    let server = task_server(&log);
    let done = store.m3(&refs(&run_args(
        &server,
        "slow_compute",
        r#"{"seconds": 0.3}"#,
    )));
    assert_eq!(
        done.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        result["turns"][0]["final_text"], "computed in 0.3 s",
        "{result}"
    );
    assert_eq!(result["trace"]["operations"][0]["rounds"], 0, "{result}");
    assert!(methods(&log, "tasks/get").len() >= 2, "polled until done");
    assert!(methods(&log, "tasks/update").is_empty());

    let done = store.m3(&refs(&run_args(&server, "failing_job", "{}")));
    assert_eq!(
        done.code, 9,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "failed", "{result}");
    let error = &result["error"];
    assert_eq!(error["code"], "protocol_error", "{result}");
    assert_eq!(error["details"]["reason"], "task_failed", "{result}");
    assert_eq!(error["details"]["jsonrpc_code"], -32603, "{result}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("the job crashed"),
        "{result}"
    );
}

#[test]
fn a_cancelled_execution_cancels_its_task_on_the_server_sigterm_or_m3_cancel() {
    let store = Store::new();
    let log = store.db().with_file_name("task-server.jsonl");
    let args = run_args(
        &task_server(&log),
        "confirm_delete",
        r#"{"filename": "b.txt"}"#,
    );
    let mut run = store.spawn(&refs(&args));
    run.next_json();
    let round = run.next_json();
    assert_eq!(round["type"], "round_pending", "{round}");
    kill(
        Pid::from_raw(i32::try_from(run.child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let stopped = run.finish();
    assert_eq!(stopped.code, 143, "{}", stopped.stderr);
    let calls = methods(&log, "tools/call");
    let cancels = methods(&log, "tasks/cancel");
    assert_eq!(cancels.len(), 1, "{:?}", received(&log));
    let gets = methods(&log, "tasks/get");
    assert_eq!(cancels[0]["params"]["taskId"], gets[0]["params"]["taskId"]);
    assert_eq!(calls.len(), 1);
    assert!(methods(&log, "tasks/update").is_empty());

    // `m3 cancel` from another process does the same.
    let log = store.db().with_file_name("task-server-2.jsonl");
    let args = run_args(
        &task_server(&log),
        "confirm_delete",
        r#"{"filename": "c.txt"}"#,
    );
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    assert_eq!(run.next_json()["type"], "round_pending");
    store.m3(&["cancel", &execution]).expect_code(0);
    let stopped = run.finish();
    let result: Value = serde_json::from_str(stopped.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "cancelled", "{result}");
    let cancels = methods(&log, "tasks/cancel");
    assert_eq!(cancels.len(), 1, "{:?}", received(&log));
    assert_eq!(
        cancels[0]["params"]["taskId"],
        methods(&log, "tasks/get")[0]["params"]["taskId"]
    );
}
