//! Worker loss and recovery, result waits, cancellation, `human_input=fail`, `--tools`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Store, managed_run, refs, shipping_server};

#[test]
fn a_killed_worker_is_recovered_and_a_late_response_exits_5() {
    killed_worker_recovered(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn a_killed_worker_is_recovered_and_a_late_response_exits_5_on_postgres() {
    killed_worker_recovered(&Store::postgres());
}

fn killed_worker_recovered(store: &Store) {
    let mut args = managed_run(&shipping_server(""), "book_shipment");
    args.extend(["--lease".to_owned(), "1".to_owned()]);
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round_id = run.next_json()["round_id"].as_str().unwrap().to_owned();
    // SIGKILL: the worker disappears while it owns the pending round.
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    drop(run);
    // Recovery terminalizes executions whose worker lease has expired.
    std::thread::sleep(std::time::Duration::from_millis(1500));

    let report = store.m3(&["--json", "recover"]).expect_code(0).json();
    let recovered = report["executions"].as_array().unwrap();
    assert_eq!(recovered.len(), 1, "{report}");
    assert_eq!(recovered[0]["execution_id"], execution.as_str());
    assert_eq!(recovered[0]["failed_rounds"][0], round_id.as_str());
    // Nothing left for a second recovery.
    let again = store.m3(&["recover"]).expect_code(0);
    assert!(
        again.stdout.contains("nothing to recover"),
        "{}",
        again.stdout
    );

    let late = store
        .m3(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "late",
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(5);
    assert_eq!(late.error_code(), "managed_input_state");
    let rounds = store
        .m3(&["--json", "rounds", &execution])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["status"], "failed");
    assert_eq!(rounds[0]["failure_code"], "recovery_unavailable");
    let result = store.m3(&["--json", "result", &execution]).expect_code(9);
    assert_eq!(result.json()["snapshot"]["outcome"], "failed");
    assert_eq!(result.error_code(), "execution_not_completed");
}

#[test]
fn a_result_wait_times_out_with_7_and_cancel_ends_the_run_with_9() {
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    run.next_json();
    let waited = store
        .m3(&["--json", "result", &execution, "--timeout", "0.3"])
        .expect_code(7);
    assert_eq!(waited.error_code(), "timeout");
    // Still running.
    let status = store
        .m3(&["--json", "status", &execution])
        .expect_code(0)
        .json();
    assert_eq!(status["lifecycle"], "waiting_for_input");

    let cancelled = store.m3(&["cancel", &execution]).expect_code(0);
    assert!(
        cancelled.stdout.contains("cancellation requested"),
        "{}",
        cancelled.stdout
    );
    let done = run.finish();
    assert_eq!(
        done.code, 9,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    assert!(done.stdout.contains("\"cancelled\""), "{}", done.stdout);
}

#[test]
fn human_input_fail_exits_9_with_unexpected_elicitation() {
    let store = Store::new();
    let done = store
        .command(&[
            "run",
            "--server",
            &shipping_server(""),
            "--call",
            "shipping:book_shipment",
            "--arguments",
            r#"{"weight_kg": 2}"#,
        ])
        .output()
        .unwrap();
    let done = common::Done::from(done).expect_code(9);
    let all = format!("{}{}", done.stdout, done.stderr);
    assert!(all.contains("unexpected_elicitation"), "{all}");
    assert!(
        done.stderr.starts_with("error[execution_not_completed]: "),
        "{}",
        done.stderr
    );
}

#[test]
fn tools_outside_the_selection_are_refused() {
    let store = Store::new();
    let mut args = managed_run(&shipping_server(""), "book_shipment");
    args.extend(["--tools".to_owned(), "shipping:quote".to_owned()]);
    let done = store.m3(&refs(&args)).expect_code(9);
    assert!(!done.stdout.contains("\"booked\""), "{}", done.stdout);
    // The empty selection allows nothing either; the allowed tool works.
    let mut none = managed_run(&shipping_server(""), "quote");
    none.extend(["--tools".to_owned(), String::new()]);
    store.m3(&refs(&none)).expect_code(9);
    let mut quote = managed_run(&shipping_server(""), "quote");
    quote.extend(["--tools".to_owned(), "shipping:quote".to_owned()]);
    store.m3(&refs(&quote)).expect_code(0);
}
