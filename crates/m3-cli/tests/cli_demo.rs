//! `m3 demo` on a fresh store: a SQLite file given with `--db`, and a PostgreSQL schema
//! given with `M3_DB=postgres://...`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Store;

#[test]
fn the_demo_books_the_shipment_and_tells_each_step() {
    demo_books_the_shipment(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn the_demo_books_the_shipment_on_postgres() {
    demo_books_the_shipment(&Store::postgres());
}

fn demo_books_the_shipment(store: &Store) {
    let done = store.m3(&["demo"]).expect_code(0);
    for step in [
        "1. submitted execution",
        "2. waiting for the server to ask for input",
        "[shipping_address] form: Enter the delivery address.",
        "responses committed to round",
        "3. round",
        "is resolved",
        "finished: completed",
        "shipment booked.",
    ] {
        assert!(
            done.stdout.contains(step),
            "missing {step:?} in:\n{}",
            done.stdout
        );
    }
    assert!(done.stdout.contains("answered by "), "{}", done.stdout);
    // The store keeps the execution for later inspection, with who answered each round.
    let executions = store.m3(&["--json", "executions"]).expect_code(0).json();
    assert_eq!(executions[0]["outcome"], "completed");
    let execution = executions[0]["execution_id"].as_str().unwrap();
    let rounds = store.m3(&["rounds", execution]).expect_code(0).stdout;
    assert!(rounds.contains("ANSWERED_BY"), "{rounds}");
    assert!(rounds.contains("(cli)"), "{rounds}");
}
