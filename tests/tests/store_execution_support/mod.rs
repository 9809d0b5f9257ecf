//! Helpers shared by the `store_execution_*` tests: a store on a real SQLite
//! file in a temp dir, driven by a `ManualClock`.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use m3_store::{
    AcquireLease, ExecutionLease, ExecutionRecord, ExecutionStore, NewExecution,
    SqliteExecutionStore, SqliteStoreOptions,
};
use m3_types::{Error, HumanInput, ManualClock};
use serde_json::json;
use tempfile::TempDir;
use time::OffsetDateTime;
use time::macros::datetime;

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The fixed start of every test clock.
pub const START: OffsetDateTime = datetime!(2026-11-29 12:00:00 UTC);

/// Lease duration used by the tests.
pub const TTL: Duration = Duration::from_secs(30);

/// A temp dir, a database path inside it, and a manual clock.
pub struct Fixture {
    pub dir: TempDir,
    pub path: PathBuf,
    pub clock: ManualClock,
}

impl Fixture {
    pub fn new() -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("m3.sqlite");
        Ok(Self {
            dir,
            path,
            clock: ManualClock::new(START),
        })
    }

    /// Opens a new store object on the fixture's file with its clock.
    pub async fn open(&self) -> TestResult<SqliteExecutionStore> {
        Ok(open_at(&self.path, &self.clock).await?)
    }
}

pub async fn open_at(path: &Path, clock: &ManualClock) -> m3_types::Result<SqliteExecutionStore> {
    SqliteExecutionStore::open_with(
        path,
        SqliteStoreOptions::new().clock(Arc::new(clock.clone())),
    )
    .await
}

/// Creates a `fail` execution with a small spec.
pub async fn create(store: &dyn ExecutionStore) -> TestResult<ExecutionRecord> {
    Ok(store
        .create_execution(NewExecution::new(json!({"prompt": "ship it", "n": 1})))
        .await?)
}

/// Creates a `managed` execution.
pub async fn create_managed(store: &dyn ExecutionStore) -> TestResult<ExecutionRecord> {
    Ok(store
        .create_execution(
            NewExecution::new(json!({"prompt": "ask me"})).with_human_input(HumanInput::Managed),
        )
        .await?)
}

/// Acquires a lease for `owner` with the test TTL.
pub async fn lease(
    store: &dyn ExecutionStore,
    execution_id: &str,
    owner: &str,
) -> m3_types::Result<ExecutionLease> {
    store
        .acquire_lease(AcquireLease::new(execution_id, owner, TTL))
        .await
}

/// Asserts that `result` failed with `code`, printing the error.
#[track_caller]
#[expect(clippy::panic, reason = "a test assertion helper")]
pub fn assert_code<T: std::fmt::Debug>(result: m3_types::Result<T>, code: &str) -> Error {
    match result {
        Ok(value) => panic!("expected error {code}, got Ok({value:?})"),
        Err(err) => {
            println!("got expected {code}: {err} {:?}", err.details());
            assert_eq!(err.code(), code, "unexpected error: {err:?}");
            err
        }
    }
}

/// The names of the tables in the database file.
pub async fn table_names(store: &SqliteExecutionStore) -> TestResult<Vec<String>> {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(store.pool())
            .await?;
    Ok(names)
}
