//! A SQLite store on a real filesystem that fills up under a waiting `m3 worker` (a 2 MB
//! tmpfs, filled across a lease renewal, then freed): the failed renewals are retried while
//! the lease is live, the execution completes once answered, and the same worker claims
//! and runs new work afterwards.
//!
//! Needs root to mount the tmpfs (scripts/test.sh runs as root in CI); it fails, never
//! skips, where mounting is impossible.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/disk.rs"]
mod disk;
#[path = "common/queue.rs"]
mod queue;

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Running, Store};
use disk::SmallDisk;
use nix::sys::signal::Signal;
use queue::{
    SWEEP, book, execution_row, logged_server, rounds, signal, submit_leased, wait_for_event,
    wait_until,
};

/// The execution and claim lease (seconds): renewed every third of it, long enough to ride
/// out the full disk once a renewal can be written again.
const LEASE: &str = "6";

/// The warning the worker logs for each renewal that failed while its lease is live.
const RENEWAL_FAILED: &str = "lease renewal failed";

fn answer(store: &Store, execution: &str, round: &str) -> common::Done {
    store.m3(&[
        "--json",
        "respond",
        execution,
        round,
        "--idempotency-key",
        &format!("answer-{execution}"),
        "--accept",
        r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
    ])
}

fn pending_round(store: &Store, execution: &str) -> String {
    wait_until(Duration::from_secs(30), "a pending round", || {
        rounds(&store.db(), execution)
            .into_iter()
            .find(|r| r.status == "pending")
            .map(|r| r.round_id)
    })
}

/// `m3 --json worker` whose warnings go to `log` (outside the small disk).
fn worker_logging_to(store: &Store, log: &Path) -> Running {
    let mut command = store.command(&[
        "--json",
        "worker",
        "--sweep-every",
        SWEEP,
        "--claim-lease",
        LEASE,
    ]);
    command
        .env("RUST_LOG", "m3_runtime=warn")
        .stderr(File::create(log).unwrap());
    Running::start(command)
}

/// Waits until the worker logged a failed renewal; on the hang guard, says what it logged
/// and what the disk holds.
fn wait_for_renewal_failure(log: &Path, disk: &SmallDisk) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let logged = std::fs::read_to_string(log).unwrap_or_default();
        if logged.contains(RENEWAL_FAILED) {
            return;
        }
        if Instant::now() > deadline {
            let listing = std::process::Command::new("ls")
                .args(["-laR"])
                .arg(disk.path())
                .output()
                .unwrap();
            panic!(
                "no failed renewal logged; worker log:\n{logged}\ndisk:\n{}",
                String::from_utf8_lossy(&listing.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `execution` (queued) through its round to its end on `worker`.
fn answered_to_completion(store: &Store, worker: &mut Running, execution: &str) {
    let round = pending_round(store, execution);
    answer(store, execution, &round).expect_code(0);
    let finished = wait_for_event(worker, "finished", Some(execution));
    assert_eq!(finished["outcome"], "completed", "{finished}");
    let row = execution_row(&store.db(), execution).unwrap();
    assert_eq!(row.outcome.as_deref(), Some("completed"));
}

#[test]
fn a_worker_rides_out_a_full_disk_across_a_renewal_and_claims_new_work_after() {
    let disk = SmallDisk::mount("2m");
    let store = Store::new_in(disk.path());
    let outside = tempfile::tempdir().unwrap();
    let worker_log = outside.path().join("worker.log");
    let server = logged_server(&outside.path().join("calls.jsonl"), "");
    let mut worker = worker_logging_to(&store, &worker_log);
    wait_for_event(&mut worker, "started", None);
    let waiting = submit_leased(&store, &server, LEASE, &book());
    wait_for_event(&mut worker, "claimed", Some(&waiting));
    // Said once the round is stored and the execution waits for its answer: from here on
    // the worker only renews leases.
    let pending = wait_for_event(&mut worker, "round_pending", Some(&waiting));
    let round = pending["round_id"].as_str().unwrap().to_owned();
    wait_until(
        Duration::from_secs(30),
        "the execution waiting for input",
        || {
            let row = execution_row(&store.db(), &waiting)?;
            (row.lifecycle == "waiting_for_input").then_some(())
        },
    );

    // The disk fills while the execution waits: its next renewals cannot be written.
    disk.fill();
    wait_for_renewal_failure(&worker_log, &disk);
    disk.free();

    // Space is back: the answer is delivered and the execution completes.
    answer(&store, &waiting, &round).expect_code(0);
    let finished = wait_for_event(&mut worker, "finished", Some(&waiting));
    assert_eq!(finished["outcome"], "completed", "{finished}");

    // The same worker claims and runs new work.
    let next = submit_leased(&store, &server, LEASE, &book());
    wait_for_event(&mut worker, "claimed", Some(&next));
    answered_to_completion(&store, &mut worker, &next);

    signal(&worker, Signal::SIGTERM);
    let done = worker.finish();
    assert_eq!(done.code, 0, "{}", done.stdout);
}
