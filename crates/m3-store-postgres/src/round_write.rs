//! Writing a round's row: the guarded compare-and-set of its record (see
//! [`rounds`](super::rounds)'s module docs) with the change record it appends, the encoding
//! of records, and failing an execution's unresolved rounds inside recovery's transaction.

use m3_store::managed_input::rules::{self, apply_recovery_failure, stored_invalid};
use m3_types::{Error, ManagedInputRecord, Result};
use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;

use super::error::db;
use super::feed::RoundAppend;
use super::known_round::KnownRound;
use super::server_time::Window;

/// Decodes a stored record.
pub(super) fn decode(stored: &str) -> Result<ManagedInputRecord> {
    serde_json::from_str(stored).map_err(|e| stored_invalid(e.to_string()))
}

pub(super) fn encode(record: &ManagedInputRecord) -> Result<String> {
    serde_json::to_string(record)
        .map_err(|e| Error::storage(format!("cannot encode the managed-input record: {e}")))
}

/// Writes `record` (stored as `encoded`) over the row that held `previous`, with a new
/// redacted projection if given, in one statement, committed and pinned as `pinned` says.
/// Returns the server's time at the write, or `None` when the row no longer holds
/// `previous` (a concurrent writer came first) or the server's time is outside the pinned
/// window: nothing is overwritten then.
pub(super) async fn write_round<'e>(
    conn: impl PgExecutor<'e>,
    previous: Previous<'_>,
    record: &ManagedInputRecord,
    encoded: &str,
    redacted_json: Option<&str>,
    actor_json: Option<&str>,
    pinned: Pinned,
) -> Result<Option<OffsetDateTime>> {
    let append = RoundAppend::of(Some(previous.record), record)?;
    let statement = match pinned.wait {
        CommitWait::Flush => WRITE_ROUND,
        CommitWait::Skip => WRITE_ROUND_UNFLUSHED,
    };
    let (earliest, latest) = pinned.window.unzip();
    sqlx::query_scalar(statement)
        .bind(record.execution_id())
        .bind(record.round_id())
        .bind(record.status.as_str())
        .bind(encoded)
        .bind(redacted_json)
        .bind(record.lease.expires_at)
        .bind(record.updated_at)
        .bind(previous.stored)
        .bind(earliest)
        .bind(latest)
        .bind(append.kind)
        .bind(append.state_json)
        .bind(actor_json)
        .fetch_optional(conn)
        .await
        .map_err(db("cannot write the managed-input round"))
}

/// The record a round write replaces: as stored (the compare-and-set compares it) and decoded
/// (the change record is decided on its status).
#[derive(Debug, Clone, Copy)]
pub(super) struct Previous<'a> {
    pub(super) stored: &'a str,
    pub(super) record: &'a ManagedInputRecord,
}

impl<'a> Previous<'a> {
    pub(super) fn of(known: &'a KnownRound) -> Self {
        Self {
            stored: &known.stored,
            record: &known.record,
        }
    }
}

/// How a round write commits, and the server time it must happen in (if any).
#[derive(Debug, Clone, Copy)]
pub(super) struct Pinned {
    pub(super) wait: CommitWait,
    pub(super) window: Option<Window>,
}

/// Whether a round write's commit waits for its WAL flush.
#[derive(Debug, Clone, Copy)]
pub(super) enum CommitWait {
    /// As the server is configured (`synchronous_commit`).
    Flush,
    /// `synchronous_commit` off for this statement's own transaction: a server crash may
    /// lose the write, never a later flushed one (the WAL is flushed in order).
    Skip,
}

/// The guarded compare-and-set of a round's record (see the module docs), as the data-modifying
/// `WITH` named `written` that returns the server's time: `$9` and `$10`, when not null, are
/// the window the server's clock must be in, `$11` and `$12` the change record's kind and
/// state ([`RoundAppend`]), `$13` who answered (an accepted submission's actor, stored beside
/// its projection and on its `round.answered` record); `$condition` is a variant's extra
/// condition.
macro_rules! write_round_sql {
    ($condition:literal) => {
        concat!(
            "WITH written AS (UPDATE m3rs_rounds SET status = $3, record_json = $4, \
             redacted_responses_json = COALESCE($5, redacted_responses_json), \
             answered_by_json = COALESCE($13, answered_by_json), \
             lease_expires_at = $6, updated_at = $7 \
             WHERE execution_id = $1 AND round_id = $2 AND record_json = $8 \
             AND ($9::timestamptz IS NULL OR clock_timestamp() BETWEEN $9 AND $10::timestamptz)",
            $condition,
            " RETURNING clock_timestamp() AS server_now), ",
            // The change record, appended by the same statement only when the row was written.
            "appended AS (INSERT INTO m3rs_change_inbox (kind, execution_id, round_id, at, \
             actor, state_json) SELECT $11, $1, $2, $7, $13, $12 FROM written \
             WHERE $11::text IS NOT NULL) \
             SELECT server_now FROM written"
        )
    };
}

/// The compare-and-set, committed as the server is configured.
const WRITE_ROUND: &str = write_round_sql!("");

/// The compare-and-set whose autocommit transaction does not wait for the flush: the local
/// setting lasts until that transaction's commit, which reads it.
const WRITE_ROUND_UNFLUSHED: &str =
    write_round_sql!(" AND set_config('synchronous_commit', 'off', true) = 'off'");

/// [`write_round`] on a row the caller has locked: a change behind the lock is an error.
pub(super) async fn store_round(
    conn: &mut PgConnection,
    previous: Previous<'_>,
    record: &ManagedInputRecord,
    redacted_json: Option<&str>,
) -> Result<()> {
    let pinned = Pinned {
        wait: CommitWait::Flush,
        window: None,
    };
    let encoded = encode(record)?;
    if write_round(
        conn,
        previous,
        record,
        &encoded,
        redacted_json,
        None,
        pinned,
    )
    .await?
    .is_some()
    {
        Ok(())
    } else {
        Err(Error::storage(
            "the managed-input round changed under its row lock",
        ))
    }
}

/// Fails every unresolved, readable round of `execution_id` with `recovery_unavailable`
/// inside the caller's transaction (recovery of an execution is one atomic step).
pub(crate) async fn fail_unresolved(
    conn: &mut PgConnection,
    execution_id: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT record_json FROM m3rs_rounds WHERE execution_id = $1 ORDER BY round_index FOR UPDATE",
    )
    .bind(execution_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(db("cannot read the execution's rounds"))?;
    let mut failed = 0;
    for stored in rows {
        let Ok(record) = decode(&stored) else {
            continue;
        };
        if rules::UNRESOLVED.contains(&record.status) {
            let next = apply_recovery_failure(&record, message, now);
            let previous = Previous {
                stored: &stored,
                record: &record,
            };
            store_round(conn, previous, &next, None).await?;
            failed += 1;
        }
    }
    Ok(failed)
}

/// The current server time, read in the caller's transaction.
pub(super) async fn server_now(conn: &mut PgConnection) -> Result<OffsetDateTime> {
    sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&mut *conn)
        .await
        .map_err(db("cannot read the server clock"))
}
