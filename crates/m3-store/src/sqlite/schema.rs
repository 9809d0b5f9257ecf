//! The managed-input tables, byte-compatible with sf-m3 0.3.1.
//!
//! The statements below are the Python original's (`SQLiteManagedInputStore._initialize`):
//! the same table, column, constraint and index names, the same status strings and the same
//! defaults for columns added to a pre-existing partial table. Initialization runs in one
//! `BEGIN IMMEDIATE` transaction, so concurrent initializers (threads or processes) are safe,
//! and it is idempotent.

use sqlx::{AssertSqlSafe, Row, SqliteConnection};

use super::columns::{COLUMN_MIGRATIONS, CREATE_ROUNDS};
use super::error::storage;
use super::feed::{self, FEED_OBJECTS, ROUND_TRIGGERS};
use m3_types::Result;

const CREATE_PENDING_INDEX: &str = "CREATE INDEX IF NOT EXISTS m3_managed_input_pending ON m3_managed_input_rounds(execution_id, status, round_index)";
const CREATE_DIAGNOSTICS: &str = "CREATE TABLE IF NOT EXISTS m3_managed_input_diagnostics (execution_id TEXT NOT NULL, round_id TEXT NOT NULL, responses_redacted_json TEXT NOT NULL, PRIMARY KEY(execution_id, round_id))";
const CREATE_SCHEMA_VERSION: &str = "CREATE TABLE IF NOT EXISTS m3_managed_input_schema (version INTEGER PRIMARY KEY CHECK(version > 0))";
const INSERT_SCHEMA_VERSION: &str = "INSERT INTO m3_managed_input_schema(version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM m3_managed_input_schema)";

/// The tables and the index [`initialize`] creates, by name.
const OBJECTS: [&str; 4] = [
    "m3_managed_input_rounds",
    "m3_managed_input_pending",
    "m3_managed_input_diagnostics",
    "m3_managed_input_schema",
];

/// Whether everything [`initialize`] would create or add is already there (every table,
/// every column, the index, the version row), read without taking the write lock: opening a
/// current database then writes nothing, so it succeeds while another process holds the
/// write lock.
///
/// # Errors
/// `storage_error` if the catalog cannot be read.
pub(crate) async fn is_current(conn: &mut SqliteConnection) -> Result<bool> {
    let unreadable = |e| storage("cannot read the managed-input schema", e);
    let found: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name IN (?1, ?2, ?3, ?4)")
            .bind(OBJECTS[0])
            .bind(OBJECTS[1])
            .bind(OBJECTS[2])
            .bind(OBJECTS[3])
            .fetch_one(&mut *conn)
            .await
            .map_err(unreadable)?;
    let feed_objects = [
        FEED_OBJECTS[0],
        FEED_OBJECTS[1],
        FEED_OBJECTS[2],
        FEED_OBJECTS[3],
        FEED_OBJECTS[6],
    ];
    if found != 4 || feed::count_objects(&mut *conn, &feed_objects).await? != 5 {
        return Ok(false);
    }
    let columns: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pragma_table_info('m3_managed_input_rounds')")
            .fetch_all(&mut *conn)
            .await
            .map_err(unreadable)?;
    if !COLUMN_MIGRATIONS
        .iter()
        .all(|(name, _)| columns.iter().any(|column| column == name))
    {
        return Ok(false);
    }
    let versioned: Option<i64> =
        sqlx::query_scalar("SELECT version FROM m3_managed_input_schema LIMIT 1")
            .fetch_optional(&mut *conn)
            .await
            .map_err(unreadable)?;
    Ok(versioned.is_some())
}

/// Creates the three managed-input tables and the pending index, adds every column a
/// pre-existing (partial) rounds table is missing, and creates the change feed with the
/// rounds table's triggers (objects of m3-rs's own, which the Python original ignores). The caller owns the transaction
/// (`BEGIN IMMEDIATE`); this function only issues statements on `conn`.
pub(crate) async fn initialize(conn: &mut SqliteConnection) -> Result<()> {
    sqlx::query(CREATE_ROUNDS)
        .execute(&mut *conn)
        .await
        .map_err(|e| storage("cannot create the managed-input rounds table", e))?;
    let rows = sqlx::query("PRAGMA table_info(m3_managed_input_rounds)")
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot read the managed-input table layout", e))?;
    let mut present = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row
            .try_get("name")
            .map_err(|e| storage("cannot read the managed-input table layout", e))?;
        present.push(name);
    }
    for (name, definition) in COLUMN_MIGRATIONS {
        if !present.iter().any(|column| column == name) {
            tracing::info!(column = name, "adding missing managed-input column");
            let statement =
                format!("ALTER TABLE m3_managed_input_rounds ADD COLUMN {name} {definition}");
            sqlx::query(AssertSqlSafe(statement))
                .execute(&mut *conn)
                .await
                .map_err(|e| storage("cannot add a managed-input column", e))?;
        }
    }
    for statement in [
        CREATE_PENDING_INDEX,
        CREATE_DIAGNOSTICS,
        CREATE_SCHEMA_VERSION,
        INSERT_SCHEMA_VERSION,
    ] {
        sqlx::query(statement)
            .execute(&mut *conn)
            .await
            .map_err(|e| storage("cannot initialize the managed-input schema", e))?;
    }
    feed::initialize(conn, &ROUND_TRIGGERS).await
}
