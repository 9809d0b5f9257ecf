//! Encoding records into the Python original's columns and decoding rows back.
//!
//! Decoding is strict, like the original: every JSON column must hold an object, the status
//! must be one of the six strings, timestamps must parse, and the assembled record must pass
//! the record invariants. Anything else is `managed_input_invalid`
//! ("stored managed-input record is invalid").

use m3_types::{ManagedInputLease, ManagedInputRecord, Result};
use serde_json::{Map, Value};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use time::OffsetDateTime;

pub(crate) use crate::managed_input::rules::stored_invalid;

/// Stored timestamp text: fixed-width UTC with microseconds (`2026-11-29T17:40:10.123456+00:00`),
/// so SQL string comparison equals time order (also against the Python original's shorter
/// form without microseconds).
pub(crate) fn timestamp_text(value: OffsetDateTime) -> String {
    m3_types::timestamp::format(value)
}

fn text(row: &SqliteRow, column: &str) -> Result<String> {
    row.try_get::<String, _>(column)
        .map_err(|e| stored_invalid(format!("column {column}: {e}")))
}

fn optional_text(row: &SqliteRow, column: &str) -> Result<Option<String>> {
    row.try_get::<Option<String>, _>(column)
        .map_err(|e| stored_invalid(format!("column {column}: {e}")))
}

fn timestamp(row: &SqliteRow, column: &str) -> Result<OffsetDateTime> {
    parse_timestamp(&text(row, column)?, column)
}

/// Optional timestamps: NULL and the empty string both mean "not set", as in the original.
fn optional_timestamp(row: &SqliteRow, column: &str) -> Result<Option<OffsetDateTime>> {
    match optional_text(row, column)? {
        Some(text) if !text.is_empty() => parse_timestamp(&text, column).map(Some),
        _ => Ok(None),
    }
}

fn parse_timestamp(text: &str, column: &str) -> Result<OffsetDateTime> {
    m3_types::timestamp::parse(text).map_err(|e| stored_invalid(format!("column {column}: {e}")))
}

fn count(row: &SqliteRow, column: &str) -> Result<u32> {
    let value = row
        .try_get::<i64, _>(column)
        .map_err(|e| stored_invalid(format!("column {column}: {e}")))?;
    u32::try_from(value)
        .map_err(|_| stored_invalid(format!("column {column}: {value} is out of range")))
}

/// A JSON column that must hold an object, parsed straight into `T` (no `Value` tree). The
/// object check comes first: serde would also read a struct from a JSON array.
fn json_object<T: serde::de::DeserializeOwned>(row: &SqliteRow, column: &str) -> Result<T> {
    parse_object(&text(row, column)?, column)
}

fn optional_json_object<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    column: &str,
) -> Result<Option<T>> {
    optional_text(row, column)?
        .map(|raw| parse_object(&raw, column))
        .transpose()
}

fn parse_object<T: serde::de::DeserializeOwned>(raw: &str, column: &str) -> Result<T> {
    if !raw.trim_start().starts_with('{') {
        return Err(stored_invalid(format!(
            "column {column} must hold a JSON object"
        )));
    }
    serde_json::from_str(raw).map_err(|e| stored_invalid(format!("column {column}: {e}")))
}

/// Decodes one row selected with `record_columns!()` (see `columns`) into a validated record: the same
/// strict rules as the original's model validation, read straight from the columns.
pub(crate) fn decode_record(row: &SqliteRow) -> Result<ManagedInputRecord> {
    let status = text(row, "status")?;
    let record = ManagedInputRecord {
        pending: json_object(row, "pending_json")?,
        round_index: count(row, "round_index")?,
        round_limit: count(row, "round_limit")?,
        status: status
            .parse()
            .map_err(|e| stored_invalid(format!("column status: {e}")))?,
        lease: ManagedInputLease {
            owner_id: text(row, "owner_id")?,
            lease_token: text(row, "lease_token")?,
            expires_at: timestamp(row, "lease_expires_at")?,
        },
        responses: optional_json_object(row, "responses_json")?,
        response_idempotency_key: optional_text(row, "response_idempotency_key")?,
        harness_session_id: optional_text(row, "harness_session_id")?,
        native_resume_token: optional_text(row, "native_resume_token")?,
        delivery_idempotency_key: optional_text(row, "delivery_idempotency_key")?,
        session_id: optional_text(row, "session_id")?,
        turn_id: optional_text(row, "turn_id")?,
        operation_parameters: json_object::<Map<String, Value>>(row, "operation_parameters_json")?,
        delivery_attempts: count(row, "delivery_attempts")?,
        created_at: timestamp(row, "created_at")?,
        updated_at: timestamp(row, "updated_at")?,
        response_validated_at: optional_timestamp(row, "response_validated_at")?,
        delivery_started_at: optional_timestamp(row, "delivery_started_at")?,
        delivered_at: optional_timestamp(row, "delivered_at")?,
        resolved_at: optional_timestamp(row, "resolved_at")?,
        failed_at: optional_timestamp(row, "failed_at")?,
        failure_code: optional_text(row, "failure_code")?,
        failure_message: optional_text(row, "failure_message")?,
    };
    record
        .validate()
        .map_err(|e| stored_invalid(e.to_string()))?;
    // The row's key columns must agree with the pending round they hold.
    let execution_id = text(row, "execution_id")?;
    let round_id = text(row, "round_id")?;
    if record.pending.execution_id != execution_id || record.pending.round_id != round_id {
        return Err(stored_invalid(
            "pending round identity differs from its row key",
        ));
    }
    Ok(record)
}
