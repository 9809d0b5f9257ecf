//! `m3 respond --all`: one command answers every pending round its filters select, each
//! round on its own under `PREFIX-ROUND`; rounds the answer does not fit stay pending and
//! are listed, the exit status says not all were answered, and running the command again
//! replays. On SQLite and PostgreSQL, with 50 rounds of which 3 cannot take the answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
#[allow(unused_imports)] // the shared helpers re-export more than this test needs
mod queue;

use std::time::Duration;

use common::{Store, shipping_server, wait_until};
use queue::{submit, wait_for_event, worker};
use serde_json::Value;

const ADDRESS: &str = r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#;

fn pending_count(store: &Store) -> usize {
    let pending = store.m3(&["--json", "pending"]).expect_code(0).json();
    pending.as_array().map_or(0, Vec::len)
}

fn respond_all(store: &Store, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--json", "respond", "--all", "--idempotency-key", "bulk"];
    args.extend_from_slice(extra);
    let done = store.m3(&args);
    let code = done.code;
    (
        code,
        serde_json::from_str(&done.stdout).unwrap_or(Value::Null),
    )
}

fn count(report: &Value, key: &str) -> u64 {
    report[key].as_u64().unwrap()
}

#[test]
fn fifty_rounds_answered_at_once_with_three_that_do_not_fit() {
    bulk(&Store::new());
}

#[test]
fn fifty_rounds_answered_at_once_on_postgres() {
    bulk(&Store::postgres());
}

fn bulk(store: &Store) {
    let mut running = worker(store, &["--concurrency", "50"]);
    wait_for_event(&mut running, "started", None);
    let server = shipping_server("");
    for index in 0..50 {
        // Three gift shipments ask for a gift message as well: the address alone does
        // not answer their rounds.
        let tool = if index % 17 == 5 {
            "shipping:book_gift_shipment"
        } else {
            "shipping:book_shipment"
        };
        submit(
            store,
            &server,
            &["--call", tool, "--arguments", r#"{"weight_kg": 2}"#],
        );
    }
    wait_until(Duration::from_secs(120), "50 pending rounds", || {
        (pending_count(store) == 50).then_some(())
    });

    let (code, report) = respond_all(store, &["--accept", ADDRESS]);
    assert_eq!(code, 3, "{report}");
    assert_eq!(count(&report, "answered"), 47, "{report}");
    assert_eq!(count(&report, "failed"), 3, "{report}");
    assert_eq!(count(&report, "replayed"), 0, "{report}");
    let failures: Vec<&Value> = report["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|round| !round["committed"].as_bool().unwrap())
        .collect();
    assert!(
        failures
            .iter()
            .all(|f| f["error"]["code"] == "managed_input_invalid"),
        "{report}"
    );
    assert_eq!(pending_count(store), 3);

    // The same command again: the 47 replay (nothing new is stored), the 3 still fail.
    let (code, again) = respond_all(store, &["--accept", ADDRESS]);
    assert_eq!(code, 3, "{again}");
    assert_eq!(count(&again, "replayed"), 47, "{again}");
    assert_eq!(count(&again, "failed"), 3, "{again}");

    // The filter picks the three gift shipments; a full answer fits them.
    let (code, gifts) = respond_all(
        store,
        &[
            "--operation",
            "book_gift_shipment",
            "--accept",
            ADDRESS,
            "--accept",
            r#"gift_message={"message": "Enjoy"}"#,
        ],
    );
    assert_eq!(code, 0, "{gifts}");
    assert_eq!(count(&gifts, "answered"), 3, "{gifts}");
    assert_eq!(pending_count(store), 0);
    // Nothing pending matches a filter that selects nothing: not found (exit 8).
    let (code, _) = respond_all(store, &["--server", "elsewhere", "--decline", "x"]);
    assert_eq!(code, 8);
    drop(running);
}
