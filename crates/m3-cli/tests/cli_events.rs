//! The change feed from the command line and over `m3 serve`, as processes: `m3 events`
//! prints every record and resumes exactly, `--follow` prints another process's commit and
//! ends cleanly on SIGTERM, `m3 prune` removes old records and nothing else, and the event
//! stream resumes exactly across a restart of `m3 serve` and across two servers on one
//! store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{Running, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// Every line of `m3 events ARGS` (exit 0), parsed.
fn events(store: &Store, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["events"];
    all.extend_from_slice(args);
    let done = store.m3(&all).expect_code(0);
    done.stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect()
}

fn terminate(running: &Running) {
    kill(
        Pid::from_raw(i32::try_from(running.child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
}

#[test]
fn events_print_the_feed_resume_exactly_and_filter() {
    check_events(&Store::new());
}

#[test]
fn events_print_the_feed_resume_exactly_and_filter_on_postgres() {
    check_events(&Store::postgres());
}

fn check_events(store: &Store) {
    store.m3(&["demo"]).expect_code(0);
    let all = events(store, &[]);
    let mut expected = [
        "execution.queued",
        "execution.claimed",
        "round.pending",
        "execution.waiting_for_input",
        "round.answered",
        "round.delivery_started",
        "round.delivered",
        "round.resolved",
        "execution.finished",
    ];
    // The demo answers as soon as the round is pending, so its answer races the worker's
    // `waiting_for_input`: the feed has them in the order they committed, either way.
    if kinds(&all).get(3) == Some(&"round.answered") {
        expected.swap(3, 4);
    }
    assert_eq!(kinds(&all), expected);
    let cursors: Vec<u64> = all.iter().map(|r| r["cursor"].as_u64().unwrap()).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    let text = serde_json::to_string(&all).unwrap();
    assert!(
        !text.contains("Main Street") && !text.contains("Pune"),
        "an answer in the feed"
    );
    for (index, cursor) in cursors.iter().enumerate() {
        let rest = events(store, &["--after", &cursor.to_string()]);
        assert_eq!(rest, all[index + 1..], "after {cursor}");
    }
    let pending = events(store, &["--kind", "round.pending,execution.finished"]);
    assert_eq!(kinds(&pending), ["round.pending", "execution.finished"]);
    let execution = all[0]["execution_id"].as_str().unwrap();
    assert_eq!(events(store, &["--execution", execution]), all);
    assert!(events(store, &["--execution", "someone-else"]).is_empty());

    let bad = store
        .m3(&["--json", "events", "--after", "x1"])
        .expect_code(3);
    assert_eq!(bad.error_code(), "invalid_argument");
    let ahead = store
        .m3(&["--json", "events", "--after", "9999"])
        .expect_code(3);
    assert_eq!(ahead.error_code(), "invalid_argument");
    let kind = store
        .m3(&["--json", "events", "--kind", "round.nope"])
        .expect_code(3);
    assert_eq!(kind.error_code(), "invalid_argument");
}

#[test]
fn events_follow_prints_another_process_commit_and_ends_on_sigterm() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let newest = events(&store, &[]).last().unwrap()["cursor"]
        .as_u64()
        .unwrap();
    let mut follow = store.spawn(&["events", "--follow", "--after", &newest.to_string()]);
    // Another process commits: `m3 submit` queues an execution.
    let server = common::shipping_server("");
    store
        .m3(&[
            "--json",
            "submit",
            "--server",
            &server,
            "--call",
            "shipping:book_shipment",
            "--arguments",
            r#"{"weight_kg": 2}"#,
            "--human-input",
            "managed",
        ])
        .expect_code(0);
    let record = follow.next_json();
    assert_eq!(record["kind"], "execution.queued");
    assert!(record["cursor"].as_u64().unwrap() > newest);
    terminate(&follow);
    follow.finish().expect_code(0);
}

#[test]
fn prune_removes_old_records_and_nothing_else() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let all = events(&store, &[]);
    let kept = store
        .m3(&["--json", "prune", "--before", "1h"])
        .expect_code(0)
        .json();
    assert_eq!(kept["records"], 0);
    let dry = store
        .m3(&["--json", "prune", "--before", "0s", "--dry-run"])
        .expect_code(0)
        .json();
    assert_eq!(dry["records"], all.len());
    assert_eq!(dry["through"], all.last().unwrap()["cursor"]);
    assert_eq!(events(&store, &[]), all, "a dry run removed records");
    let said = store.m3(&["prune", "--before", "0s"]).expect_code(0);
    assert!(
        said.stdout.contains(&format!("removed {}", all.len())),
        "{}",
        said.stdout
    );
    assert!(events(&store, &[]).is_empty());
    let expired = store
        .m3(&["--json", "events", "--after", &all[0]["cursor"].to_string()])
        .expect_code(1);
    assert_eq!(expired.error_code(), "cursor_expired");
    // The executions and rounds are all still there.
    let executions = store.m3(&["--json", "executions"]).expect_code(0).json();
    assert_eq!(executions.as_array().unwrap().len(), 1);
    let bad = store
        .m3(&["--json", "prune", "--before", "yesterday"])
        .expect_code(3);
    assert_eq!(bad.error_code(), "invalid_argument");
}

/// `m3 serve` on `store`, and its base URL.
fn serve(store: &Store) -> (Running, String) {
    let mut serve = store.spawn(&["serve", "--create", "--bind", "127.0.0.1:0"]);
    let page = serve.next_line();
    let url = page.trim_end_matches('/').to_owned();
    (serve, url)
}

/// The `(id, event)` pairs the stream sends within a second, resumed with `Last-Event-ID`
/// (or from `?after=0`).
fn stream(url: &str, last_event_id: Option<&str>) -> Vec<(String, String)> {
    let mut command = Command::new("curl");
    command.args(["-sS", "-N", "--max-time", "1"]);
    match last_event_id {
        Some(id) => {
            command.args(["-H", &format!("Last-Event-ID: {id}")]);
            command.arg(format!("{url}/api/v1/events"));
        }
        None => {
            command.arg(format!("{url}/api/v1/events?after=0"));
        }
    }
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(28),
        "curl ends at its time limit"
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut events = Vec::new();
    let mut id = None;
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("id:") {
            id = Some(value.trim().to_owned());
        }
        if let Some(kind) = line.strip_prefix("event:") {
            events.push((id.take().unwrap(), kind.trim().to_owned()));
        }
    }
    events
}

#[test]
fn the_event_stream_resumes_exactly_across_a_restart_and_across_two_servers() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let (first, url) = serve(&store);
    let seen = stream(&url, None);
    assert_eq!(seen.len(), 9, "{seen:?}");
    terminate(&first);
    first.finish().expect_code(0);

    // A change while no server runs, then a new server: exactly the later records.
    store.m3(&["demo"]).expect_code(0);
    let (second, url) = serve(&store);
    let (third, other_url) = serve(&store);
    let last = &seen.last().unwrap().0;
    let resumed = stream(&url, Some(last));
    assert_eq!(resumed.len(), 9, "{resumed:?}");
    assert!(
        resumed
            .iter()
            .all(|(id, _)| id.parse::<u64>().unwrap() > last.parse::<u64>().unwrap())
    );
    // The other server on the same store continues from any id of this one.
    let everything = stream(&other_url, None);
    assert_eq!(everything.len(), 18);
    for (index, (id, _)) in everything.iter().enumerate() {
        let rest = stream(&url, Some(id));
        assert_eq!(rest, everything[index + 1..], "after {id}");
        if index == 2 {
            break;
        }
    }
    assert_eq!(stream(&other_url, Some(&resumed[3].0)), resumed[4..]);
    drop(second);
    drop(third);
}
