//! Transaction building blocks of the SQLite execution store: reading an execution inside
//! a transaction, and writing what the shared steps changed.

use m3_types::{Result, canonical_json, timestamp};
use sqlx::SqliteConnection;

use super::rows::{execution_from_row, select_execution};
use crate::execution::record::{ExecutionEvent, ExecutionRecord};
use crate::execution::rules::errors as error;
use crate::execution::rules::{StagedWrite, to_canonical_opt};
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

/// Writes the mutable columns of `record` over its row (inside the write transaction that
/// read it, so nothing changed it since). A lease token another execution holds is
/// `lease_token_in_use`.
async fn save(conn: &mut SqliteConnection, record: &ExecutionRecord) -> Result<()> {
    let id = record.execution_id.as_str();
    let lease = record.lease.as_ref();
    let done = sqlx::query(
        "UPDATE m3rs_executions
         SET lifecycle = ?, outcome = ?, error_json = ?, result_json = ?, finished_at = ?,
             updated_at = ?, lease_owner_id = ?, lease_token = ?, lease_expires_at = ?,
             cancel_requested_at = ?, cancel_reason = ?
         WHERE id = ?",
    )
    .bind(record.lifecycle.as_str())
    .bind(record.outcome.map(|o| o.as_str()))
    .bind(to_canonical_opt(record.error.as_ref())?)
    .bind(to_canonical_opt(record.result.as_ref())?)
    .bind(record.finished_at.map(timestamp::format))
    .bind(timestamp::format(record.updated_at))
    .bind(lease.map(|l| l.owner_id.as_str()))
    .bind(lease.map(|l| l.lease_token.as_str()))
    .bind(lease.map(|l| timestamp::format(l.expires_at)))
    .bind(record.cancel_requested_at.map(timestamp::format))
    .bind(record.cancel_reason.as_deref())
    .bind(id)
    .execute(&mut *conn)
    .await
    .map_err(|e| match e.as_database_error().map(|d| d.kind()) {
        Some(sqlx::error::ErrorKind::UniqueViolation) => error::lease_token_in_use(id),
        _ => storage("could not write the execution", e),
    })?;
    if done.rows_affected() != 1 {
        return Err(error::concurrent_change(id));
    }
    Ok(())
}

/// Inserts one event (its sequence number was decided under the write lock).
pub(crate) async fn insert_event(
    conn: &mut SqliteConnection,
    event: &ExecutionEvent,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO m3rs_execution_events(execution_id, sequence, kind, payload_json, created_at)
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&event.execution_id)
    .bind(i64::try_from(event.sequence).unwrap_or(i64::MAX))
    .bind(&event.kind)
    .bind(canonical_json(&event.payload)?)
    .bind(timestamp::format(event.timestamp))
    .execute(&mut *conn)
    .await
    .map_err(|e| storage("could not append the event", e))?;
    Ok(())
}

/// Writes what the steps did to `staged`: the record, if they changed it, and the events
/// they appended.
pub(crate) async fn store(conn: &mut SqliteConnection, staged: &StagedWrite) -> Result<()> {
    if staged.is_changed() {
        save(conn, &staged.record).await?;
    }
    for event in staged.events() {
        insert_event(conn, event).await?;
    }
    Ok(())
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
