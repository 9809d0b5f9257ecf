//! Transaction building blocks of the SQLite execution store: fetching inside
//! a transaction, the lease fence, event appends and error diagnosis.

use m3_types::{Error, Result, canonical_json, timestamp};
use serde::Serialize;
use serde_json::Value;
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};
use time::OffsetDateTime;

use super::error;
use super::record::{ExecutionEvent, ExecutionLeaseRef, ExecutionRecord};
use super::rows::{event_from_row, execution_from_row, select_execution};
use crate::sqlite_pool::sqlx_error;

/// Opens a write transaction that holds SQLite's write lock from its start.
pub(crate) async fn begin(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>> {
    pool.begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| sqlx_error("could not begin a write transaction", e))
}

/// Commits `tx`.
pub(crate) async fn commit(tx: Transaction<'static, Sqlite>) -> Result<()> {
    tx.commit()
        .await
        .map_err(|e| sqlx_error("could not commit a write transaction", e))
}

/// Reads one execution on `conn` (inside or outside a transaction).
pub(crate) async fn fetch(
    conn: &mut SqliteConnection,
    execution_id: &str,
) -> Result<Option<ExecutionRecord>> {
    let row = sqlx::query(select_execution!("WHERE e.id = ?"))
        .bind(execution_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| sqlx_error("could not read the execution", e))?;
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

/// The fence of the module docs: `Some(lease)` must be the stored, live lease;
/// `None` requires that no lease exists at all.
pub(crate) fn check_fence(
    record: &ExecutionRecord,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Result<()> {
    let id = record.execution_id.as_str();
    match (lease, &record.lease) {
        (None, None) => Ok(()),
        (None, Some(stored)) if stored.is_expired_at(now) => Err(error::recovery_required(id)),
        (None, Some(_)) => Err(error::lease_required(id)),
        (Some(_), None) => Err(error::lease_not_held(id)),
        (Some(given), Some(stored)) => {
            if given.execution_id != stored.execution_id
                || given.owner_id != stored.owner_id
                || given.lease_token != stored.lease_token
            {
                Err(error::lease_not_held(id))
            } else if stored.is_expired_at(now) {
                Err(error::lease_expired(id))
            } else {
                Ok(())
            }
        }
    }
}

/// Explains why a guarded UPDATE touched no row, from a fresh read.
pub(crate) fn diagnose(
    record: Option<&ExecutionRecord>,
    execution_id: &str,
    lease: Option<&ExecutionLeaseRef>,
    now: OffsetDateTime,
) -> Error {
    match record {
        None => error::not_found(execution_id),
        Some(record) if record.is_finished() => error::finished(execution_id),
        Some(record) => match check_fence(record, lease, now) {
            Err(e) => e,
            Ok(()) => Error::managed_input_conflict("execution changed concurrently")
                .with_detail("execution_id", execution_id)
                .with_detail("reason", "concurrent_change"),
        },
    }
}

/// Canonical JSON text of any serializable value.
pub(crate) fn to_canonical<T: Serialize>(value: &T) -> Result<String> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::model_validation("execution data is not valid JSON").with_source(e))?;
    canonical_json(&value)
}

/// Canonical JSON text of an optional value (`None` stays SQL NULL).
pub(crate) fn to_canonical_opt<T: Serialize>(value: Option<&T>) -> Result<Option<String>> {
    value.map(to_canonical).transpose()
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
    .map_err(|e| sqlx_error("could not read the event sequence", e))?;
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
    .map_err(|e| sqlx_error("could not append the event", e))?;
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
    .map_err(|e| sqlx_error("could not read the appended event", e))?;
    event_from_row(&row)
}

/// True if `table` exists in the database (without creating anything).
pub(crate) async fn table_exists(conn: &mut SqliteConnection, table: &str) -> Result<bool> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
            .bind(table)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| sqlx_error("could not inspect the schema", e))?;
    Ok(found.is_some())
}
