//! A database whose rounds the Python implementation of M3 (sf-m3 0.3.1, its
//! `SQLiteManagedInputStore`) wrote, with no m3-rs execution rows: `m3 pending`, `m3 rounds`
//! and `m3 respond` read and answer those rounds with the documented exit codes, and sf-m3
//! then reads back the response, its idempotency key and the redacted projection m3 wrote.
//! Real sf-m3 processes (`tests/peers/m3_store_peer.py`) on the same file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Store;
use serde_json::{Value, json};

const SECRET: &str = "hunter2-python";

fn python() -> String {
    std::env::var("M3_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// Runs the sf-m3 peer with `args` on `db` and parses the JSON it prints.
fn peer(command: &str, db: &Path, args: &[&str]) -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/m3_store_peer.py");
    let output = Command::new(python())
        .arg(script)
        .arg(command)
        .arg(db)
        .args(args)
        .output()
        .expect("the sf-m3 peer runs (set M3_TEST_PYTHON or run scripts/test.sh)");
    assert!(
        output.status.success(),
        "sf-m3 peer {command} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn respond(store: &Store, execution: &str, key: &str, responses: &Value) -> common::Done {
    store.m3(&[
        "--json",
        "respond",
        execution,
        "py-round-1",
        "--idempotency-key",
        key,
        "--responses",
        &responses.to_string(),
    ])
}

fn answer() -> Value {
    json!({
        "shipping_address": {"action": "accept", "content":
            {"street": "1 Main Street", "city": "Pune", "password": SECRET}},
        "payment": {"action": "accept"}
    })
}

#[test]
fn rounds_written_by_sf_m3_are_read_and_answered_through_the_cli() {
    let store = Store::new();
    let written = peer("cli-write", &store.db(), &[]);
    assert_eq!(written["pending"]["status"], "pending");

    // Reading: the Python round, with its requests as sf-m3 stored them.
    let pending = store
        .m3(&["--json", "pending", "py-ex-1"])
        .expect_code(0)
        .json();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["round_id"], "py-round-1");
    assert_eq!(
        pending[0]["requests"]["shipping_address"]["requested_schema"]["required"],
        json!(["street", "city"])
    );
    let human = store.m3(&["pending", "py-ex-1"]).expect_code(0);
    assert!(human.stdout.contains("py-round-1"), "{}", human.stdout);
    let rounds = store
        .m3(&["--json", "rounds", "py-ex-1"])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["status"], "pending");
    assert_eq!(
        rounds[0]["request_keys"],
        json!(["payment", "shipping_address"])
    );

    // Unknown ids: exit 8.
    store
        .m3(&["--json", "pending", "py-ex-unknown"])
        .expect_code(8);
    let unknown_round = store
        .m3(&[
            "--json",
            "respond",
            "py-ex-1",
            "py-round-9",
            "--idempotency-key",
            "k",
            "--decline",
            "payment",
        ])
        .expect_code(8);
    assert_eq!(unknown_round.error_code(), "not_found");

    // A missing request key: exit 3, nothing committed.
    let partial = json!({"payment": {"action": "accept"}});
    let invalid = respond(&store, "py-ex-1", "py-key-partial", &partial).expect_code(3);
    assert_eq!(invalid.error_code(), "managed_input_invalid");
    // A round recovery failed: exit 5.
    let failed = respond(&store, "py-ex-failed", "py-key-late", &answer()).expect_code(5);
    assert_eq!(failed.error_code(), "managed_input_state");

    // The answer, replayed with the same key, then another answer under that key: exit 4.
    let done = respond(&store, "py-ex-1", "py-key-cli", &answer()).expect_code(0);
    assert_eq!(done.json()["committed"], true);
    assert!(!done.stdout.contains(SECRET), "{}", done.stdout);
    respond(&store, "py-ex-1", "py-key-cli", &answer()).expect_code(0);
    let other =
        json!({"shipping_address": {"action": "decline"}, "payment": {"action": "decline"}});
    let conflict = respond(&store, "py-ex-1", "py-key-cli", &other).expect_code(4);
    assert_eq!(conflict.error_code(), "managed_input_conflict");
    let rounds = store.m3(&["rounds", "py-ex-1"]).expect_code(0);
    assert!(!rounds.stdout.contains(SECRET), "{}", rounds.stdout);

    // sf-m3 reads back what m3 wrote: the response, its key, the redacted projection.
    let read = peer("read", &store.db(), &["py-ex-1"]);
    let round = &read["py-ex-1"][0];
    assert_eq!(round["record"]["status"], "response_validated");
    assert_eq!(round["record"]["response_idempotency_key"], "py-key-cli");
    assert_eq!(
        round["record"]["responses"]["shipping_address"]["content"],
        answer()["shipping_address"]["content"]
    );
    assert_eq!(round["record"]["responses"]["payment"]["action"], "accept");
    let redacted = &round["redacted"]["shipping_address"];
    assert_eq!(redacted["action"], "accept");
    assert_eq!(redacted["content"]["city"], "Pune");
    assert_ne!(redacted["content"]["password"], SECRET);
    assert!(!round["redacted"].to_string().contains(SECRET));
}
