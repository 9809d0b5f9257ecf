//! The change feed on PostgreSQL: records are appended unnumbered to `m3rs_change_inbox` in
//! the writer's statement (a round's by the store's own `WITH`, see [`RoundAppend`]; an
//! execution's by row triggers), moved into `m3rs_changes` and numbered in commit order by
//! the reader that comes next (migrations `0005_change_feed_numbered_by_readers.sql` and
//! `0006_change_inbox.sql` say why), read by cursor and pruned here.

use m3_store::changes::rules::{check_after, check_limit, round_change};
use m3_store::changes::{ChangePage, FeedBounds, PruneChanges, Pruned};
use m3_types::{
    ChangeRecord, ChangeRecordKind, Cursor, Error, ExecutionChangeState, ManagedInputRecord,
    Reason, Result, RoundChangeState,
};
use sqlx::{PgPool, Row};
use time::OffsetDateTime;

use super::error::db;

const SELECT_BOUNDS: &str = "SELECT (SELECT max(cursor) FROM m3rs_changes),
    (SELECT pruned_through FROM m3rs_change_horizon WHERE id = 1)";

const SELECT_PAGE: &str = "SELECT cursor, kind, execution_id, round_id, at, actor, state_json
    FROM m3rs_changes WHERE cursor > $1 ORDER BY cursor LIMIT $2";

/// The record a write of a round appends, as its statement binds it (see
/// [`round_change`]): kind and redacted state, both `None` when the write appends none (a
/// lease renewal, a claim). The statement inserts it into `m3rs_change_inbox` only when it
/// wrote the round (`... FROM written WHERE kind IS NOT NULL`).
#[derive(Debug)]
pub(crate) struct RoundAppend {
    pub(crate) kind: Option<&'static str>,
    pub(crate) state_json: Option<String>,
}

impl RoundAppend {
    /// What writing `after` over `before` (`None`: a new round) appends.
    ///
    /// # Errors
    /// `storage_error` if the state cannot be encoded (it is plain data: never expected).
    pub(crate) fn of(
        before: Option<&ManagedInputRecord>,
        after: &ManagedInputRecord,
    ) -> Result<Self> {
        let none = Self {
            kind: None,
            state_json: None,
        };
        let Some(change) = round_change(before, after) else {
            return Ok(none);
        };
        let Some(state) = change.round else {
            return Ok(none);
        };
        let state_json = serde_json::to_string(&state).map_err(|error| {
            Error::storage(format!("cannot encode the round's change record: {error}"))
        })?;
        Ok(Self {
            kind: Some(change.kind.as_str()),
            state_json: Some(state_json),
        })
    }
}

/// Numbers every committed record that has no cursor yet, in a durable transaction of
/// its own (a no-op when there is none); returns how many it numbered.
async fn number(pool: &PgPool) -> Result<i64> {
    sqlx::query_scalar("SELECT m3rs_number_changes()")
        .fetch_one(pool)
        .await
        .map_err(db("cannot number the change feed's new records"))
}

/// The newest cursor given (after numbering what was committed), or the prune horizon.
///
/// # Errors
/// `storage_error` if the feed cannot be read.
pub(crate) async fn newest(pool: &PgPool) -> Result<Cursor> {
    number(pool).await?;
    let newest: Option<i64> = sqlx::query_scalar(
        "SELECT greatest((SELECT max(cursor) FROM m3rs_changes),
            (SELECT pruned_through FROM m3rs_change_horizon WHERE id = 1))",
    )
    .fetch_one(pool)
    .await
    .map_err(db("cannot read the change feed"))?;
    Cursor::from_i64(newest.unwrap_or(0))
}

/// Up to `limit` records after `after`: numbers what was committed since the last reader,
/// then reads from one snapshot (`REPEATABLE READ`, read only), so the bounds and the page
/// agree.
///
/// # Errors
/// See [`ExecutionStore::read_changes`](m3_store::ExecutionStore::read_changes).
pub(crate) async fn read(pool: &PgPool, after: Cursor, limit: usize) -> Result<ChangePage> {
    check_limit(limit)?;
    number(pool).await?;
    let mut tx = pool
        .begin()
        .await
        .map_err(db("cannot read the change feed"))?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(db("cannot read the change feed"))?;
    let bounds = sqlx::query(SELECT_BOUNDS)
        .fetch_one(&mut *tx)
        .await
        .map_err(db("cannot read the change feed"))?;
    let newest: Option<i64> = bounds
        .try_get(0)
        .map_err(db("cannot read the change feed"))?;
    let pruned: Option<i64> = bounds
        .try_get(1)
        .map_err(db("cannot read the change feed"))?;
    check_after(
        after,
        FeedBounds::new(
            Cursor::from_i64(pruned.unwrap_or(0))?,
            Cursor::from_i64(newest.unwrap_or(0))?,
        ),
    )?;
    let rows = sqlx::query(SELECT_PAGE)
        .bind(after.to_i64())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(db("cannot read the change feed"))?;
    tx.commit()
        .await
        .map_err(db("cannot read the change feed"))?;
    let records = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
    Ok(ChangePage::new(after, records))
}

/// One row as a record.
fn decode(row: &sqlx::postgres::PgRow) -> Result<ChangeRecord> {
    let read = db("cannot read the change feed");
    let cursor = Cursor::from_i64(row.try_get("cursor").map_err(&read)?)?;
    let invalid = |what: &str| {
        Error::storage(format!("change record {cursor} is invalid: {what}"))
            .with_reason(Reason::StoredRecordInvalid)
    };
    let kind: String = row.try_get("kind").map_err(&read)?;
    let kind: ChangeRecordKind = kind.parse().map_err(|_| invalid("unknown kind"))?;
    let at: OffsetDateTime = row.try_get("at").map_err(&read)?;
    let execution_id: String = row.try_get("execution_id").map_err(&read)?;
    let round_id: Option<String> = row.try_get("round_id").map_err(&read)?;
    let actor: Option<String> = row.try_get("actor").map_err(&read)?;
    let state: String = row.try_get("state_json").map_err(&read)?;
    let record = match round_id {
        Some(round_id) if kind == ChangeRecordKind::RoundDeadlineApproaching => {
            let (state, reminder) = m3_store::changes::rules::split_reminder_state(&state)
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

/// Removes (or counts) the oldest records up to the first that is not older than
/// `request.before`, and raises the horizon, in one transaction.
///
/// # Errors
/// `storage_error` if the feed cannot be pruned.
pub(crate) async fn prune(pool: &PgPool, request: PruneChanges) -> Result<Pruned> {
    let failed = db("cannot prune the change feed");
    // Retention decides on numbered records only; unnumbered ones are the newest anyway.
    number(pool).await?;
    let mut tx = pool.begin().await.map_err(&failed)?;
    let row = sqlx::query(
        "SELECT count(*), max(cursor) FROM m3rs_changes WHERE cursor < coalesce(
            (SELECT min(cursor) FROM m3rs_changes WHERE at >= $1),
            (SELECT max(cursor) + 1 FROM m3rs_changes))
         AND cursor IS NOT NULL",
    )
    .bind(request.before)
    .fetch_one(&mut *tx)
    .await
    .map_err(&failed)?;
    let count: i64 = row.try_get(0).map_err(&failed)?;
    let through: Option<i64> = row.try_get(1).map_err(&failed)?;
    let through = through.map(Cursor::from_i64).transpose()?;
    if let (Some(through), false) = (through, request.dry_run) {
        sqlx::query("DELETE FROM m3rs_changes WHERE cursor <= $1")
            .bind(through.to_i64())
            .execute(&mut *tx)
            .await
            .map_err(&failed)?;
        sqlx::query(
            "INSERT INTO m3rs_change_horizon (id, pruned_through) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE
             SET pruned_through = greatest(m3rs_change_horizon.pruned_through, excluded.pruned_through)",
        )
        .bind(through.to_i64())
        .execute(&mut *tx)
        .await
        .map_err(&failed)?;
    }
    tx.commit().await.map_err(&failed)?;
    Ok(Pruned::new(u64::try_from(count).unwrap_or(0), through))
}
