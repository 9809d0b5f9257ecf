//! Error codes and exit statuses agree everywhere: every `(code, exit)` pair of the "Exit
//! codes" table in docs/cli.md (parsed here, so the document cannot drift) is provoked
//! through a real `m3` command, except the few listed in [`NOT_PROVOKED`] with the reason
//! (the unit test `failure::tests::the_exit_table_is_cli_md_s_table` checks those against
//! the same table).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::{Done, Store, managed_run, refs, shipping_server};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const ADDRESS: &str = r#"{"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}}}"#;

/// The documented codes no command here can provoke on demand, and why.
const NOT_PROVOKED: [(&str, &str); 5] = [
    (
        "managed_input_recovery_unavailable",
        "needs a store that refuses to reclaim a round mid-delivery",
    ),
    (
        "not_booked",
        "needs a shipping server that completes without booking",
    ),
    ("storage_error", "needs a failing database"),
    ("transport_error", "surfaces inside an execution's result"),
    ("protocol_error", "surfaces inside an execution's result"),
];

/// `(code, exit)` of every row of docs/cli.md's "Exit codes" table: the backticked codes of
/// the last column, before any parenthesis.
fn documented() -> BTreeMap<String, i32> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    let section = doc.split("\n## Exit codes\n").nth(1).unwrap();
    let mut pairs = BTreeMap::new();
    for line in section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(status) = cells[1].parse::<i32>() else {
            continue;
        };
        let codes = cells[3].split('(').next().unwrap();
        for code in codes.split('`').skip(1).step_by(2) {
            pairs.insert(code.to_owned(), status);
        }
    }
    pairs
}

/// What each provoking command printed: its JSON error's code and its exit status.
#[derive(Default)]
struct Seen(BTreeMap<String, i32>);

impl Seen {
    fn record(&mut self, what: &str, done: &Done) {
        let code = done.error_code();
        if let Some(before) = self.0.insert(code.clone(), done.code) {
            assert_eq!(
                before, done.code,
                "{what}: `{code}` exited differently before"
            );
        }
    }
}

#[test]
fn every_documented_error_code_exits_with_its_documented_status() {
    let store = Store::new();
    let mut seen = Seen::default();
    let respond = |args: &[&str]| {
        let mut all = vec!["--json", "respond"];
        all.extend_from_slice(args);
        store.m3(&all)
    };
    // No store yet: a read command says `not_found`.
    seen.record("status", &store.m3(&["--json", "status", "01JUNKNOWN"]));
    seen.record("usage", &store.m3(&["--json", "status"]));
    seen.record(
        "executions --since",
        &store.m3(&["--json", "executions", "--since", "whenever"]),
    );

    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    // The case of issue 36: a round id (or prefix) no execution has is `not_found`.
    let unknown = respond(&["01M90QJQ", "--idempotency-key", "k", "--decline", "x"]);
    assert_eq!(unknown.code, 8, "{}", unknown.stderr);
    seen.record("respond unknown round", &unknown);
    seen.record(
        "respond wrong key",
        &respond(&[
            &execution,
            &round,
            "--idempotency-key",
            "a",
            "--decline",
            "nope",
        ]),
    );
    seen.record(
        "result --timeout",
        &store.m3(&["--json", "result", &execution, "--timeout", "0.2"]),
    );
    respond(&[
        &execution,
        &round,
        "--idempotency-key",
        "a",
        "--responses",
        ADDRESS,
    ])
    .expect_code(0);
    run.finish().expect_code(0);
    seen.record(
        "respond other responses",
        &respond(&[
            &execution,
            &round,
            "--idempotency-key",
            "a",
            "--decline",
            "shipping_address",
        ]),
    );

    // Ctrl-C, SIGTERM, SIGHUP: `interrupted`, `terminated`, `hung_up`; the round each left
    // failed takes no answer; the result is not `completed`.
    for (signal, key) in [
        (Signal::SIGINT, "b"),
        (Signal::SIGTERM, "c"),
        (Signal::SIGHUP, "d"),
    ] {
        let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
        let cancelled = run.next_json()["execution_id"].as_str().unwrap().to_owned();
        let failed_round = run.next_json()["round_id"].as_str().unwrap().to_owned();
        kill(
            Pid::from_raw(i32::try_from(run.child.id()).unwrap()),
            signal,
        )
        .unwrap();
        let stopped = run.finish();
        let line = stopped.stderr.lines().last().unwrap_or_default().to_owned();
        seen.record(
            &format!("run stopped by {signal}"),
            &Done {
                code: stopped.code,
                stdout: String::new(),
                stderr: line,
            },
        );
        seen.record(
            "respond failed round",
            &respond(&[
                &cancelled,
                &failed_round,
                "--idempotency-key",
                key,
                "--responses",
                ADDRESS,
            ]),
        );
        seen.record(
            "result cancelled",
            &store.m3(&["--json", "result", &cancelled]),
        );
    }

    let documented = documented();
    let skipped: BTreeMap<&str, &str> = NOT_PROVOKED.into_iter().collect();
    for (code, status) in &seen.0 {
        assert_eq!(
            documented.get(code),
            Some(status),
            "`{code}` exited {status}; docs/cli.md says {:?}",
            documented.get(code)
        );
    }
    for code in documented.keys() {
        assert!(
            seen.0.contains_key(code) || skipped.contains_key(code.as_str()),
            "no command here provokes `{code}`, and NOT_PROVOKED does not say why"
        );
    }
    for code in skipped.keys() {
        assert!(documented.contains_key(*code), "`{code}` is not documented");
        assert!(
            !seen.0.contains_key(*code),
            "`{code}` is provoked after all"
        );
    }
}
