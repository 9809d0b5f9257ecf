//! A store whose write lock another process holds: the read-only commands still answer
//! (opening writes nothing on a current database, and recovery at open is best-effort), and
//! the waiting `m3 run` keeps its round.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{Store, managed_run, refs, shipping_server, wait_until};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

/// `BEGIN IMMEDIATE` on a connection of this test process (not an m3 one), held until
/// [`WriteLock::release`].
struct WriteLock {
    runtime: tokio::runtime::Runtime,
    conn: SqliteConnection,
}

impl WriteLock {
    fn hold(store: &Store) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let conn = runtime.block_on(async {
            let mut conn = SqliteConnectOptions::new()
                .filename(store.db())
                .connect()
                .await
                .unwrap();
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .unwrap();
            conn
        });
        Self { runtime, conn }
    }

    fn release(mut self) {
        self.runtime.block_on(async {
            sqlx::query("ROLLBACK")
                .execute(&mut self.conn)
                .await
                .unwrap();
        });
    }
}

#[test]
fn read_only_commands_answer_while_another_process_holds_the_write_lock() {
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round_id = run.next_json()["round_id"].as_str().unwrap().to_owned();
    // The round is stored (and printed) before the execution moves to `waiting_for_input`
    // in a second write; the lock must not be taken between the two.
    wait_until(Duration::from_secs(10), "waiting_for_input", || {
        let status = store.m3(&["--json", "status", &execution]).expect_code(0);
        (status.json()["lifecycle"] == "waiting_for_input").then_some(())
    });

    let lock = WriteLock::hold(&store);
    let pending = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_eq!(pending[0]["round_id"], round_id.as_str());
    let all = store.m3(&["--json", "pending"]).expect_code(0).json();
    assert_eq!(all.as_array().unwrap().len(), 1);
    let status = store
        .m3(&["--json", "status", &execution])
        .expect_code(0)
        .json();
    assert_eq!(status["lifecycle"], "waiting_for_input");
    let executions = store.m3(&["--json", "executions"]).expect_code(0).json();
    assert_eq!(executions.as_array().unwrap().len(), 1);
    let rounds = store
        .m3(&["--json", "rounds", &execution])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["status"], "pending");
    lock.release();

    store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "after-the-lock",
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    assert!(done.stdout.contains("completed"), "{}", done.stdout);
}
