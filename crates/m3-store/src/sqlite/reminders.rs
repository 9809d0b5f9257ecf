//! Deadline reminders on SQLite: `m3rs_round_reminders` keeps one row per (round,
//! fraction) reminded, and the `round.deadline_approaching` record is appended in the same
//! write transaction as that row, only when the row is new and the round still pending. So
//! a retried or concurrent reminder never appends twice. The table is made on first use.

use m3_types::{ChangeRecord, Result};
use sqlx::SqliteConnection;

use super::error::storage;
use crate::changes::rules::reminder_state_text;

/// The table, made if missing.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS m3rs_round_reminders (
    execution_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    fraction TEXT NOT NULL,
    PRIMARY KEY (execution_id, round_id, fraction)
)";

/// Makes the table if it is missing.
///
/// # Errors
/// `storage_error` if it cannot be made.
pub(crate) async fn create_table(conn: &mut SqliteConnection) -> Result<()> {
    sqlx::query(TABLE)
        .execute(&mut *conn)
        .await
        .map(|_| ())
        .map_err(|e| storage("cannot create the reminder table", e))
}

/// Records that `record` (a `round.deadline_approaching` record) was appended, and appends
/// it, in the caller's write transaction: nothing when the round is not pending or already
/// had this reminder. Returns whether it appended.
///
/// # Errors
/// `storage_error` if a statement fails.
pub(crate) async fn remind(conn: &mut SqliteConnection, record: &ChangeRecord) -> Result<bool> {
    let failed = |e| storage("cannot append a deadline reminder", e);
    let (Some(round_id), Some(reminder), Some(state)) =
        (&record.round_id, record.reminder, &record.round)
    else {
        return Ok(false);
    };
    create_table(conn).await?;
    let inserted = sqlx::query(
        "INSERT INTO m3rs_round_reminders (execution_id, round_id, fraction)
         SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM m3_managed_input_rounds
             WHERE execution_id = ?1 AND round_id = ?2 AND status = 'pending')
         ON CONFLICT DO NOTHING",
    )
    .bind(&record.execution_id)
    .bind(round_id)
    .bind(reminder.fraction_key())
    .execute(&mut *conn)
    .await
    .map_err(failed)?;
    if inserted.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO m3rs_changes(kind, execution_id, round_id, at, state_json) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(record.kind.as_str())
    .bind(&record.execution_id)
    .bind(round_id)
    .bind(m3_types::timestamp::format(record.at))
    .bind(reminder_state_text(state, reminder)?)
    .execute(&mut *conn)
    .await
    .map_err(failed)?;
    Ok(true)
}
