//! [`ManagedInputStore::create_round`](m3_store::ManagedInputStore::create_round) on
//! PostgreSQL: one autocommit `INSERT ... ON CONFLICT DO NOTHING`, decided at the estimated
//! server time and pinned to it (see [`ServerTime`](super::server_time::ServerTime)); when
//! nothing was inserted, decided again at a fresh reading of the server's clock.
//! The primary key `(execution_id, round_id)` and the unique index
//! `(execution_id, round_index)` make the insert atomic against concurrent creates of the
//! same execution (a conflicting insert in flight is waited for). Only when nothing was
//! inserted are the rows read to tell an idempotent replay from a conflict.

use std::time::Instant;

use m3_types::{Error, ManagedInputRecord, Result};
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::error::db;
use super::feed::RoundAppend;
use super::known_round::KnownRound;
use super::round_write::{decode, encode, server_now};
use super::rounds::PgManagedInputStore;
use super::server_time::Window;
use m3_store::CreateRound;
use m3_store::managed_input::rules::{
    PreparedRound, prepare_create, replay_create, round_index_taken,
};
use m3_store::signal::{Change, ChangeKind};

impl PgManagedInputStore {
    /// Creates the round and queues the announcement of an `Ok` (a new round or a replay;
    /// see [`Announce::Queued`](super::rounds::Announce::Queued)).
    pub(super) async fn do_create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        let mut conn = self.shared().connection().await?;
        let done = self.create_on(conn.in_use(), &new).await;
        conn.settle(&done);
        if done.is_ok() {
            // The worker creating a round goes on working (it waits for the answer next).
            let change = Change::new(new.round().execution_id, ChangeKind::Round);
            self.shared().signal.announce_queued(conn, &change);
        } else {
            conn.release();
        }
        done
    }

    async fn create_on(
        &self,
        conn: &mut PgConnection,
        new: &PreparedRound,
    ) -> Result<ManagedInputRecord> {
        let (now, window) = self.shared().decision_time();
        match self.insert_at(conn, new, now, window).await? {
            Ok(record) => return Ok(record),
            Err(error) if window.is_none() => return not_inserted(conn, new, error).await,
            // Decided at the estimated server time: a conflict, a refusal or a missed window
            // is decided again at the server's own time, as without an estimate.
            Err(_) => {}
        }
        let server = server_now(conn).await?;
        self.shared().reset_server_time(server, Instant::now());
        let now = self.shared().now(server);
        match self.insert_at(conn, new, now, None).await? {
            Ok(record) => Ok(record),
            Err(error) => not_inserted(conn, new, error).await,
        }
    }

    /// Inserts `new` as created at `now`, pinned to `window` if given (see
    /// [`ServerTime`](super::server_time::ServerTime)): the record inserted, or why nothing
    /// was (the rules' refusal at `now`, or an unexplained `storage_error` for a conflict or
    /// a missed window, which only a read can tell apart).
    async fn insert_at(
        &self,
        conn: &mut PgConnection,
        new: &PreparedRound,
        now: OffsetDateTime,
        window: Option<Window>,
    ) -> Result<Result<ManagedInputRecord, Error>> {
        let record = match new.record_at(now) {
            Ok(record) => record,
            Err(refused) => return Ok(Err(refused)),
        };
        let encoded = encode(&record)?;
        let append = RoundAppend::of(None, &record)?;
        let (earliest, latest) = window.unzip();
        let inserted: Option<OffsetDateTime> = sqlx::query_scalar(INSERT_ROUND)
            .bind(record.execution_id())
            .bind(record.round_id())
            .bind(i64::from(record.round_index))
            .bind(record.status.as_str())
            .bind(&encoded)
            .bind(record.lease.expires_at)
            .bind(record.created_at)
            .bind(record.updated_at)
            .bind(earliest)
            .bind(latest)
            .bind(&record.pending.server)
            .bind(record.pending.operation_kind.as_str())
            .bind(&record.pending.operation_name)
            .bind(append.kind)
            .bind(append.state_json)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db("cannot insert the managed-input round"))?;
        let Some(server_now) = inserted else {
            return Ok(Err(Error::storage(
                "the managed-input round was not inserted",
            )));
        };
        self.shared()
            .observe_server_time(server_now, Instant::now());
        self.shared()
            .rounds
            .keep(&record, KnownRound::new(encoded, &record));
        Ok(Ok(record))
    }
}

/// The insert of a new round, pinned to the window `$9`..`$10` when given, and its
/// `round.pending` change record (`$14`, `$15`: [`RoundAppend`]) in the same statement, only
/// when the row was inserted.
const INSERT_ROUND: &str = "WITH inserted AS (
    INSERT INTO m3rs_rounds (execution_id, round_id, round_index, status, record_json,
        lease_expires_at, created_at, updated_at, server, operation_kind, operation_name)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $11, $12, $13
    WHERE $9::timestamptz IS NULL OR clock_timestamp() BETWEEN $9 AND $10::timestamptz
    ON CONFLICT DO NOTHING RETURNING clock_timestamp() AS server_now),
appended AS (
    INSERT INTO m3rs_change_inbox (kind, execution_id, round_id, at, state_json)
    SELECT $14, $1, $2, $8, $15 FROM inserted WHERE $14::text IS NOT NULL)
SELECT server_now FROM inserted";

/// Why `new` was not inserted: the stored round of the same id decides an idempotent
/// replay (or its conflict); else a taken index; else `otherwise`. Nothing is written.
async fn not_inserted(
    conn: &mut PgConnection,
    new: &PreparedRound,
    otherwise: Error,
) -> Result<ManagedInputRecord> {
    let round = new.round();
    let (existing, index_taken): (Option<String>, bool) = sqlx::query_as(
        "SELECT (SELECT record_json FROM m3rs_rounds WHERE execution_id = $1 AND round_id = $2), \
         EXISTS (SELECT 1 FROM m3rs_rounds WHERE execution_id = $1 AND round_index = $3)",
    )
    .bind(&round.execution_id)
    .bind(&round.round_id)
    .bind(i64::from(new.request.round_index))
    .fetch_one(&mut *conn)
    .await
    .map_err(db("cannot read the execution's rounds"))?;
    match existing {
        Some(stored) => replay_create(decode(&stored)?, new),
        None if index_taken => Err(round_index_taken(new)),
        None => Err(otherwise),
    }
}
