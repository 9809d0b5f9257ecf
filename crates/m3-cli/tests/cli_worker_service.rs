//! `m3 submit` + `m3 worker`: a queued execution waits for any later worker (which
//! reports its pending round as a `round_pending` line), SIGTERM
//! drains (finishing what ends within the drain timeout, failing the rest closed), and a
//! long-lived kit sees a recovery made by a worker's sweep without reopening the store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
mod queue;

use std::time::Duration;

use common::Store;
use m3_kit::{AsyncMcpTestKit, SweepOptions};
use nix::sys::signal::Signal;
use queue::{
    RECOVERY_BOUND, answer, book, execution_row, file, logged_server, rounds, sigkill, signal,
    submit, wait_for_event, wait_until, worker,
};

fn pending_round(store: &Store, execution: &str) -> String {
    wait_until(Duration::from_secs(30), "a pending round", || {
        rounds(&store.db(), execution)
            .into_iter()
            .find(|r| r.status == "pending")
            .map(|r| r.round_id)
    })
}

#[test]
fn an_execution_queued_by_a_process_that_is_gone_runs_on_a_later_worker() {
    let store = Store::new();
    let server = logged_server(&file(&store, "calls.jsonl"), "");
    // `m3 submit` queues and exits: nobody runs the execution yet.
    let execution = submit(&store, &server, &book());
    std::thread::sleep(Duration::from_millis(300));
    let row = execution_row(&store.db(), &execution).unwrap();
    assert_eq!((row.lifecycle.as_str(), row.owner), ("queued", None));
    let mut later = worker(&store, &[]);
    let claimed = wait_for_event(&mut later, "claimed", Some(&execution));
    let round = pending_round(&store, &execution);
    // The worker says which round waits, by id only, and when.
    let mut waiting = wait_for_event(&mut later, "round_pending", Some(&execution));
    let at = waiting.as_object_mut().unwrap().remove("at").unwrap();
    assert!(
        m3_types::timestamp::parse(at.as_str().unwrap()).is_ok(),
        "{at}"
    );
    assert_eq!(
        waiting,
        serde_json::json!({"type": "round_pending", "execution_id": execution, "round_id": round})
    );
    answer(&store, &execution, &round).expect_code(0);
    let finished = wait_for_event(&mut later, "finished", Some(&execution));
    assert_eq!(finished["outcome"], "completed");
    assert_eq!(
        execution_row(&store.db(), &execution)
            .unwrap()
            .outcome
            .as_deref(),
        Some("completed")
    );
    signal(&later, Signal::SIGTERM);
    let done = later.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        claimed["worker_id"]
            .as_str()
            .unwrap()
            .starts_with("m3-worker:")
    );
}

#[test]
fn sigterm_drains_finishing_what_ends_in_time_and_failing_the_rest_closed() {
    let store = Store::new();
    let server = logged_server(&file(&store, "calls.jsonl"), "");
    let mut pool = worker(&store, &["--drain-timeout", "3"]);
    wait_for_event(&mut pool, "started", None);
    let answered = submit(&store, &server, &book());
    let abandoned = submit(&store, &server, &book());
    let first = pending_round(&store, &answered);
    let second = pending_round(&store, &abandoned);
    signal(&pool, Signal::SIGTERM);
    let draining = wait_for_event(&mut pool, "draining", None);
    assert_eq!(draining["running"], 2);
    // Answered during the drain: it completes.
    answer(&store, &answered, &first).expect_code(0);
    let finished = wait_for_event(&mut pool, "finished", Some(&answered));
    assert_eq!(finished["outcome"], "completed");
    // The other is failed closed at the drain timeout, exactly as recovery would.
    let stopped = wait_for_event(&mut pool, "stopped", None);
    assert_eq!(
        stopped["failed_closed"],
        serde_json::json!([abandoned.clone()])
    );
    let done = pool.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    let row = execution_row(&store.db(), &abandoned).unwrap();
    assert_eq!(row.outcome.as_deref(), Some("failed"));
    assert_eq!(
        row.error_code.as_deref(),
        Some("managed_input_recovery_unavailable")
    );
    let round = &rounds(&store.db(), &abandoned)[0];
    assert_eq!(round.round_id, second);
    assert_eq!(
        (round.status.as_str(), round.failure_code.as_deref()),
        ("failed", Some("recovery_unavailable"))
    );
    let late = answer(&store, &abandoned, &second).expect_code(5);
    assert_eq!(late.error_code(), "managed_input_state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_lived_kit_sees_a_recovery_without_reopening_the_store() {
    let store = Store::new();
    let server = logged_server(&file(&store, "calls.jsonl"), "");
    let kit = AsyncMcpTestKit::builder()
        .database(store.db())
        .embedded_worker(false)
        .recovery_sweep(Some(
            SweepOptions::default().every(Duration::from_millis(250)),
        ))
        .build()
        .await
        .unwrap();
    // The other processes: `m3 submit` queues, `m3 worker` runs it and is then killed.
    let execution = tokio::task::block_in_place(|| submit(&store, &server, &book()));
    let mut runner = tokio::task::block_in_place(|| worker(&store, &[]));
    tokio::task::block_in_place(|| wait_for_event(&mut runner, "claimed", Some(&execution)));
    let handle = kit.attach(&execution).await.unwrap();
    let pending = handle
        .wait_for_pending(Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    tokio::task::block_in_place(|| sigkill(&mut runner));
    let result = handle.result(Some(RECOVERY_BOUND)).await.unwrap();
    assert_eq!(
        result.error.as_ref().map(|e| e.code.as_str()),
        Some("managed_input_recovery_unavailable")
    );
    assert!(handle.pending_elicitation().await.unwrap().is_none());
    let late = handle
        .respond_elicitation(
            &pending.round_id,
            m3_types::ResponseMap::from([(
                "shipping_address".to_owned(),
                m3_types::ElicitationResponse::accept(serde_json::Map::from_iter([
                    ("street".to_owned(), "1 Main Street".into()),
                    ("city".to_owned(), "Pune".into()),
                ])),
            )]),
            "late",
        )
        .await
        .unwrap_err();
    assert_eq!(late.code(), "managed_input_state");
    kit.close().await.unwrap();
}

#[test]
fn a_second_sigterm_fails_what_still_runs_closed_at_once() {
    let store = Store::new();
    let server = logged_server(&file(&store, "calls.jsonl"), "");
    let mut pool = worker(&store, &["--drain-timeout", "600"]);
    wait_for_event(&mut pool, "started", None);
    let waiting = submit(&store, &server, &book());
    let round = pending_round(&store, &waiting);
    signal(&pool, Signal::SIGTERM);
    let draining = wait_for_event(&mut pool, "draining", None);
    assert_eq!(
        (
            draining["running"].as_u64(),
            draining["seconds_left"].as_f64()
        ),
        (Some(1), Some(600.0))
    );
    assert!(
        draining["at"].as_str().unwrap().starts_with("20"),
        "{draining}"
    );
    // The countdown comes every 5 s; the second signal does not wait for the 600 s.
    let countdown = wait_for_event(&mut pool, "drain_countdown", None);
    assert!(
        countdown["seconds_left"].as_u64().unwrap() < 600,
        "{countdown}"
    );
    signal(&pool, Signal::SIGTERM);
    let forced = wait_for_event(&mut pool, "drain_forced", None);
    assert_eq!(forced["signal"], "SIGTERM");
    let stopped = wait_for_event(&mut pool, "stopped", None);
    assert_eq!(
        stopped["failed_closed"],
        serde_json::json!([waiting.clone()])
    );
    let done = pool.finish();
    assert_eq!(done.code, 0, "{}", done.stderr);
    let row = execution_row(&store.db(), &waiting).unwrap();
    assert_eq!(
        row.error_code.as_deref(),
        Some("managed_input_recovery_unavailable")
    );
    let late = answer(&store, &waiting, &round).expect_code(5);
    assert_eq!(late.error_code(), "managed_input_state");
}

/// `m3 --json workers`, polled until `check` accepts the listing.
fn workers_until(
    store: &Store,
    check: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    wait_until(Duration::from_secs(30), "the worker listing", || {
        let listed = store.m3(&["--json", "workers"]).expect_code(0);
        let all = serde_json::from_str::<Vec<serde_json::Value>>(&listed.stdout).unwrap();
        check(&all).then_some(all)
    })
}

#[test]
fn workers_are_listed_while_they_run_shown_draining_and_gone_when_they_stop() {
    let store = Store::new();
    let server = logged_server(&file(&store, "calls.jsonl"), "");
    let mut first = worker(&store, &["--drain-timeout", "600"]);
    let first_id = wait_for_event(&mut first, "started", None)["worker_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut second = worker(&store, &[]);
    let second_id = wait_for_event(&mut second, "started", None)["worker_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = workers_until(&store, |all| all.len() == 2);
    let ids: Vec<&str> = listed
        .iter()
        .map(|w| w["worker_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&first_id.as_str()) && ids.contains(&second_id.as_str()),
        "{listed:?}"
    );
    for entry in &listed {
        assert_eq!(
            (entry["state"].as_str(), entry["live"].as_bool()),
            (Some("running"), Some(true))
        );
        assert!(entry["pid"].as_u64().is_some(), "{entry}");
    }
    // Whichever worker claims the execution drains while it waits.
    let execution = submit(&store, &server, &book());
    pending_round(&store, &execution);
    let claimed_by = execution_row(&store.db(), &execution)
        .unwrap()
        .owner
        .unwrap();
    let (draining, staying, staying_id) = if claimed_by == first_id {
        (&mut first, second, second_id)
    } else {
        (&mut second, first, first_id)
    };
    signal(draining, Signal::SIGTERM);
    wait_for_event(draining, "draining", None);
    workers_until(&store, |all| {
        all.iter()
            .any(|w| w["worker_id"] == claimed_by && w["state"] == "draining")
    });
    signal(draining, Signal::SIGTERM);
    wait_for_event(draining, "stopped", None);
    let left = workers_until(&store, |all| all.len() == 1);
    assert_eq!(left[0]["worker_id"], staying_id);
    let people = store.m3(&["workers"]).expect_code(0);
    assert!(
        people.stdout.contains("running") && people.stdout.contains("live"),
        "{}",
        people.stdout
    );
    signal(&staying, Signal::SIGTERM);
    assert_eq!(staying.finish().code, 0);
    workers_until(&store, <[serde_json::Value]>::is_empty);
}
