//! DDL of the execution tables (m3-rs names; no on-disk compatibility with the
//! Python `v2_*` execution tables is intended).

use sqlx::SqliteConnection;

use crate::sqlite::error::storage;
use crate::sqlite::feed::{self, EXECUTION_TRIGGERS, FEED_OBJECTS};
use m3_types::Result;

/// Table of executions.
pub const EXECUTIONS_TABLE: &str = "m3rs_executions";
/// Table of execution events (append-only).
pub const EXECUTION_EVENTS_TABLE: &str = "m3rs_execution_events";
/// Schema version table of the execution tables.
pub const EXECUTION_SCHEMA_TABLE: &str = "m3rs_execution_schema";

/// Name of the managed-input rounds table (owned by the managed-input store;
/// the execution store only checks for it and updates it during recovery).
pub(crate) const MANAGED_ROUNDS_TABLE: &str = "m3_managed_input_rounds";

const DDL: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS m3rs_executions (
        id TEXT NOT NULL PRIMARY KEY CHECK (length(id) > 0),
        spec_json TEXT NOT NULL,
        human_input TEXT NOT NULL CHECK (human_input IN ('fail','managed')),
        lifecycle TEXT NOT NULL CHECK (lifecycle IN ('created','queued','starting','idle',
            'running_turn','waiting_for_input','closing','finished')),
        outcome TEXT CHECK (outcome IS NULL OR outcome IN ('completed','failed','timed_out',
            'cancelled','interrupted')),
        error_json TEXT,
        result_json TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        finished_at TEXT,
        lease_owner_id TEXT,
        lease_token TEXT UNIQUE,
        lease_expires_at TEXT,
        cancel_requested_at TEXT,
        cancel_reason TEXT,
        CHECK ((lifecycle = 'finished') = (outcome IS NOT NULL AND finished_at IS NOT NULL)),
        CHECK ((lease_token IS NULL) = (lease_owner_id IS NULL)),
        CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL))
    )",
    "CREATE INDEX IF NOT EXISTS m3rs_executions_created ON m3rs_executions(created_at, id)",
    "CREATE INDEX IF NOT EXISTS m3rs_executions_lease_expiry
        ON m3rs_executions(lease_expires_at) WHERE lease_token IS NOT NULL AND finished_at IS NULL",
    "CREATE TABLE IF NOT EXISTS m3rs_execution_events (
        execution_id TEXT NOT NULL REFERENCES m3rs_executions(id) ON DELETE CASCADE,
        sequence INTEGER NOT NULL CHECK (sequence >= 0),
        kind TEXT NOT NULL CHECK (length(kind) > 0),
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (execution_id, sequence)
    ) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS m3rs_execution_events_append_only
        BEFORE UPDATE ON m3rs_execution_events
        BEGIN SELECT RAISE(ABORT, 'execution events are append-only'); END",
    "CREATE TABLE IF NOT EXISTS m3rs_execution_schema (
        version INTEGER PRIMARY KEY CHECK (version > 0)
    )",
    "INSERT INTO m3rs_execution_schema(version)
        SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM m3rs_execution_schema)",
];

/// Whether every table, index and trigger of [`DDL`] and the version row already exist, read
/// without the write lock (so opening a current database writes nothing and works while
/// another process holds the write lock).
///
/// # Errors
/// `storage_error` if the catalog cannot be read.
pub(crate) async fn is_current(conn: &mut SqliteConnection) -> Result<bool> {
    let unreadable = |e| storage("could not read the execution schema", e);
    let found: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('m3rs_executions',
            'm3rs_executions_created', 'm3rs_executions_lease_expiry', 'm3rs_execution_events',
            'm3rs_execution_events_append_only', 'm3rs_execution_schema')",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(unreadable)?;
    let feed_objects = [
        FEED_OBJECTS[0],
        FEED_OBJECTS[1],
        FEED_OBJECTS[4],
        FEED_OBJECTS[5],
    ];
    if found != 6 || feed::count_objects(&mut *conn, &feed_objects).await? != 4 {
        return Ok(false);
    }
    let versioned: Option<i64> =
        sqlx::query_scalar("SELECT version FROM m3rs_execution_schema LIMIT 1")
            .fetch_optional(&mut *conn)
            .await
            .map_err(unreadable)?;
    Ok(versioned.is_some())
}

/// Creates the execution tables if absent, inside the caller's `BEGIN IMMEDIATE`
/// transaction (safe for concurrent initializers in several processes).
pub(crate) async fn initialize(conn: &mut SqliteConnection) -> Result<()> {
    for statement in DDL {
        sqlx::query(*statement)
            .execute(&mut *conn)
            .await
            .map_err(|e| storage("could not create the execution tables", e))?;
    }
    feed::initialize(conn, &EXECUTION_TRIGGERS).await
}
