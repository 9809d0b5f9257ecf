//! A stopping `m3 worker` hands what waits on a transferable round (2026-07-28 over
//! Streamable HTTP) to another live worker, which goes on with it when the answer comes;
//! stdio and legacy-era executions fail closed at the end of the drain as before; a
//! SIGKILLed worker hands nothing over; a handover racing an answer delivers it once; a
//! handover to a worker that died meanwhile fails closed. A transferable round that waits is
//! parked (nothing but its leases in the worker) and brought back by its answer, a cancel
//! request or its deadline; a stdio execution is never parked. On SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
mod queue;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Store, m3_bin, refs};
use nix::sys::signal::Signal;
use queue::{
    answer, call_log, file, logged_server, sigkill, signal, wait_for_event, wait_until, worker,
};
use serde_json::Value;

/// How many executions wait on the HTTP server when the worker stops (issue 32, item 5).
const WAITING: usize = 20;

/// The execution lease of the cases that are not about expiry (seconds): long enough that
/// a loaded machine never lets a lease lapse between a handover and its adoption.
const STEADY_LEASE: &str = "10";

/// `m3 example-server shipping --http 127.0.0.1:0 --era ERA --call-log FILE`, killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(era: &str, log: &Path) -> Self {
        let mut child = Command::new(m3_bin())
            .args([
                "example-server",
                "shipping",
                "--http",
                "127.0.0.1:0",
                "--era",
                era,
            ])
            .arg("--call-log")
            .arg(log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        Self {
            child,
            url: url.trim().to_owned(),
        }
    }

    /// The `--server` value of this server, trusted as a loopback binding.
    fn binding(&self) -> [String; 4] {
        [
            "--server".into(),
            format!("shipping={}", self.url),
            "--server-trust".into(),
            "shipping=loopback".into(),
        ]
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `m3 --json submit` of the one-step booking on `server` (its `--server` arguments).
fn submit_on(store: &Store, server: &[String]) -> String {
    submit_with(store, server, &[])
}

/// [`submit_on`] with the [`STEADY_LEASE`].
fn submit_steady(store: &Store, server: &[String]) -> String {
    submit_with(store, server, &["--lease", STEADY_LEASE])
}

/// [`submit_on`] with `extra` options of `m3 submit`.
fn submit_with(store: &Store, server: &[String], extra: &[&str]) -> String {
    let mut args: Vec<String> = vec!["--json".into(), "submit".into()];
    args.extend(server.iter().cloned());
    if !extra.contains(&"--lease") {
        args.extend(["--lease".to_owned(), queue::LEASE.to_owned()]);
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.extend(
        [
            "--human-input",
            "managed",
            "--call",
            "shipping:book_shipment",
            "--arguments",
            r#"{"weight_kg": 2}"#,
        ]
        .map(str::to_owned),
    );
    let done = store.m3(&refs(&args)).expect_code(0);
    done.json()["execution_id"].as_str().unwrap().to_owned()
}

fn stdio_binding(store: &Store) -> Vec<String> {
    vec![
        "--server".into(),
        logged_server(&file(store, "stdio-calls.jsonl"), ""),
    ]
}

/// The pending round of each execution, once every one of `executions` has one.
fn pending_rounds(store: &Store, executions: &[String]) -> Vec<(String, String)> {
    pending_listed(store, executions)
        .into_iter()
        .map(|(execution, round, _)| (execution, round))
        .collect()
}

/// [`pending_rounds`] with what `m3 pending --json` says of each: whether it survives its
/// worker's restart.
fn pending_listed(store: &Store, executions: &[String]) -> Vec<(String, String, bool)> {
    wait_until(Duration::from_secs(60), "every round pending", || {
        let done = store.m3(&["--json", "pending"]).expect_code(0);
        let rounds: Vec<(String, String, bool)> = done
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let id = |key: &str| r[key].as_str().unwrap().to_owned();
                let transferable = r["transferable"].as_bool().unwrap();
                (id("execution_id"), id("round_id"), transferable)
            })
            .filter(|(execution, _, _)| executions.contains(execution))
            .collect();
        (rounds.len() == executions.len()).then_some(rounds)
    })
}

fn status(store: &Store, execution: &str) -> Value {
    store
        .m3(&["--json", "status", execution])
        .expect_code(0)
        .json()
}

/// The stored error code of a finished execution (`m3 result`).
fn error_code(store: &Store, execution: &str) -> Option<String> {
    let result = store.m3(&["--json", "result", execution]).json();
    result["error"]["code"].as_str().map(str::to_owned)
}

fn ids(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Item 5's main case: twenty executions waiting over Streamable HTTP in the 2026-07-28 era
/// are handed to the other worker and complete after their answers, each delivered once; a
/// stdio and a legacy-era execution fail closed at the end of the drain.
fn twenty_are_handed_over_and_the_rest_fail_closed(store: &Store) {
    let modern_log = file(store, "modern-calls.jsonl");
    let modern = HttpServer::start("2026-07-28", &modern_log);
    let legacy = HttpServer::start("legacy", &file(store, "legacy-calls.jsonl"));
    let mut stopping = worker(store, &["--drain-timeout", "3", "--concurrency", "32"]);
    wait_for_event(&mut stopping, "started", None);
    let handed: Vec<String> = (0..WAITING)
        .map(|_| submit_steady(store, &modern.binding()))
        .collect();
    let stdio = submit_steady(store, &stdio_binding(store));
    let old_era = submit_steady(store, &legacy.binding());
    let mut all = handed.clone();
    all.extend([stdio.clone(), old_era.clone()]);
    let listed = pending_listed(store, &all);
    for (execution, _, transferable) in &listed {
        assert_eq!(*transferable, handed.contains(execution), "{execution}");
    }
    let rounds: Vec<(String, String)> = listed.into_iter().map(|(e, r, _)| (e, r)).collect();
    let mut staying = worker(store, &[]);
    wait_for_event(&mut staying, "started", None);
    signal(&stopping, Signal::SIGTERM);
    let report = wait_for_event(&mut stopping, "stopped", None);
    assert_eq!(
        ids(&report["handed_over"]),
        handed.iter().cloned().collect()
    );
    assert_eq!(
        ids(&report["failed_closed"]),
        BTreeSet::from([stdio.clone(), old_era.clone()])
    );
    assert_eq!(stopping.finish().code, 0);
    for _ in 0..WAITING {
        wait_for_event(&mut staying, "adopted", None);
    }
    for (execution, round) in &rounds {
        if handed.contains(execution) {
            answer(store, execution, round).expect_code(0);
        } else {
            // Failed closed: the answer is refused, never accepted for nobody.
            let late = answer(store, execution, round).expect_code(5);
            assert_eq!(late.error_code(), "managed_input_state");
        }
    }
    let mut finished = BTreeSet::new();
    while finished.len() < WAITING {
        let event = wait_for_event(&mut staying, "finished", None);
        assert_eq!(event["outcome"], "completed", "{event}");
        finished.insert(event["execution_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(finished, handed.iter().cloned().collect());
    let answered = call_log(&modern_log)
        .iter()
        .filter(|line| line["answered"] == true)
        .count();
    assert_eq!(answered, WAITING, "each answer is delivered exactly once");
    for execution in [&stdio, &old_era] {
        assert_eq!(status(store, execution)["outcome"], "failed");
        assert_eq!(
            error_code(store, execution).as_deref(),
            Some("managed_input_recovery_unavailable")
        );
    }
    // One record per operation: the continuation carries the handed-over attempts.
    assert_eq!(status(store, &handed[0])["tool_call_count"], 1);
    signal(&staying, Signal::SIGTERM);
    assert_eq!(staying.finish().code, 0);
}

#[test]
fn twenty_http_executions_are_handed_over_and_stdio_and_legacy_fail_closed() {
    twenty_are_handed_over_and_the_rest_fail_closed(&Store::new());
}

#[test]
fn twenty_http_executions_are_handed_over_and_stdio_and_legacy_fail_closed_on_postgres() {
    twenty_are_handed_over_and_the_rest_fail_closed(&Store::postgres());
}

/// SIGKILL is a worker that disappears: nothing is handed over, everything it held fails
/// closed (the specification's rule), even with another worker alive.
fn a_killed_worker_hands_nothing_over(store: &Store) {
    let server = HttpServer::start("2026-07-28", &file(store, "calls.jsonl"));
    let mut killed = worker(store, &[]);
    wait_for_event(&mut killed, "started", None);
    let execution = submit_on(store, &server.binding());
    let rounds = pending_rounds(store, std::slice::from_ref(&execution));
    let mut alive = worker(store, &[]);
    wait_for_event(&mut alive, "started", None);
    sigkill(&mut killed);
    wait_until(queue::RECOVERY_BOUND * 2, "recovery", || {
        (status(store, &execution)["outcome"] == "failed").then_some(())
    });
    assert_eq!(
        error_code(store, &execution).as_deref(),
        Some("managed_input_recovery_unavailable")
    );
    let (_, round) = &rounds[0];
    assert_eq!(answer(store, &execution, round).code, 5);
    assert!(
        alive
            .try_next_json(Duration::from_millis(500))
            .is_none_or(|e| e["type"] != "adopted"),
        "a killed worker's execution was adopted"
    );
    signal(&alive, Signal::SIGTERM);
    assert_eq!(alive.finish().code, 0);
}

#[test]
fn a_sigkilled_worker_hands_nothing_over_and_its_rounds_fail_closed() {
    a_killed_worker_hands_nothing_over(&Store::new());
}

#[test]
fn a_sigkilled_worker_hands_nothing_over_and_its_rounds_fail_closed_on_postgres() {
    a_killed_worker_hands_nothing_over(&Store::postgres());
}

/// Answers committed while the handover happens (sent at the same moment as SIGTERM):
/// each is delivered exactly once, by whichever worker holds the round when it sends.
fn answers_racing_the_handover(store: &Store) {
    let log = file(store, "calls.jsonl");
    let server = HttpServer::start("2026-07-28", &log);
    let mut stopping = worker(store, &["--drain-timeout", "10"]);
    wait_for_event(&mut stopping, "started", None);
    let executions: Vec<String> = (0..5)
        .map(|_| submit_on(store, &server.binding()))
        .collect();
    let rounds = pending_rounds(store, &executions);
    let mut staying = worker(store, &[]);
    wait_for_event(&mut staying, "started", None);
    signal(&stopping, Signal::SIGTERM);
    let answering: Vec<_> = rounds
        .iter()
        .map(|(execution, round)| {
            let mut command = store.command(&[
                "--json",
                "respond",
                execution,
                round,
                "--idempotency-key",
                "k",
                "--accept",
                r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
            ]);
            command.stdout(Stdio::null()).stderr(Stdio::null());
            command.spawn().unwrap()
        })
        .collect();
    for mut child in answering {
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(stopping.finish().code, 0);
    for execution in &executions {
        wait_until(Duration::from_secs(60), "completion", || {
            (status(store, execution)["outcome"] == "completed").then_some(())
        });
    }
    let answered = call_log(&log)
        .iter()
        .filter(|line| line["answered"] == true)
        .count();
    assert_eq!(
        answered,
        executions.len(),
        "each answer is delivered exactly once"
    );
    signal(&staying, Signal::SIGTERM);
    assert_eq!(staying.finish().code, 0);
}

#[test]
fn answers_racing_a_handover_are_delivered_exactly_once() {
    answers_racing_the_handover(&Store::new());
}

#[test]
fn answers_racing_a_handover_are_delivered_exactly_once_on_postgres() {
    answers_racing_the_handover(&Store::postgres());
}

/// The successor dies right after it was named (its registry entry still looks live): the
/// handed-over execution is never lost silently; its lease expires and it fails closed.
fn a_handover_to_a_worker_that_died(store: &Store) {
    let server = HttpServer::start("2026-07-28", &file(store, "calls.jsonl"));
    let mut stopping = worker(store, &[]);
    wait_for_event(&mut stopping, "started", None);
    let execution = submit_on(store, &server.binding());
    let rounds = pending_rounds(store, std::slice::from_ref(&execution));
    let mut dying = worker(store, &[]);
    let successor = wait_for_event(&mut dying, "started", None)["worker_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Registered (its first heartbeat) before it dies: the stopping worker sees it live.
    wait_until(Duration::from_secs(30), "the successor registered", || {
        let workers = store.m3(&["--json", "workers"]).expect_code(0).json();
        let listed = workers
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["worker_id"] == successor.as_str());
        listed.then_some(())
    });
    sigkill(&mut dying);
    signal(&stopping, Signal::SIGTERM);
    let handed = wait_for_event(&mut stopping, "handed_over", Some(&execution));
    assert_eq!(handed["successor"], successor.as_str());
    assert_eq!(stopping.finish().code, 0);
    wait_until(
        queue::RECOVERY_BOUND * 2,
        "recovery of the dead successor's lease",
        || {
            store.m3(&["--json", "recover"]);
            (status(store, &execution)["outcome"] == "failed").then_some(())
        },
    );
    assert_eq!(
        error_code(store, &execution).as_deref(),
        Some("managed_input_recovery_unavailable")
    );
    let (_, round) = &rounds[0];
    assert_eq!(answer(store, &execution, round).code, 5);
}

#[test]
fn a_handover_to_a_worker_that_died_fails_closed_never_silently() {
    a_handover_to_a_worker_that_died(&Store::new());
}

#[test]
fn a_handover_to_a_worker_that_died_fails_closed_never_silently_on_postgres() {
    a_handover_to_a_worker_that_died(&Store::postgres());
}

/// The rounds of `execution` as `m3 rounds --json` lists them: status and failure code.
fn round_states(store: &Store, execution: &str) -> Vec<(String, Option<String>)> {
    let rounds = store
        .m3(&["--json", "rounds", execution])
        .expect_code(0)
        .json();
    rounds
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let failure = r["failure_code"].as_str().map(str::to_owned);
            (r["status"].as_str().unwrap().to_owned(), failure)
        })
        .collect()
}

/// Item 3: transferable executions are parked while they wait and come back for their
/// answer (delivered once), a cancel request and their deadline; a stdio one never parks.
fn parked_executions_come_back(store: &Store) {
    let log = file(store, "calls.jsonl");
    let server = HttpServer::start("2026-07-28", &log);
    let mut pool = worker(store, &["--drain-timeout", "3"]);
    wait_for_event(&mut pool, "started", None);
    let answered = submit_on(store, &server.binding());
    let cancelled = submit_on(store, &server.binding());
    let timed = submit_with(store, &server.binding(), &["--input-deadline", "4s"]);
    let stdio = submit_on(store, &stdio_binding(store));
    let mut parked = BTreeSet::new();
    while parked.len() < 3 {
        let event = wait_for_event(&mut pool, "parked", None);
        parked.insert(event["execution_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        parked,
        BTreeSet::from([answered.clone(), cancelled.clone(), timed.clone()])
    );
    let rounds = pending_rounds(store, &[answered.clone(), stdio.clone()]);
    // A cancel request brings it back, and it ends cancelled with its round.
    store.m3(&["cancel", &cancelled]).expect_code(0);
    wait_for_event(&mut pool, "resumed", Some(&cancelled));
    let finished = wait_for_event(&mut pool, "finished", Some(&cancelled));
    assert_eq!(finished["outcome"], "cancelled", "{finished}");
    assert_eq!(round_states(store, &cancelled)[0].0, "failed");
    // Its deadline brings it back, and the round fails with `timeout`.
    wait_for_event(&mut pool, "resumed", Some(&timed));
    wait_for_event(&mut pool, "finished", Some(&timed));
    assert_eq!(
        round_states(store, &timed)[0],
        ("failed".to_owned(), Some("timeout".to_owned()))
    );
    // Its answer brings it back; delivered once; the stdio one completes as ever.
    for (execution, round) in &rounds {
        answer(store, execution, round).expect_code(0);
        let finished = wait_for_event(&mut pool, "finished", Some(execution));
        assert_eq!(finished["outcome"], "completed", "{finished}");
    }
    let answered_calls = call_log(&log)
        .iter()
        .filter(|line| line["answered"] == true)
        .count();
    assert_eq!(
        answered_calls, 1,
        "the parked execution's answer is delivered once"
    );
    signal(&pool, Signal::SIGTERM);
    let done = pool.finish();
    assert_eq!(done.code, 0);
    assert!(
        !done
            .stdout
            .contains(&format!(r#""type":"parked","execution_id":"{stdio}""#)),
        "a stdio execution was parked:\n{}",
        done.stdout
    );
}

#[test]
fn parked_executions_come_back_for_an_answer_a_cancel_and_a_deadline() {
    parked_executions_come_back(&Store::new());
}

#[test]
fn parked_executions_come_back_for_an_answer_a_cancel_and_a_deadline_on_postgres() {
    parked_executions_come_back(&Store::postgres());
}

/// `--handover-only`: such a worker claims nothing from the queue, and a stopping worker
/// hands its executions to it rather than to a worker that claims.
fn a_handover_only_worker(store: &Store) {
    let server = HttpServer::start("2026-07-28", &file(store, "calls.jsonl"));
    let mut stopping = worker(store, &[]);
    wait_for_event(&mut stopping, "started", None);
    let executions: Vec<String> = (0..3)
        .map(|_| submit_steady(store, &server.binding()))
        .collect();
    let rounds = pending_rounds(store, &executions);
    // Short drains: at the end nobody is left to take what they hold.
    let mut claiming = worker(store, &["--drain-timeout", "2"]);
    let claiming_id = wait_for_event(&mut claiming, "started", None)["worker_id"].clone();
    assert_ne!(claiming_id, Value::Null);
    let mut successor = worker(store, &["--handover-only", "--drain-timeout", "2"]);
    let started = wait_for_event(&mut successor, "started", None);
    assert_eq!(started["handover_only"], true);
    let successor_id = started["worker_id"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "both registered", || {
        let workers = store.m3(&["--json", "workers"]).expect_code(0).json();
        (workers.as_array().unwrap().len() == 3).then_some(())
    });
    signal(&stopping, Signal::SIGTERM);
    let mut handed = BTreeSet::new();
    while handed.len() < executions.len() {
        let event = wait_for_event(&mut stopping, "handed_over", None);
        assert_eq!(event["successor"], successor_id.as_str(), "{event}");
        handed.insert(event["execution_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(handed, executions.iter().cloned().collect());
    assert_eq!(stopping.finish().code, 0);
    for (execution, round) in &rounds {
        answer(store, execution, round).expect_code(0);
        let finished = wait_for_event(&mut successor, "finished", Some(execution));
        assert_eq!(finished["outcome"], "completed");
    }
    // It claims nothing new: a queued execution goes to the claiming worker.
    let queued = submit_steady(store, &server.binding());
    let claimed = wait_for_event(&mut claiming, "claimed", Some(&queued));
    assert_eq!(claimed["worker_id"], claiming_id);
    for running in [successor, claiming] {
        signal(&running, Signal::SIGTERM);
        assert_eq!(running.finish().code, 0);
    }
}

#[test]
fn a_handover_only_worker_takes_handovers_first_and_claims_nothing() {
    a_handover_only_worker(&Store::new());
}

#[test]
fn a_handover_only_worker_takes_handovers_first_and_claims_nothing_on_postgres() {
    a_handover_only_worker(&Store::postgres());
}

/// `m3 run` stopped by SIGTERM fails its execution closed at once (exit 143): the round
/// takes no answer, and `m3 respond` says so (exit 5) instead of committing one nobody
/// delivers.
fn run_stopped_by_sigterm(store: &Store) {
    let server = HttpServer::start("2026-07-28", &file(store, "calls.jsonl"));
    let mut args: Vec<String> = vec!["--json".into(), "run".into()];
    args.extend(server.binding());
    args.extend(
        [
            "--human-input",
            "managed",
            "--call",
            "shipping:book_shipment",
            "--arguments",
            r#"{"weight_kg": 2}"#,
        ]
        .map(str::to_owned),
    );
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    signal(&run, Signal::SIGTERM);
    assert_eq!(run.finish().code, 143);
    let late = answer(store, &execution, &round).expect_code(5);
    assert_eq!(late.error_code(), "managed_input_state");
    assert_ne!(status(store, &execution)["outcome"], "completed");
}

#[test]
fn m3_run_stopped_by_sigterm_fails_closed_at_once() {
    run_stopped_by_sigterm(&Store::new());
}

#[test]
fn m3_run_stopped_by_sigterm_fails_closed_at_once_on_postgres() {
    run_stopped_by_sigterm(&Store::postgres());
}
