//! `m3 policies add|list|remove` on SQLite and PostgreSQL: policies are added, listed (the
//! human form and `--json`) and removed; invalid input (a bad name, a taken name, content
//! that is not an object of primitives, a malformed digest, no answer or two, a bad
//! duration) is refused and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Store;
use serde_json::Value;

fn names(store: &Store) -> Vec<String> {
    let listed: Value = store
        .m3(&["--json", "policies", "list"])
        .expect_code(0)
        .json();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

fn policies_on(store: &Store) {
    store.m3(&["demo"]).expect_code(0);
    let empty = store.m3(&["policies", "list"]).expect_code(0).stdout;
    assert!(empty.contains("no policies"), "{empty}");
    let added = store
        .m3(&[
            "--json",
            "policies",
            "add",
            "decline-late",
            "--server",
            "shipping",
            "--operation-kind",
            "tool",
            "--operation",
            "book_shipment",
            "--after",
            "10m",
            "--decline",
        ])
        .expect_code(0)
        .json();
    assert_eq!(added["name"], "decline-late");
    assert_eq!(added["after_ms"], 600_000);
    assert_eq!(added["answer"]["action"], "decline");
    let text = store
        .m3(&[
            "policies",
            "add",
            "accept-home",
            "--request-key",
            "shipping_address",
            "--after",
            "1h",
            "--accept",
            r#"{"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(0)
        .stdout;
    assert!(
        text.contains("added policy accept-home: accept after 1h"),
        "{text}"
    );

    let refused: [&[&str]; 8] = [
        &[
            "policies",
            "add",
            "decline-late",
            "--after",
            "1m",
            "--cancel",
        ],
        &["policies", "add", "has space", "--after", "1m", "--cancel"],
        &[
            "policies",
            "add",
            "nested",
            "--after",
            "1m",
            "--accept",
            r#"{"a": {"b": 1}}"#,
        ],
        &[
            "policies", "add", "list", "--after", "1m", "--accept", "[1, 2]",
        ],
        &[
            "policies",
            "add",
            "digest",
            "--after",
            "1m",
            "--decline",
            "--schema-digest",
            "md5:1",
        ],
        &["policies", "add", "none", "--after", "1m"],
        &[
            "policies",
            "add",
            "two",
            "--after",
            "1m",
            "--decline",
            "--cancel",
        ],
        &["policies", "add", "when", "--after", "soon", "--decline"],
    ];
    for args in refused {
        let result = store.m3(args);
        assert_ne!(result.code, 0, "{args:?} was accepted");
    }
    let taken = store
        .m3(&[
            "--json",
            "policies",
            "add",
            "decline-late",
            "--after",
            "1m",
            "--cancel",
        ])
        .expect_code(3);
    assert_eq!(taken.error_code(), "invalid_argument");
    assert!(
        taken.stderr.contains("policy_name_taken"),
        "{}",
        taken.stderr
    );
    let kind = store
        .m3(&[
            "policies",
            "add",
            "k",
            "--operation-kind",
            "job",
            "--after",
            "1m",
            "--cancel",
        ])
        .expect_code(3);
    assert!(!kind.stderr.is_empty());
    assert_eq!(
        names(store),
        ["decline-late", "accept-home"],
        "a refused policy was added"
    );

    let listed = store.m3(&["policies", "list"]).expect_code(0).stdout;
    assert!(
        listed.contains("decline-late: decline after 10m (server=shipping operation_kind=tool operation=book_shipment)"),
        "{listed}"
    );
    assert!(!listed.contains("Pune"), "the list shows content: {listed}");
    // A secret-named value a policy answers with is shown redacted, in JSON too.
    let secret = r#"{"password": "hunter2-policy-secret", "city": "Pune"}"#;
    let added = store
        .m3(&[
            "--json",
            "policies",
            "add",
            "with-secret",
            "--after",
            "1m",
            "--accept",
            secret,
        ])
        .expect_code(0)
        .stdout;
    let listed = store
        .m3(&["--json", "policies", "list"])
        .expect_code(0)
        .stdout;
    for shown in [&added, &listed] {
        assert!(!shown.contains("hunter2-policy-secret"), "{shown}");
        assert!(
            shown.contains("[REDACTED]") && shown.contains("Pune"),
            "{shown}"
        );
    }
    store
        .m3(&["policies", "remove", "with-secret"])
        .expect_code(0);
    store
        .m3(&["policies", "remove", "decline-late"])
        .expect_code(0);
    let missing = store
        .m3(&["--json", "policies", "remove", "decline-late"])
        .expect_code(8);
    assert_eq!(missing.error_code(), "not_found");
    assert_eq!(names(store), ["accept-home"]);
}

#[test]
fn policies_are_added_listed_and_removed_and_invalid_ones_refused() {
    policies_on(&Store::new());
}

#[test]
fn policies_are_added_listed_and_removed_and_invalid_ones_refused_on_postgres() {
    policies_on(&Store::postgres());
}

/// `m3 submit --input-deadline D --remind-at F,...`: the fractions are checked at submission
/// (above 0, below 1) and need a deadline.
#[test]
fn remind_at_is_checked_when_an_execution_is_submitted() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let server = common::shipping_server("");
    let submit = |extra: &[&str]| {
        let mut args = vec![
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
        ];
        args.extend_from_slice(extra);
        store.m3(&args)
    };
    submit(&["--input-deadline", "1h", "--remind-at", "0.25,0.75"]).expect_code(0);
    let refused = submit(&["--input-deadline", "1h", "--remind-at", "0.5,1.5"]).expect_code(3);
    assert_eq!(refused.error_code(), "invalid_argument");
    submit(&["--remind-at", "0.5"]).expect_code(2);
}
