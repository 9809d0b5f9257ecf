//! [`ManagedInputStore::create_round`](crate::ManagedInputStore::create_round) on
//! PostgreSQL: the server clock, then one autocommit `INSERT ... ON CONFLICT DO NOTHING`.
//! The primary key `(execution_id, round_id)` and the unique index
//! `(execution_id, round_index)` make the insert atomic against concurrent creates of the
//! same execution (a conflicting insert in flight is waited for). Only when nothing was
//! inserted are the rows read to tell an idempotent replay from a conflict.

use m3_types::{Error, ManagedInputRecord, Result};
use sqlx::PgConnection;

use super::error::db;
use super::rounds::{PgManagedInputStore, decode, encode, server_now};
use crate::CreateRound;
use crate::managed_input::rules::{
    PreparedRound, prepare_create, replay_create, round_index_taken,
};
use crate::signal::{Change, ChangeKind};

impl PgManagedInputStore {
    /// Creates the round and announces an `Ok` (a new round or a replay) on the same
    /// connection.
    pub(super) async fn do_create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        let mut conn = self.shared().connection().await?;
        let done = self.create_on(conn.in_use(), &new).await;
        conn.settle(&done);
        if done.is_ok() {
            let change = Change::new(new.round().execution_id, ChangeKind::Round);
            self.shared().signal.announce_on(conn, &change).await;
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
        let now = match self.shared().injected_now() {
            Some(now) => now,
            None => self.shared().now(server_now(conn).await?),
        };
        let record = match new.record_at(now) {
            Ok(record) => record,
            Err(error) => return not_inserted(conn, new, error).await,
        };
        let inserted: Option<i32> = sqlx::query_scalar(
            "INSERT INTO m3rs_rounds (execution_id, round_id, round_index, status, record_json, \
             lease_expires_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING 1",
        )
        .bind(record.execution_id())
        .bind(record.round_id())
        .bind(i64::from(record.round_index))
        .bind(record.status.as_str())
        .bind(encode(&record)?)
        .bind(record.lease.expires_at)
        .bind(record.created_at)
        .bind(record.updated_at)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db("cannot insert the managed-input round"))?;
        if inserted.is_none() {
            let unexplained = Error::storage("the managed-input round was not inserted");
            return not_inserted(conn, new, unexplained).await;
        }
        Ok(record)
    }
}

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
