//! Decoding execution and event rows, and the shared SELECT list.

use m3_types::{Result, timestamp};
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use time::OffsetDateTime;

use crate::execution::record::{ExecutionEvent, ExecutionLease, ExecutionRecord};
use crate::execution::rules::errors::corrupt;

/// `SELECT <every execution column> FROM m3rs_executions e ` followed by the
/// given tail (a `WHERE`/`ORDER BY` clause), as a `&'static str`.
macro_rules! select_execution {
    ($tail:literal) => {
        concat!(
            "SELECT e.id, e.spec_json, e.human_input, e.lifecycle, e.outcome, e.error_json, ",
            "e.result_json, e.created_at, e.updated_at, e.finished_at, e.lease_owner_id, ",
            "e.lease_token, e.lease_expires_at, e.cancel_requested_at, e.cancel_reason, ",
            "COALESCE((SELECT MAX(v.sequence) FROM m3rs_execution_events v ",
            "WHERE v.execution_id = e.id), 0) AS last_sequence ",
            "FROM m3rs_executions e ",
            $tail
        )
    };
}
pub(crate) use select_execution;

fn text(row: &SqliteRow, id: &str, column: &'static str) -> Result<String> {
    row.try_get::<String, _>(column)
        .map_err(|e| corrupt(id, column).with_source(e))
}

fn opt_text(row: &SqliteRow, id: &str, column: &'static str) -> Result<Option<String>> {
    row.try_get::<Option<String>, _>(column)
        .map_err(|e| corrupt(id, column).with_source(e))
}

fn time_of(raw: &str, id: &str, column: &'static str) -> Result<OffsetDateTime> {
    timestamp::parse(raw).map_err(|e| corrupt(id, column).with_source(e))
}

fn opt_time(row: &SqliteRow, id: &str, column: &'static str) -> Result<Option<OffsetDateTime>> {
    opt_text(row, id, column)?
        .map(|raw| time_of(&raw, id, column))
        .transpose()
}

fn json_of<T: DeserializeOwned>(raw: &str, id: &str, column: &'static str) -> Result<T> {
    serde_json::from_str(raw).map_err(|e| corrupt(id, column).with_source(e))
}

fn parse_enum<T: std::str::FromStr>(raw: &str, id: &str, column: &'static str) -> Result<T> {
    raw.parse::<T>().map_err(|_| corrupt(id, column))
}

/// Decodes a row selected with [`select_execution!`].
pub(crate) fn execution_from_row(row: &SqliteRow) -> Result<ExecutionRecord> {
    let id = row
        .try_get::<String, _>("id")
        .map_err(|e| corrupt("", "id").with_source(e))?;
    let id = id.as_str();
    let lease = match (
        opt_text(row, id, "lease_owner_id")?,
        opt_text(row, id, "lease_token")?,
        opt_text(row, id, "lease_expires_at")?,
    ) {
        (Some(owner_id), Some(lease_token), Some(expires_at)) => Some(ExecutionLease {
            execution_id: id.to_owned(),
            owner_id,
            lease_token,
            expires_at: time_of(&expires_at, id, "lease_expires_at")?,
        }),
        (None, None, None) => None,
        _ => return Err(corrupt(id, "lease")),
    };
    let sequence = row
        .try_get::<i64, _>("last_sequence")
        .map_err(|e| corrupt(id, "sequence").with_source(e))?;
    Ok(ExecutionRecord {
        execution_id: id.to_owned(),
        spec: json_of(&text(row, id, "spec_json")?, id, "spec_json")?,
        human_input: parse_enum(&text(row, id, "human_input")?, id, "human_input")?,
        lifecycle: parse_enum(&text(row, id, "lifecycle")?, id, "lifecycle")?,
        outcome: opt_text(row, id, "outcome")?
            .map(|raw| parse_enum(&raw, id, "outcome"))
            .transpose()?,
        error: opt_text(row, id, "error_json")?
            .map(|raw| json_of(&raw, id, "error_json"))
            .transpose()?,
        result: opt_text(row, id, "result_json")?
            .map(|raw| json_of(&raw, id, "result_json"))
            .transpose()?,
        sequence: u64::try_from(sequence).map_err(|_| corrupt(id, "sequence"))?,
        lease,
        cancel_requested_at: opt_time(row, id, "cancel_requested_at")?,
        cancel_reason: opt_text(row, id, "cancel_reason")?,
        created_at: time_of(&text(row, id, "created_at")?, id, "created_at")?,
        updated_at: time_of(&text(row, id, "updated_at")?, id, "updated_at")?,
        finished_at: opt_time(row, id, "finished_at")?,
    })
}

/// Decodes a row of `SELECT execution_id, sequence, kind, payload_json,
/// created_at FROM m3rs_execution_events`.
pub(crate) fn event_from_row(row: &SqliteRow) -> Result<ExecutionEvent> {
    let id = text(row, "", "execution_id")?;
    let sequence = row
        .try_get::<i64, _>("sequence")
        .map_err(|e| corrupt(&id, "sequence").with_source(e))?;
    Ok(ExecutionEvent {
        sequence: u64::try_from(sequence).map_err(|_| corrupt(&id, "sequence"))?,
        kind: text(row, &id, "kind")?,
        payload: json_of(&text(row, &id, "payload_json")?, &id, "payload_json")?,
        timestamp: time_of(&text(row, &id, "created_at")?, &id, "created_at")?,
        execution_id: id,
    })
}
