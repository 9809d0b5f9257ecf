//! Transaction building blocks of the SQLite execution store: fetching inside
//! a transaction and event appends.

use m3_types::{Error, Result, canonical_json, timestamp};
use serde_json::Value;
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::rows::{event_from_row, execution_from_row, select_execution};
use crate::execution::record::{ExecutionEvent, ExecutionRecord};
use crate::execution::rules::errors as error;
use crate::sqlite::error::storage;

/// Reads one execution on `conn` (inside or outside a transaction).
pub(crate) async fn fetch(
    conn: &mut SqliteConnection,
    execution_id: &str,
) -> Result<Option<ExecutionRecord>> {
    let row = sqlx::query(select_execution!("WHERE e.id = ?"))
        .bind(execution_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| storage("could not read the execution", e))?;
    row.as_ref().map(execution_from_row).transpose()
}

/// Reads one execution that must exist.
pub(crate) async fn fetch_existing(
    conn: &mut SqliteConnection,
    execution_id: &str,
) -> Result<ExecutionRecord> {
    fetch(conn, execution_id)
        .await?
        .ok_or_else(|| error::not_found(execution_id))
}

/// Appends one event with the next sequence number. Must run inside a
/// `BEGIN IMMEDIATE` transaction, which serializes appenders.
pub(crate) async fn append(
    conn: &mut SqliteConnection,
    execution_id: &str,
    kind: &str,
    payload: Value,
    now: OffsetDateTime,
) -> Result<ExecutionEvent> {
    let payload_json = canonical_json(&payload)?;
    let next: i64 = sqlx::query_scalar(
        "SELECT COALESCE(MAX(sequence) + 1, 0) FROM m3rs_execution_events WHERE execution_id = ?",
    )
    .bind(execution_id)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| storage("could not read the event sequence", e))?;
    let done = sqlx::query(
        "INSERT INTO m3rs_execution_events(execution_id, sequence, kind, payload_json, created_at)
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(execution_id)
    .bind(next)
    .bind(kind)
    .bind(&payload_json)
    .bind(timestamp::format(now))
    .execute(&mut *conn)
    .await
    .map_err(|e| storage("could not append the event", e))?;
    if done.rows_affected() != 1 {
        return Err(
            Error::storage("event append did not insert exactly one row")
                .with_detail("execution_id", execution_id),
        );
    }
    let row = sqlx::query(
        "SELECT execution_id, sequence, kind, payload_json, created_at
         FROM m3rs_execution_events WHERE execution_id = ? AND sequence = ?",
    )
    .bind(execution_id)
    .bind(next)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| storage("could not read the appended event", e))?;
    event_from_row(&row)
}

/// True if `table` exists in the database (without creating anything).
pub(crate) async fn table_exists(conn: &mut SqliteConnection, table: &str) -> Result<bool> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
            .bind(table)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| storage("could not inspect the schema", e))?;
    Ok(found.is_some())
}
