//! `--db` naming a file that is not an m3 store: another application's SQLite database, a
//! database with a table of m3's name but another layout, a file that is not SQLite at all.
//! Every command, reading (`executions`, `pending`, `recover`) or writing (`submit`), refuses
//! it with `invalid_argument` (reason `invalid_store`, exit 3) and leaves it untouched: the
//! same bytes, the same journal mode, no companion file created. A missing file is
//! `not_found` (exit 8) for the reading commands and is not created.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::{Done, m3_bin, shipping_server};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

/// The commands a foreign file is given to: the reading ones and one that writes.
fn commands() -> Vec<Vec<String>> {
    let server = shipping_server("");
    let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    vec![
        words(&["executions"]),
        words(&["pending"]),
        words(&["recover"]),
        words(&[
            "submit",
            "--server",
            &server,
            "--call",
            "shipping:book_shipment",
            "--human-input",
            "managed",
        ]),
    ]
}

fn m3_on(db: &Path, args: &[String]) -> Done {
    let output = Command::new(m3_bin())
        .arg("--json")
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("M3_DB")
        .current_dir(db.parent().unwrap())
        .output()
        .unwrap();
    Done::from(output)
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Creates a SQLite database in rollback-journal mode (SQLite's default) with `statements`.
fn sqlite_file(path: &Path, statements: &[&str]) {
    block_on(async {
        let mut conn = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .connect()
            .await
            .unwrap();
        for statement in statements {
            sqlx::raw_sql(sqlx::AssertSqlSafe(*statement))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();
    });
}

/// The journal mode stored in the file's header: bytes 18 and 19 are 2 in WAL mode and 1
/// in rollback-journal mode (read from the bytes, so reading it changes nothing).
fn header_journal(bytes: &[u8]) -> (u8, u8) {
    (bytes[18], bytes[19])
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs every command on `file` and checks each refusal and that nothing changed.
fn refused_untouched(file: &Path) {
    let dir = file.parent().unwrap();
    let before = std::fs::read(file).unwrap();
    let files = listing(dir);
    for args in commands() {
        let done = m3_on(file, &args).expect_code(3);
        assert_eq!(done.error_code(), "invalid_argument", "{args:?}");
        let error: serde_json::Value = serde_json::from_str(done.stderr.trim()).unwrap();
        assert_eq!(
            error["error"]["details"]["reason"], "invalid_store",
            "{args:?}: {}",
            done.stderr
        );
        let after = std::fs::read(file).unwrap();
        assert!(after == before, "{args:?} changed the file's bytes");
        assert_eq!(listing(dir), files, "{args:?} created or removed a file");
    }
}

#[test]
fn another_applications_database_is_refused_untouched_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.sqlite");
    sqlite_file(
        &file,
        &[
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
            "INSERT INTO notes (body) VALUES ('keep me')",
        ],
    );
    assert_eq!(
        header_journal(&std::fs::read(&file).unwrap()),
        (1, 1),
        "rollback journal"
    );
    refused_untouched(&file);
    assert_eq!(header_journal(&std::fs::read(&file).unwrap()), (1, 1));
}

#[test]
fn a_table_of_an_m3_name_with_another_layout_is_refused_before_any_change() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("clash.sqlite");
    sqlite_file(
        &file,
        &["CREATE TABLE m3rs_executions (id TEXT PRIMARY KEY, owner TEXT)"],
    );
    refused_untouched(&file);
    assert_eq!(header_journal(&std::fs::read(&file).unwrap()), (1, 1));
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "these are not the pages of a database\n".repeat(200)).unwrap();
    refused_untouched(&file);
}

#[test]
fn a_missing_store_is_not_found_for_the_reading_commands_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("missing.sqlite");
    for args in commands().into_iter().take(3) {
        let done = m3_on(&file, &args).expect_code(8);
        assert_eq!(done.error_code(), "not_found", "{args:?}");
        assert!(!file.exists(), "{args:?} created the store");
    }
}
