//! Helpers of the worker-service tests: `m3 worker` processes, `m3 submit`, the shipping
//! server's call log, and reading the store's rows directly (so a test observes recovery
//! without opening a kit, which would run recovery itself).
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use sqlx::{Connection, Row, SqliteConnection};

pub use crate::common::wait_until;
use crate::common::{Running, Store, m3_bin, refs};

/// The execution lease the tests submit with (seconds): short, so recovery is quick.
pub const LEASE: &str = "2";
/// The sweep interval of the test workers (seconds).
pub const SWEEP: &str = "0.25";
/// An upper bound for "lease + sweep interval" plus process and scheduling slack on a
/// loaded 2-core machine (a hang guard, not a timing target).
pub const RECOVERY_BOUND: Duration = Duration::from_secs(8);

/// `m3 --json worker` with the test sweep and `extra` options.
pub fn worker(store: &Store, extra: &[&str]) -> Running {
    worker_leased(store, LEASE, extra)
}

/// `m3 --json worker` whose claims hold `claim_lease` seconds until the execution's own.
pub fn worker_leased(store: &Store, claim_lease: &str, extra: &[&str]) -> Running {
    let mut args = vec![
        "--json",
        "worker",
        "--sweep-every",
        SWEEP,
        "--claim-lease",
        claim_lease,
    ];
    args.extend_from_slice(extra);
    store.spawn(&args)
}

/// Reads worker lines until one of `kind` for `execution` (any execution when `None`).
pub fn wait_for_event(worker: &mut Running, kind: &str, execution: Option<&str>) -> Value {
    loop {
        let event = worker.next_json();
        if event["type"] == kind
            && execution.is_none_or(|id| event["execution_id"].as_str() == Some(id))
        {
            return event;
        }
    }
}

/// The shipping server on the modern era, logging every call to `log`.
pub fn logged_server(log: &Path, extra: &str) -> String {
    format!(
        "shipping='{}' example-server shipping --era 2026-07-28 --call-log '{}' {extra}",
        m3_bin(),
        log.display()
    )
}

/// `m3 --json submit` of a managed execution; returns its id.
pub fn submit(store: &Store, server: &str, agent: &[&str]) -> String {
    submit_leased(store, server, LEASE, agent)
}

/// `m3 --json submit` of a managed execution with a `lease` of that many seconds.
pub fn submit_leased(store: &Store, server: &str, lease: &str, agent: &[&str]) -> String {
    let mut args = vec![
        "--json".to_owned(),
        "submit".to_owned(),
        "--server".to_owned(),
        server.to_owned(),
        "--human-input".to_owned(),
        "managed".to_owned(),
        "--lease".to_owned(),
        lease.to_owned(),
    ];
    args.extend(agent.iter().map(|a| (*a).to_owned()));
    let done = store.m3(&refs(&args)).expect_code(0);
    done.json()["execution_id"].as_str().unwrap().to_owned()
}

/// The one-step agent booking a shipment.
pub fn book() -> Vec<&'static str> {
    vec![
        "--call",
        "shipping:book_shipment",
        "--arguments",
        r#"{"weight_kg": 2}"#,
    ]
}

/// Every line of a call log.
pub fn call_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("call log line {line:?}: {error}"))
        })
        .collect()
}

/// An execution's row, read directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Row3 {
    pub lifecycle: String,
    pub outcome: Option<String>,
    pub error_code: Option<String>,
    pub owner: Option<String>,
}

/// One round's row, read directly.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRow {
    pub round_id: String,
    pub status: String,
    pub failure_code: Option<String>,
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

async fn connect(db: &Path) -> SqliteConnection {
    let url = format!("sqlite://{}?mode=ro", db.display());
    SqliteConnection::connect(&url).await.unwrap()
}

/// The execution `id` as stored now.
pub fn execution_row(db: &Path, id: &str) -> Option<Row3> {
    block_on(async {
        let mut conn = connect(db).await;
        let row = sqlx::query(
            "SELECT lifecycle, outcome, error_json, lease_owner_id FROM m3rs_executions WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&mut conn)
        .await
        .unwrap()?;
        let error: Option<String> = row.get(2);
        Some(Row3 {
            lifecycle: row.get(0),
            outcome: row.get(1),
            error_code: error
                .and_then(|e| serde_json::from_str::<Value>(&e).ok())
                .and_then(|e| e["code"].as_str().map(str::to_owned)),
            owner: row.get(3),
        })
    })
}

/// Every execution id and lifecycle, oldest first.
pub fn executions(db: &Path) -> Vec<(String, Row3)> {
    let ids: Vec<String> = block_on(async {
        let mut conn = connect(db).await;
        sqlx::query_scalar("SELECT id FROM m3rs_executions ORDER BY created_at, id")
            .fetch_all(&mut conn)
            .await
            .unwrap()
    });
    ids.into_iter()
        .filter_map(|id| execution_row(db, &id).map(|row| (id, row)))
        .collect()
}

/// The rounds of execution `id` as stored now (none before the managed tables exist).
pub fn rounds(db: &Path, id: &str) -> Vec<RoundRow> {
    block_on(async {
        let mut conn = connect(db).await;
        let rows = sqlx::query(
            "SELECT round_id, status, failure_code FROM m3_managed_input_rounds
             WHERE execution_id = ? ORDER BY round_index",
        )
        .bind(id)
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        rows.iter()
            .map(|row| RoundRow {
                round_id: row.get(0),
                status: row.get(1),
                failure_code: row.get(2),
            })
            .collect()
    })
}

/// Sends `signal` to `child`.
pub fn signal(running: &Running, signal: Signal) {
    kill(Pid::from_raw(running.child.id() as i32), signal).unwrap();
}

/// SIGKILLs `running` and reaps it.
pub fn sigkill(running: &mut Running) {
    signal(running, Signal::SIGKILL);
    running.child.wait().unwrap();
}

/// True while process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The pids of the server processes a call log names.
pub fn server_pids(log: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = call_log(log)
        .iter()
        .filter_map(|line| line["pid"].as_u64())
        .map(|pid| pid as u32)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// A path in the store's directory.
pub fn file(store: &Store, name: &str) -> PathBuf {
    store.dir.path().join(name)
}

/// `m3 --json respond` accepting a delivery address for `round` (idempotency key `k`).
pub fn answer(store: &Store, execution: &str, round: &str) -> crate::common::Done {
    store.m3(&[
        "--json",
        "respond",
        execution,
        round,
        "--idempotency-key",
        "k",
        "--accept",
        r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
    ])
}
