//! The change feed on SQLite: the `m3rs_changes` table, filled by triggers, read by cursor.
//!
//! The database appends the records itself: triggers on the rounds and executions tables
//! insert one row per state change, inside the statement that made the change. So a
//! change and its record commit or roll back together whoever wrote them (this crate, or
//! the Python original on a shared file), and no write path can forget one. SQLite has one
//! writer at a time, so `AUTOINCREMENT` rowids grow in commit order and are never reused,
//! even after a prune removes the newest rows: `cursor > last` is an exact resume.
//!
//! The triggers derive the records exactly as [`crate::changes::rules`] does for the other
//! backends (a conformance case compares them with the memory backend).

use m3_types::{
    ChangeRecord, ChangeRecordKind, Cursor, Error, ExecutionChangeState, Reason, Result,
    RoundChangeState,
};
use sqlx::{Row, SqliteConnection, SqlitePool};

use super::error::storage;
use crate::changes::rules::{check_after, check_limit};
use crate::changes::{ChangePage, FeedBounds, PruneChanges, Pruned};

/// The statuses a record reports (a damaged row's unknown status appends nothing).
macro_rules! round_statuses {
    () => {
        "('pending', 'response_validated', 'delivery_started', 'delivered', 'resolved', 'failed')"
    };
}

/// The `INSERT` of a round's record, from `NEW`.
macro_rules! round_insert {
    () => {
        "INSERT INTO m3rs_changes(kind, execution_id, round_id, at, state_json) VALUES (
            CASE NEW.status WHEN 'pending' THEN 'round.pending'
                WHEN 'response_validated' THEN 'round.answered'
                WHEN 'delivery_started' THEN 'round.delivery_started'
                WHEN 'delivered' THEN 'round.delivered'
                WHEN 'resolved' THEN 'round.resolved'
                ELSE 'round.failed' END,
            NEW.execution_id, NEW.round_id, NEW.updated_at,
            json_object('round_index', NEW.round_index, 'status', NEW.status,
                'server', coalesce(CASE WHEN json_valid(NEW.pending_json)
                    THEN json_extract(NEW.pending_json, '$.server') END, ''),
                'operation_kind', CASE WHEN json_valid(NEW.pending_json)
                    AND json_extract(NEW.pending_json, '$.operation_kind')
                        IN ('tool', 'prompt', 'resource')
                    THEN json_extract(NEW.pending_json, '$.operation_kind') END,
                'operation_name', coalesce(CASE WHEN json_valid(NEW.pending_json)
                    THEN json_extract(NEW.pending_json, '$.operation_name') END, ''),
                'failure_code', NEW.failure_code));"
    };
}

/// The `INSERT` of an execution's records, comparing `NEW` with `$old` (`OLD`, or `NULL`
/// on creation, where every `$old.column` reads as NULL).
macro_rules! execution_insert {
    ("NULL") => {
        execution_insert!(@ "NULL", "NULL", "NULL")
    };
    ("OLD") => {
        execution_insert!(@ "OLD.cancel_requested_at", "OLD.lease_token", "OLD.lifecycle")
    };
    (@ $cancel:literal, $token:literal, $lifecycle:literal) => {
        concat!(
            "INSERT INTO m3rs_changes(kind, execution_id, round_id, at, state_json)
            SELECT kind, NEW.id, NULL, NEW.updated_at,
                json_object('lifecycle', NEW.lifecycle, 'outcome', NEW.outcome)
            FROM (
                SELECT 1 AS step, 'execution.cancel_requested' AS kind
                    WHERE NEW.cancel_requested_at IS NOT NULL AND ", $cancel, " IS NULL
                UNION ALL SELECT 2, 'execution.claimed'
                    WHERE NEW.lease_token IS NOT NULL AND NEW.lease_token IS NOT ", $token, "
                UNION ALL SELECT 3, CASE NEW.lifecycle WHEN 'queued' THEN 'execution.queued'
                        WHEN 'waiting_for_input' THEN 'execution.waiting_for_input'
                        ELSE 'execution.finished' END
                    WHERE NEW.lifecycle IS NOT ", $lifecycle, "
                        AND NEW.lifecycle IN ('queued', 'waiting_for_input', 'finished')
            ) ORDER BY step;"
        )
    };
}

/// The feed's tables: the records, the newest cursor retention removed, and who answered
/// each answered round (written with the answer by [`super::write`]; the Python original
/// never reads it, and its own answers leave no row).
pub(crate) const FEED_TABLES: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS m3rs_changes (
        cursor INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        execution_id TEXT NOT NULL,
        round_id TEXT,
        at TEXT NOT NULL,
        actor TEXT,
        state_json TEXT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS m3rs_change_horizon (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        pruned_through INTEGER NOT NULL CHECK (pruned_through >= 0)
    )",
    "CREATE TABLE IF NOT EXISTS m3rs_round_answers (
        execution_id TEXT NOT NULL,
        round_id TEXT NOT NULL,
        actor_json TEXT,
        PRIMARY KEY (execution_id, round_id)
    )",
];

/// The rounds table's triggers: a new round, and each change of status. The state comes
/// from the row's columns and its pending round (`server`, `operation_kind`,
/// `operation_name`); never from the responses.
pub(crate) const ROUND_TRIGGERS: [&str; 2] = [
    concat!(
        "CREATE TRIGGER IF NOT EXISTS m3rs_changes_round_created
        AFTER INSERT ON m3_managed_input_rounds
        WHEN NEW.status IN ",
        round_statuses!(),
        " BEGIN ",
        round_insert!(),
        " END"
    ),
    concat!(
        "CREATE TRIGGER IF NOT EXISTS m3rs_changes_round_status
        AFTER UPDATE OF status ON m3_managed_input_rounds
        WHEN NEW.status IS NOT OLD.status AND NEW.status IN ",
        round_statuses!(),
        " BEGIN ",
        round_insert!(),
        " END"
    ),
];

/// The executions table's triggers: creation, and each change of the lifecycle, the lease
/// token or the cancel time (a lease renewal changes none of them and appends nothing).
/// One `INSERT ... SELECT ... ORDER BY` per event, so the records of one change come in
/// the order of [`execution_changes`](crate::changes::rules::execution_changes).
pub(crate) const EXECUTION_TRIGGERS: [&str; 2] = [
    concat!(
        "CREATE TRIGGER IF NOT EXISTS m3rs_changes_execution_created
        AFTER INSERT ON m3rs_executions BEGIN ",
        execution_insert!("NULL"),
        " END"
    ),
    concat!(
        "CREATE TRIGGER IF NOT EXISTS m3rs_changes_execution_updated
        AFTER UPDATE OF lifecycle, lease_token, cancel_requested_at ON m3rs_executions BEGIN ",
        execution_insert!("OLD"),
        " END"
    ),
];

/// Every feed object's name (the tables and the four triggers), for the schema checks.
pub(crate) const FEED_OBJECTS: [&str; 7] = [
    "m3rs_changes",
    "m3rs_change_horizon",
    "m3rs_changes_round_created",
    "m3rs_changes_round_status",
    "m3rs_changes_execution_created",
    "m3rs_changes_execution_updated",
    "m3rs_round_answers",
];

/// Creates the feed's tables and `triggers`, in the caller's write transaction.
///
/// # Errors
/// `storage_error` if a statement fails.
pub(crate) async fn initialize(
    conn: &mut SqliteConnection,
    triggers: &[&'static str],
) -> Result<()> {
    for statement in FEED_TABLES.iter().chain(triggers) {
        sqlx::query(*statement)
            .execute(&mut *conn)
            .await
            .map_err(|e| storage("cannot create the change feed", e))?;
    }
    Ok(())
}

/// How many of `names` exist (tables, triggers, indexes), for the schema checks.
///
/// # Errors
/// `storage_error` if the catalog cannot be read.
pub(crate) async fn count_objects(conn: &mut SqliteConnection, names: &[&str]) -> Result<usize> {
    let mut found = 0;
    for name in names {
        let present: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name = ?")
            .bind(*name)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| storage("cannot read the schema", e))?;
        found += usize::from(present > 0);
    }
    Ok(found)
}

const SELECT_BOUNDS: &str = "SELECT
    (SELECT seq FROM sqlite_sequence WHERE name = 'm3rs_changes'),
    (SELECT pruned_through FROM m3rs_change_horizon WHERE id = 1)";

const SELECT_PAGE: &str = "SELECT cursor, kind, execution_id, round_id, at, actor, state_json
    FROM m3rs_changes WHERE cursor > ? ORDER BY cursor LIMIT ?";

/// Up to `limit` records after `after`, read in one read transaction.
///
/// # Errors
/// See [`ExecutionStore::read_changes`](crate::ExecutionStore::read_changes).
pub(crate) async fn read(pool: &SqlitePool, after: Cursor, limit: usize) -> Result<ChangePage> {
    check_limit(limit)?;
    let unreadable = |e| storage("cannot read the change feed", e);
    let mut tx = pool.begin().await.map_err(unreadable)?;
    let bounds = bounds(&mut tx).await?;
    check_after(after, bounds)?;
    let rows = sqlx::query(SELECT_PAGE)
        .bind(after.to_i64())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(unreadable)?;
    tx.commit().await.map_err(unreadable)?;
    let records = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
    Ok(ChangePage::new(after, records))
}

async fn bounds(conn: &mut SqliteConnection) -> Result<FeedBounds> {
    let row = sqlx::query(SELECT_BOUNDS)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| storage("cannot read the change feed", e))?;
    let newest: Option<i64> = row
        .try_get(0)
        .map_err(|e| storage("cannot read the change feed", e))?;
    let pruned: Option<i64> = row
        .try_get(1)
        .map_err(|e| storage("cannot read the change feed", e))?;
    Ok(FeedBounds::new(
        Cursor::from_i64(pruned.unwrap_or(0))?,
        Cursor::from_i64(newest.unwrap_or(0))?,
    ))
}

/// One row as a record.
fn decode(row: &sqlx::sqlite::SqliteRow) -> Result<ChangeRecord> {
    let read = |e| storage("cannot read the change feed", e);
    let cursor = Cursor::from_i64(row.try_get("cursor").map_err(read)?)?;
    let invalid = |what: &str| {
        Error::storage(format!("change record {cursor} is invalid: {what}"))
            .with_reason(Reason::StoredRecordInvalid)
    };
    let kind: String = row.try_get("kind").map_err(read)?;
    let kind: ChangeRecordKind = kind.parse().map_err(|_| invalid("unknown kind"))?;
    let at: String = row.try_get("at").map_err(read)?;
    let at = m3_types::timestamp::parse(&at).map_err(|_| invalid("bad time"))?;
    let execution_id: String = row.try_get("execution_id").map_err(read)?;
    let round_id: Option<String> = row.try_get("round_id").map_err(read)?;
    let actor: Option<String> = row.try_get("actor").map_err(read)?;
    let state: String = row.try_get("state_json").map_err(read)?;
    let record = match round_id {
        Some(round_id) if kind == ChangeRecordKind::RoundDeadlineApproaching => {
            let (state, reminder) = crate::changes::rules::split_reminder_state(&state)
                .ok_or_else(|| invalid("bad reminder"))?;
            ChangeRecord::of_reminder(cursor, execution_id, round_id, at, state, reminder)
        }
        Some(round_id) if kind.is_round() => {
            let state: RoundChangeState =
                serde_json::from_str(&state).map_err(|_| invalid("bad round state"))?;
            ChangeRecord::of_round(cursor, execution_id, round_id, at, state)
        }
        None if !kind.is_round() => {
            let state: ExecutionChangeState =
                serde_json::from_str(&state).map_err(|_| invalid("bad execution state"))?;
            ChangeRecord::of_execution(cursor, kind, execution_id, at, state)
        }
        _ => return Err(invalid("round id does not fit the kind")),
    };
    let actor = actor
        .as_deref()
        .map(m3_types::Actor::from_json_text)
        .transpose()
        .map_err(|_| invalid("bad actor"))?;
    Ok(record.with_actor(actor))
}

/// Removes (or counts) the records older than `request.before`: the oldest records up to
/// the first that is not, so what is kept is always every record after one cursor.
///
/// # Errors
/// `storage_error` if the feed cannot be pruned.
pub(crate) async fn prune(conn: &mut SqliteConnection, request: PruneChanges) -> Result<Pruned> {
    let failed = |e| storage("cannot prune the change feed", e);
    let before = m3_types::timestamp::format(request.before);
    // The first record that stays; everything before it goes.
    let row = sqlx::query(
        "SELECT count(*), max(cursor) FROM m3rs_changes WHERE cursor < coalesce(
            (SELECT min(cursor) FROM m3rs_changes WHERE julianday(at) >= julianday(?)),
            (SELECT max(cursor) + 1 FROM m3rs_changes))",
    )
    .bind(&before)
    .fetch_one(&mut *conn)
    .await
    .map_err(failed)?;
    let count: i64 = row.try_get(0).map_err(failed)?;
    let through: Option<i64> = row.try_get(1).map_err(failed)?;
    let through = through.map(Cursor::from_i64).transpose()?;
    if let (Some(through), false) = (through, request.dry_run) {
        sqlx::query("DELETE FROM m3rs_changes WHERE cursor <= ?")
            .bind(through.to_i64())
            .execute(&mut *conn)
            .await
            .map_err(failed)?;
        sqlx::query(
            "INSERT INTO m3rs_change_horizon(id, pruned_through) VALUES (1, ?)
             ON CONFLICT(id) DO UPDATE SET pruned_through = max(pruned_through, excluded.pruned_through)",
        )
        .bind(through.to_i64())
        .execute(&mut *conn)
        .await
        .map_err(failed)?;
    }
    Ok(Pruned::new(u64::try_from(count).unwrap_or(0), through))
}
