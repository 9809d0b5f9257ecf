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

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Store, python, refs, shell_quote, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

fn peer_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/task_server.py")
        .display()
        .to_string()
}

/// `tk=python task_server.py --log LOG` (stdio).
fn task_server(log: &Path) -> String {
    format!(
        "tk={} {} --log {}",
        shell_quote(&python()),
        shell_quote(&peer_script()),
        shell_quote(&log.display().to_string())
    )
}

/// The peer over Streamable HTTP on a free loopback port, killed on drop.
struct HttpPeer {
    child: Child,
    url: String,
}

impl HttpPeer {
    fn start(log: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python())
            .args([
                peer_script(),
                "--http".into(),
                port.to_string(),
                "--log".into(),
            ])
            .arg(log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python starts (set M3_TEST_PYTHON or run scripts/test.sh)");
        wait_until(Duration::from_secs(30), "the HTTP peer to listen", || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self {
            child,
            url: format!("tk=http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

    let done = store.m3(&refs(&run_args(&server, "protocol_error_job", "{}")));
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

/// Runs `tool` and answers each round with `answer(key)` from another process; returns the
/// result line and how many rounds there were.
fn answer_rounds(store: &Store, args: &[String], answer: impl Fn(&str) -> String) -> (Value, u32) {
    let mut run = store.spawn(&refs(args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let mut rounds = 0;
    loop {
        let event = run.next_json();
        if event["type"] != "round_pending" {
            assert_eq!(event["type"], "result", "{event}");
            let done = run.finish();
            assert_eq!(done.code, 0, "{event}\n{}", done.stderr);
            return (event, rounds);
        }
        rounds += 1;
        let round_id = event["round_id"].as_str().unwrap();
        let mut respond = vec![
            "respond".to_owned(),
            execution.clone(),
            round_id.to_owned(),
            "--idempotency-key".to_owned(),
            format!("k-{round_id}"),
        ];
        for key in event["requests"].as_object().unwrap().keys() {
            respond.push("--accept".to_owned());
            respond.push(format!("{key}={}", answer(key)));
        }
        store.m3(&refs(&respond)).expect_code(0);
    }
}

#[test]
fn over_streamable_http_tasks_requests_name_their_task_and_mrtr_composes_with_tasks() {
    let store = Store::new();
    let log = store.db().with_file_name("task-server-http.jsonl");
    let peer = HttpPeer::start(&log);
    let with_trust = |tool: &str, arguments: &str| {
        let mut args = run_args(&peer.url, tool, arguments);
        args.extend(["--server-trust".to_owned(), "tk=loopback".to_owned()]);
        args
    };
    // The peer refuses (400, -32020) a tasks/* request whose Mcp-Name is not its task id.
    let (result, rounds) = answer_rounds(
        &store,
        &with_trust("confirm_delete", r#"{"filename": "d.txt"}"#),
        |_| r#"{"confirm": false}"#.to_owned(),
    );
    assert_eq!(rounds, 1);
    assert_eq!(result["turns"][0]["final_text"], "kept d.txt", "{result}");
    assert_eq!(methods(&log, "tasks/update").len(), 1);
    assert!(
        methods(&log, "header-mismatch").is_empty(),
        "{:?}",
        received(&log)
    );

    // An MRTR round (input_required in the tools/call result), then a task: two rounds,
    // the first answered by a retry, the task's own by tasks/update (none here).
    let (result, rounds) = answer_rounds(&store, &with_trust("test_tool_with_task", "{}"), |_| {
        r#"{"name": "Ada"}"#.to_owned()
    });
    assert_eq!(rounds, 1);
    assert_eq!(result["turns"][0]["final_text"], "Hello, Ada!", "{result}");
    let attempts = result["trace"]["operations"][0]["attempts"]
        .as_array()
        .unwrap();
    assert_eq!(attempts.len(), 2, "{result}");
    assert_eq!(
        attempts[0]["outcome"]["status"], "input_required",
        "{result}"
    );
    assert!(attempts[1]["task_id"].is_string(), "{result}");

    // Two questions at once: one round with both keys, one tasks/update with both answers.
    let (result, rounds) = answer_rounds(&store, &with_trust("multi_input", "{}"), |key| {
        if key.starts_with("name-") {
            r#"{"name": "Ada"}"#.to_owned()
        } else {
            r#"{"confirm": true}"#.to_owned()
        }
    });
    assert_eq!(rounds, 1);
    let text = result["turns"][0]["final_text"].as_str().unwrap();
    assert!(text.contains("Ada") && text.contains("true"), "{result}");
    let updates = methods(&log, "tasks/update");
    assert_eq!(updates.len(), 2, "{updates:?}");
    assert_eq!(
        updates[1]["params"]["inputResponses"]
            .as_object()
            .unwrap()
            .len(),
        2
    );
    assert!(
        methods(&log, "header-mismatch").is_empty(),
        "{:?}",
        received(&log)
    );
}
