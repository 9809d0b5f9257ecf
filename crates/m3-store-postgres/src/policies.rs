//! Policies and deadline reminders on PostgreSQL (migration `0010_policies.sql`).
//! [`PgPolicyRows`]: one row per policy in `m3rs_policies`;
//! [`RowPolicyStore`](m3_store::policies::RowPolicyStore) makes every decision.
//! [`remind`]: one statement inserts the (round, fraction) row of `m3rs_round_reminders`
//! and, only when it is new and the round still pending, appends the record to the feed's
//! inbox.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::policies::PolicyRows;
use m3_types::{ChangeRecord, Clock, Result};
use sqlx::PgPool;

use super::error::db;

/// Policy rows in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub(crate) struct PgPolicyRows {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl PgPolicyRows {
    pub(crate) fn new(pool: PgPool, clock: Arc<dyn Clock>) -> Self {
        Self { pool, clock }
    }
}

#[async_trait]
impl PolicyRows for PgPolicyRows {
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    async fn insert_policy(&self, name: &str, text: &str) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO m3rs_policies (name, record_json) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(db("cannot add the policy"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn all_policies(&self) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT record_json FROM m3rs_policies ORDER BY seq")
            .fetch_all(&self.pool)
            .await
            .map_err(db("cannot read the policies"))
    }

    async fn delete_policy(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM m3rs_policies WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db("cannot remove the policy"))?;
        Ok(done.rows_affected() == 1)
    }
}

/// The reminder's row and its record in one statement (the record only with a new row of a
/// pending round).
const REMIND: &str = "WITH added AS (
        INSERT INTO m3rs_round_reminders (execution_id, round_id, fraction)
        SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM m3rs_rounds
            WHERE execution_id = $1 AND round_id = $2 AND status = 'pending')
        ON CONFLICT DO NOTHING RETURNING 1),
    appended AS (
        INSERT INTO m3rs_change_inbox (kind, execution_id, round_id, at, state_json)
        SELECT $4, $1, $2, $5, $6 FROM added RETURNING 1)
    SELECT count(*) FROM appended";

/// Appends the reminder `record` (a `round.deadline_approaching` record) once per round and
/// fraction; whether it did.
///
/// # Errors
/// `storage_error` if the statement fails.
pub(crate) async fn remind(pool: &PgPool, record: &ChangeRecord) -> Result<bool> {
    let (Some(round_id), Some(reminder), Some(state)) =
        (&record.round_id, record.reminder, &record.round)
    else {
        return Ok(false);
    };
    let state = m3_store::changes::rules::reminder_state_text(state, reminder)?;
    let appended: i64 = sqlx::query_scalar(REMIND)
        .bind(&record.execution_id)
        .bind(round_id)
        .bind(reminder.fraction_key())
        .bind(record.kind.as_str())
        .bind(record.at)
        .bind(state)
        .fetch_one(pool)
        .await
        .map_err(db("cannot append a deadline reminder"))?;
    Ok(appended == 1)
}
