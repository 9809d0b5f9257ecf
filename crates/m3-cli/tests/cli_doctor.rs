//! `m3 doctor`: exit 0 when `m3 demo` will work, each check with how to fix it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Store;

#[test]
fn doctor_passes_on_a_fresh_directory_and_on_an_existing_store() {
    let store = Store::new();
    let report = store.m3(&["--json", "doctor"]).expect_code(0).json();
    assert_eq!(report["demo_ready"], true);
    let status = |name: &str| check(&report, name);
    assert_eq!(status("store")["status"], "ok", "{report}");
    assert!(status("store")["detail"].as_str().unwrap().contains("yet"));
    assert_eq!(status("example server")["status"], "ok", "{report}");
    for optional in ["codex", "python", "node"] {
        let check = status(optional);
        assert_ne!(check["status"], "fail", "{report}");
        if check["status"] == "warn" {
            assert!(
                check["fix"].as_str().unwrap().contains("install"),
                "{report}"
            );
        }
    }
    // Doctor creates nothing; after a demo it opens the store.
    assert!(!store.db().exists());
    store.m3(&["demo"]).expect_code(0);
    let human = store.m3(&["doctor"]).expect_code(0);
    assert_contains(&human.stdout, "(1 executions, SQLite journal: WAL)");
    assert_contains(&human.stdout, "m3 demo will work");
}

#[test]
fn doctor_fails_with_a_fix_when_the_store_cannot_be_created() {
    let store = Store::new();
    let file = store.dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let db = file.join("m3.sqlite");
    let output = std::process::Command::new(common::m3_bin())
        .arg("--db")
        .arg(&db)
        .arg("doctor")
        .env_remove("M3_DB")
        .output()
        .unwrap();
    let done = common::Done::from(output).expect_code(1);
    assert_contains(&done.stdout, "fail  store");
    assert_contains(&done.stdout, "fix: give a writable place");
    assert_contains(&done.stdout, "m3 demo will not work");
    assert_contains(&done.stderr, "error[doctor_failed]");
}

/// Fails with the whole `text` unless it contains `part`.
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} not in:\n{text}");
}

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {report}"))
}

/// Runs `m3 demo`, then `m3 doctor`, and checks that a change announced by doctor's second
/// process woke it through `mechanism`; returns doctor's report.
fn signal_woke_doctor(store: &Store, mechanism: &str) -> serde_json::Value {
    store.m3(&["demo"]).expect_code(0);
    let report = store.m3(&["--json", "doctor"]).expect_code(0).json();
    let signal = check(&report, "change signal");
    assert_eq!(signal["status"], "ok", "{report}");
    let expected = format!("{mechanism}: a change announced by another process woke this one");
    let detail = signal["detail"].as_str().unwrap();
    assert!(detail.starts_with(&expected), "{report}");
    report
}

#[test]
fn doctor_probes_the_change_signal_from_a_second_process() {
    let store = Store::new();
    let before = store.m3(&["--json", "doctor"]).expect_code(0).json();
    let signal = check(&before, "change signal");
    assert_eq!(signal["status"], "ok", "{before}");
    assert!(signal["detail"].as_str().unwrap().contains("not checked"));
    signal_woke_doctor(&store, "unix-datagram");
    // Turned off, it warns with the fix, and m3 demo still works (exit 0).
    let off = store
        .command(&["--json", "doctor"])
        .env("M3_CHANGE_SIGNAL", "off")
        .output()
        .unwrap();
    let off = common::Done::from(off).expect_code(0).json();
    let signal = check(&off, "change signal");
    assert_eq!(signal["status"], "warn", "{off}");
    assert!(
        signal["fix"]
            .as_str()
            .unwrap()
            .contains("unset M3_CHANGE_SIGNAL"),
        "{off}"
    );
    assert_eq!(off["demo_ready"], true);
}

#[cfg(feature = "postgres")]
#[test]
fn doctor_probes_the_notify_signal_of_a_postgres_store() {
    let store = Store::postgres();
    let report = signal_woke_doctor(&store, "postgres-notify");
    // A server store has no SQLite journal to report.
    let store_line = check(&report, "store")["detail"].as_str().unwrap();
    assert!(!store_line.contains("journal"), "{report}");
}
