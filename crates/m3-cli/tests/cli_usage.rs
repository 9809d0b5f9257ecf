//! Usage errors, `m3 schema`, and the output/exit-code layer without executions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Store;

#[test]
fn usage_errors_exit_2_with_clap_s_whole_message() {
    let store = Store::new();
    let human = store.m3(&["run", "--bogus"]).expect_code(2);
    assert!(
        human
            .stderr
            .starts_with("error[usage]: unexpected argument '--bogus' found"),
        "{}",
        human.stderr
    );
    assert!(human.stderr.contains("Usage: m3 run"), "{}", human.stderr);
    // A missing argument lists what is missing; a typo gets clap's suggestion.
    let missing = store.m3(&["status"]).expect_code(2);
    assert!(
        missing
            .stderr
            .contains("the following required arguments were not provided")
            && missing.stderr.contains("<EXECUTION>"),
        "{}",
        missing.stderr
    );
    let typo = store.m3(&["pendng"]).expect_code(2);
    assert!(
        typo.stderr
            .contains("tip: a similar subcommand exists: 'pending'"),
        "{}",
        typo.stderr
    );
    let json = store.m3(&["--json", "respond", "e", "r"]).expect_code(2);
    assert_eq!(json.error_code(), "usage");
    assert!(json.stderr.contains("Usage: m3 respond"), "{}", json.stderr);
    store
        .m3(&["run", "--server", "noequals", "--call", "s:t"])
        .expect_code(2);
    store
        .m3(&["run", "--call", "s:t", "--human-input", "sometimes"])
        .expect_code(2);
    store.m3(&["--help"]).expect_code(0);
    store.m3(&["run", "--help"]).expect_code(0);
}

#[test]
fn invalid_arguments_exit_3() {
    let store = Store::new();
    let bad_json = store
        .m3(&[
            "--json",
            "respond",
            "e",
            "r",
            "--idempotency-key",
            "k",
            "--responses",
            "{",
        ])
        .expect_code(3);
    assert_eq!(bad_json.error_code(), "invalid_argument");
    store
        .m3(&["run", "--call", "shipping", "--human-input", "managed"])
        .expect_code(3);
    store
        .m3(&["run", "--call", "s:t", "--tools", "no-colon"])
        .expect_code(3);
    store.m3(&["--json", "schema", "NoSuchType"]).expect_code(3);
}

#[test]
fn schema_prints_the_value_types() {
    let store = Store::new();
    let one = store
        .m3(&["--json", "schema", "PendingElicitationRound"])
        .expect_code(0)
        .json();
    assert!(one["properties"]["round_id"].is_object(), "{one}");
    let all = store.m3(&["--json", "schema"]).expect_code(0).json();
    assert!(all["ElicitationResponse"].is_object());
    let human = store.m3(&["schema"]).expect_code(0);
    assert!(human.stdout.contains("ExecutionResult"));
}

#[test]
fn m3_db_selects_the_store_and_read_commands_never_create_one() {
    let store = Store::new();
    let path = store.dir.path().join("typo-dir").join("from-env.sqlite");
    let done = std::process::Command::new(common::m3_bin())
        .args(["--json", "executions"])
        .env("M3_DB", &path)
        .output()
        .unwrap();
    let done = common::Done::from(done).expect_code(8);
    assert_eq!(done.error_code(), "not_found");
    let error: serde_json::Value = serde_json::from_str(done.stderr.trim()).unwrap();
    assert_eq!(
        error["error"]["details"]["store"],
        path.display().to_string()
    );
    assert!(!path.exists() && !path.parent().unwrap().exists());
}
