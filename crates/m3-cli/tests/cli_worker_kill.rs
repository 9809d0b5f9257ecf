//! SIGKILL an `m3 worker` at every state of a managed round: the execution always ends
//! `failed` with `managed_input_recovery_unavailable` through another worker's recovery
//! sweep (nobody reopens the store), the server got the answer at most once, a late answer
//! is refused with `managed_input_state` (exit 5), and no server process outlives its worker.
//!
//! Ten trials per state; `M3_KILL_TRIALS=100 cargo nextest run -p m3-cli --test
//! cli_worker_kill` is the soak run (docs/workers.md).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
mod queue;

use std::time::{Duration, Instant};

use common::Store;
use nix::sys::signal::Signal;
use queue::{
    LEASE, RECOVERY_BOUND, alive, book, call_log, execution_row, file, logged_server, rounds,
    server_pids, sigkill, signal, submit_leased, wait_for_event, wait_until, worker, worker_leased,
};

/// Where the worker is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillAt {
    /// The round waits for an answer.
    Pending,
    /// The answer is committed; the (stopped) worker has not picked it up.
    ResponseValidated,
    /// The retry carrying the answer is at the server, which holds it.
    DeliveryStarted,
    /// The server answered the retry (the round is resolved) and the next round waits.
    Delivered,
}

fn trials() -> usize {
    std::env::var("M3_KILL_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10)
}

fn answer(store: &Store, execution: &str, round: &str, key: &str) -> common::Done {
    let accept =
        format!(r#"shipping_address={{"street": "1 Main Street", "city": "{execution}"}}"#);
    store.m3(&[
        "--json",
        "respond",
        execution,
        round,
        "--idempotency-key",
        key,
        "--accept",
        &accept,
    ])
}

fn answered_calls(log: &std::path::Path) -> usize {
    call_log(log)
        .iter()
        .filter(|l| l["answered"] == true)
        .count()
}

/// The lease (seconds) of a trial's execution. At `ResponseValidated` the worker is stopped
/// while another `m3` process commits the answer, which on a loaded machine can take longer
/// than the 2 s of the other states: a lease that lapses first is lost to the sweep and the
/// trial never reaches its state.
fn lease_at(at: KillAt) -> &'static str {
    if at == KillAt::ResponseValidated {
        "6"
    } else {
        LEASE
    }
}

/// One kill trial; `false` when it could not reach its state (see `ResponseValidated`).
fn trial(at: KillAt) -> bool {
    let store = Store::new();
    let db = store.db();
    let log = file(&store, "calls.jsonl");
    let hold = if at == KillAt::DeliveryStarted {
        "--hold-retry"
    } else {
        ""
    };
    let server = logged_server(&log, hold);
    let script = file(&store, "two-rounds.json");
    std::fs::write(
        &script,
        r#"{"steps": [{"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
                      {"call": "shipping:book_shipment", "arguments": {"weight_kg": 3}}]}"#,
    )
    .unwrap();
    let script_arg = script.display().to_string();
    let agent = match at {
        KillAt::Delivered => vec!["--script", script_arg.as_str()],
        _ => book(),
    };
    let lease = lease_at(at);
    let mut doomed = worker_leased(&store, lease, &[]);
    wait_for_event(&mut doomed, "started", None);
    let execution = submit_leased(&store, &server, lease, &agent);
    wait_for_event(&mut doomed, "claimed", Some(&execution));
    // The survivor starts before the kill: its sweep, not an opening, recovers.
    let mut survivor = worker(&store, &[]);
    wait_for_event(&mut survivor, "started", None);
    let first = wait_until(Duration::from_secs(30), "a pending round", || {
        rounds(&db, &execution)
            .into_iter()
            .find(|r| r.status == "pending")
    });
    let mut open_round = first.round_id.clone();
    match at {
        KillAt::Pending => {}
        KillAt::ResponseValidated => {
            // Stopped in the middle of a write (a lease renewal), the worker would hold
            // SQLite's write lock: let it finish that write and stop it again.
            let mut tries = 0;
            loop {
                signal(&doomed, Signal::SIGSTOP);
                let done = answer(&store, &execution, &first.round_id, "answer");
                if done.code == 0 {
                    break;
                }
                if done.error_code() == "managed_input_state" {
                    // Stopped for longer than its lease while the answer waited for the lock,
                    // the worker lost the round to the survivor's sweep before the commit: this
                    // trial never reached response_validated. Tidy up and try again.
                    sigkill(&mut doomed);
                    signal(&survivor, Signal::SIGTERM);
                    survivor.finish();
                    return false;
                }
                assert!(
                    tries < 20 && done.stderr.contains("locked"),
                    "{}",
                    done.stderr
                );
                signal(&doomed, Signal::SIGCONT);
                std::thread::sleep(Duration::from_millis(30));
                tries += 1;
            }
            let status = rounds(&db, &execution)[0].status.clone();
            if status == "failed" {
                // The stopped worker's lease ran out just after the commit and the
                // survivor's sweep failed the round first: as above, no trial. Again.
                sigkill(&mut doomed);
                signal(&survivor, Signal::SIGTERM);
                survivor.finish();
                return false;
            }
            assert_eq!(status, "response_validated");
        }
        KillAt::DeliveryStarted => {
            answer(&store, &execution, &first.round_id, "answer").expect_code(0);
            wait_until(Duration::from_secs(30), "the held retry", || {
                (answered_calls(&log) == 1).then_some(())
            });
            assert_eq!(rounds(&db, &execution)[0].status, "delivery_started");
        }
        KillAt::Delivered => {
            answer(&store, &execution, &first.round_id, "answer").expect_code(0);
            let second = wait_until(Duration::from_secs(30), "the second round", || {
                rounds(&db, &execution)
                    .into_iter()
                    .find(|r| r.status == "pending" && r.round_id != first.round_id)
            });
            assert_eq!(rounds(&db, &execution)[0].status, "resolved");
            open_round = second.round_id;
        }
    }
    sigkill(&mut doomed);
    let killed_at = Instant::now();
    // The bound is a hang guard: the lease beyond the 2 s that RECOVERY_BOUND allows for.
    let bound = RECOVERY_BOUND + Duration::from_secs(lease.parse::<u64>().unwrap() - 2);
    let row = wait_until(bound, "recovery by the survivor's sweep", || {
        execution_row(&db, &execution).filter(|r| r.lifecycle == "finished")
    });
    let took = killed_at.elapsed();
    assert_eq!(row.outcome.as_deref(), Some("failed"), "{at:?}: {row:?}");
    assert_eq!(
        row.error_code.as_deref(),
        Some("managed_input_recovery_unavailable"),
        "{at:?}"
    );
    for round in rounds(&db, &execution) {
        if round.round_id == open_round {
            assert_eq!(round.status, "failed", "{at:?}");
            assert_eq!(round.failure_code.as_deref(), Some("recovery_unavailable"));
        } else {
            assert_eq!(round.status, "resolved", "{at:?}");
        }
    }
    let delivered = answered_calls(&log);
    let expected = usize::from(matches!(at, KillAt::DeliveryStarted | KillAt::Delivered));
    assert_eq!(
        delivered,
        expected,
        "{at:?}: deliveries {:?}",
        call_log(&log)
    );
    let late = answer(&store, &execution, &open_round, "late").expect_code(5);
    assert_eq!(late.error_code(), "managed_input_state");
    for pid in server_pids(&log) {
        wait_until(Duration::from_secs(10), "the server to exit", || {
            (!alive(pid)).then_some(())
        });
    }
    signal(&survivor, Signal::SIGTERM);
    let done = survivor.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    eprintln!("{at:?}: recovered {took:?} after the kill");
    true
}

/// Runs `trials()` conclusive trials at `at`, allowing as many inconclusive ones again.
fn run_trials(at: KillAt) {
    let wanted = trials();
    let mut conclusive = 0;
    for _ in 0..wanted * 2 {
        if trial(at) {
            conclusive += 1;
        }
        if conclusive == wanted {
            return;
        }
    }
    panic!("{at:?}: only {conclusive} of {wanted} trials reached their state");
}

#[test]
fn a_worker_killed_with_the_round_pending_fails_closed() {
    run_trials(KillAt::Pending);
}

#[test]
fn a_worker_killed_right_after_the_response_commit_fails_closed() {
    run_trials(KillAt::ResponseValidated);
}

#[test]
fn a_worker_killed_while_the_retry_is_at_the_server_fails_closed() {
    run_trials(KillAt::DeliveryStarted);
}

#[test]
fn a_worker_killed_after_the_server_answered_fails_closed() {
    run_trials(KillAt::Delivered);
}
