//! [`ManagedInputStore::create_round`](crate::ManagedInputStore::create_round) on
//! PostgreSQL: creates of one execution's rounds are serialized by a transaction advisory
//! lock (whose statement also reads the server clock); the insert itself checks that
//! neither the round id nor its index is taken (`INSERT ... SELECT ... WHERE NOT EXISTS`),
//! so the common case is two statements. Only when nothing was inserted are the rows read
//! to tell an idempotent replay from a conflict.

use m3_types::{Error, ManagedInputRecord, Result};
use time::OffsetDateTime;

use super::error::db;
use super::executions::Tx;
use super::rounds::{PgManagedInputStore, decode, encode};
use crate::CreateRound;
use crate::managed_input::rules::{
    PreparedRound, prepare_create, replay_create, round_index_taken,
};

/// Advisory-lock class of round creation (the second key is the execution id's hash).
const CREATE_LOCK_CLASS: i32 = 0x6d33_7201;

impl PgManagedInputStore {
    pub(super) async fn do_create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        let round = new.round();
        let mut tx = self
            .shared()
            .pool
            .begin()
            .await
            .map_err(db("cannot begin a transaction"))?;
        let server_now: OffsetDateTime = sqlx::query_scalar(
            "SELECT clock_timestamp() FROM (SELECT pg_advisory_xact_lock($1, hashtext($2))) AS locked",
        )
        .bind(CREATE_LOCK_CLASS)
        .bind(&round.execution_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db("cannot lock the execution's rounds"))?;
        let record = match new.record_at(self.shared().now(server_now)) {
            Ok(record) => record,
            Err(error) => return not_inserted(&mut tx, &new, error).await,
        };
        let inserted: Option<i32> = sqlx::query_scalar(
            "INSERT INTO m3rs_rounds (execution_id, round_id, round_index, status, record_json, \
             lease_expires_at, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE NOT EXISTS (SELECT 1 FROM m3rs_rounds \
               WHERE execution_id = $1 AND (round_id = $2 OR round_index = $3)) \
             RETURNING 1",
        )
        .bind(record.execution_id())
        .bind(record.round_id())
        .bind(i64::from(record.round_index))
        .bind(record.status.as_str())
        .bind(encode(&record)?)
        .bind(record.lease.expires_at)
        .bind(record.created_at)
        .bind(record.updated_at)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("cannot insert the managed-input round"))?;
        if inserted.is_none() {
            let unexplained = Error::storage("the managed-input round was not inserted");
            return not_inserted(&mut tx, &new, unexplained).await;
        }
        tx.commit()
            .await
            .map_err(db("cannot commit the managed-input round"))?;
        Ok(record)
    }
}

/// Why `new` was not inserted: the stored round of the same id decides an idempotent
/// replay (or its conflict); else a taken index; else `otherwise`. Nothing is written.
async fn not_inserted(
    tx: &mut Tx,
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
    .fetch_one(&mut **tx)
    .await
    .map_err(db("cannot read the execution's rounds"))?;
    match existing {
        Some(stored) => replay_create(decode(&stored)?, new),
        None if index_taken => Err(round_index_taken(new)),
        None => Err(otherwise),
    }
}
