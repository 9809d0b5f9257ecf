//! A PostgreSQL restart under a waiting `m3 worker` (issue 27, item 2): the worker rides it
//! out, a later `m3 respond` is delivered exactly once and the execution completes. Each
//! test starts its own PostgreSQL (own data directory and port, as the `postgres` user via
//! `runuser`, so the tests run as root, as in CI) and restarts it with `pg_ctl -m fast`,
//! which ends every session with SQLSTATE 57P01: the shared test server is never touched.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
mod queue;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Done, Running, Store};
use queue::{
    book, call_log, file, logged_server, submit_leased, wait_for_event, wait_until, worker_leased,
};
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use time::OffsetDateTime;

/// The execution lease (seconds): renewed every 3 s, long enough to outlast a restart on a
/// loaded machine (the worker must keep waiting through it, not lose its lease).
const LEASE: &str = "9";
/// A hang guard for one step (a restart, a renewal, an answer): not a timing target.
const STEP: Duration = Duration::from_secs(60);

/// A PostgreSQL server of this test only; stopped and removed when dropped.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// `initdb` and `pg_ctl start` as the `postgres` user, on a free port of 127.0.0.1.
    fn start() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL is installed (scripts/test.sh installs it)")
            .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
            .filter(|bin| bin.join("pg_ctl").exists())
            .max()
            .expect("a PostgreSQL with pg_ctl under /usr/lib/postgresql");
        let dir = tempfile::tempdir().unwrap();
        run(Command::new("chown").arg("postgres").arg(dir.path()));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self { dir, bin, port };
        run(server
            .as_postgres("initdb")
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(server.data()));
        server.pg_ctl("start");
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// `tool` of this PostgreSQL, run as the `postgres` user.
    fn as_postgres(&self, tool: &str) -> Command {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(tool));
        command
    }

    /// `pg_ctl ACTION -m fast -w` (`start`, `stop`, `restart`): a fast stop ends every
    /// session with `57P01 admin_shutdown`, as an operator's restart does.
    fn pg_ctl(&self, action: &str) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        run(self
            .as_postgres("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-w", "-t", "60", "-m", "fast", "-o", &options, action]));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self
            .as_postgres("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// The round's stored lease expiry, read directly (`None` while the server is down).
fn round_lease_expiry(url: &str, round: &str) -> Option<OffsetDateTime> {
    block_on(async {
        let mut conn = PgConnection::connect(url).await.ok()?;
        sqlx::query_scalar("SELECT lease_expires_at FROM m3rs_rounds WHERE round_id = $1")
            .bind(round)
            .fetch_optional(&mut conn)
            .await
            .ok()
            .flatten()
    })
}

/// The execution's stored lifecycle, read directly.
fn lifecycle(url: &str, execution: &str) -> String {
    block_on(async {
        let mut conn = PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar("SELECT lifecycle FROM m3rs_executions WHERE execution_id = $1")
            .bind(execution)
            .fetch_one(&mut conn)
            .await
            .unwrap()
    })
}

/// Waits until the worker renewed the round's lease after the restart (it kept waiting
/// through it) or gave the execution up, and asserts the former: an execution a restart
/// ended would never deliver the answer.
fn expect_the_worker_kept_waiting(
    pg: &PrivatePostgres,
    execution: &str,
    round: &str,
    before: OffsetDateTime,
) {
    let url = pg.url();
    wait_until(STEP, "a renewal after the restart", || {
        if lifecycle(&url, execution) == "finished" {
            return Some(());
        }
        round_lease_expiry(&url, round)
            .filter(|at| *at > before)
            .map(drop)
    });
    assert_ne!(
        lifecycle(&url, execution),
        "finished",
        "the restart ended the execution: {:?}",
        m3_json(pg, &["--json", "status", execution])
    );
}

fn m3_json(pg: &PrivatePostgres, args: &[&str]) -> Value {
    let done = Store::postgres_at(&pg.url()).m3(args);
    serde_json::from_str(&done.stdout).unwrap_or(Value::Null)
}

fn respond(store: &Store, execution: &str, round: &str) -> Done {
    let accept =
        format!(r#"shipping_address={{"street": "1 Main Street", "city": "{execution}"}}"#);
    store.m3(&[
        "--json",
        "respond",
        execution,
        round,
        "--idempotency-key",
        "answer-1",
        "--accept",
        &accept,
    ])
}

/// The answered calls of the shipping server's log (each delivery of an answer is one).
fn deliveries(log: &Path) -> usize {
    call_log(log)
        .iter()
        .filter(|line| line["answered"] == true)
        .count()
}

/// A worker waiting on a pending round of a fresh managed execution: (worker, execution,
/// round).
fn waiting_worker(store: &Store, log: &Path) -> (Running, String, String) {
    let mut worker = worker_leased(store, LEASE, &[]);
    wait_for_event(&mut worker, "started", None);
    let execution = submit_leased(store, &logged_server(log, ""), LEASE, &book());
    let pending = wait_for_event(&mut worker, "round_pending", Some(&execution));
    let round = pending["round_id"].as_str().unwrap().to_owned();
    (worker, execution, round)
}

/// The answer reached the server once and the execution completed, with its round resolved.
fn expect_delivered_once(worker: &mut Running, store: &Store, log: &Path, execution: &str) {
    let finished = wait_for_event(worker, "finished", Some(execution));
    assert_eq!(finished["outcome"], "completed", "{finished}");
    assert_eq!(deliveries(log), 1, "deliveries: {:?}", call_log(log));
    let rounds = store.m3(&["--json", "rounds", execution]).expect_code(0);
    let statuses: Vec<Value> = rounds
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|round| round["status"].clone())
        .collect();
    assert_eq!(statuses, vec![Value::from("resolved")], "{}", rounds.stdout);
}

#[test]
fn a_restart_under_a_waiting_worker_loses_no_answer() {
    let pg = PrivatePostgres::start();
    let store = Store::postgres_at(&pg.url());
    let log = file(&store, "calls.jsonl");
    let (mut worker, execution, round) = waiting_worker(&store, &log);
    let before = round_lease_expiry(&pg.url(), &round).unwrap();
    pg.pg_ctl("restart");
    expect_the_worker_kept_waiting(&pg, &execution, &round, before);
    respond(&store, &execution, &round).expect_code(0);
    expect_delivered_once(&mut worker, &store, &log, &execution);
}

#[test]
fn a_respond_during_a_restart_is_committed_once_and_delivered_once() {
    let pg = PrivatePostgres::start();
    let store = Store::postgres_at(&pg.url());
    let log = file(&store, "calls.jsonl");
    let (mut worker, execution, round) = waiting_worker(&store, &log);
    // The answer is sent while the server is down and comes back: `m3 respond` either waits
    // for it (the pool retries connecting) and commits, or fails with a `storage_error` and
    // commits nothing, and then the same answer, sent again under the same key, commits.
    pg.pg_ctl("stop");
    let sending = std::thread::scope(|scope| {
        let sending = scope.spawn(|| respond(&store, &execution, &round));
        pg.pg_ctl("start");
        sending.join().unwrap()
    });
    if sending.code != 0 {
        assert_eq!(sending.error_code(), "storage_error", "{}", sending.stderr);
        respond(&store, &execution, &round).expect_code(0);
    }
    expect_delivered_once(&mut worker, &store, &log, &execution);
    // A repeat after the delivery is an idempotent replay: nothing is delivered again.
    respond(&store, &execution, &round);
    assert_eq!(deliveries(&log), 1, "deliveries: {:?}", call_log(&log));
}
