//! `renew_leases` (and `renew`, a batch of one): every round of the batch is read in one
//! statement, each lease is decided by the shared rules, and every renewal the rules allow is
//! written by one guarded statement, all in one write transaction. A worker renews the leases
//! of all its waiting rounds every few seconds; one statement per lease cost two thread
//! hand-offs to sqlx's connection worker each, most of an idle worker's CPU.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use m3_types::{ManagedInputRecord, Result};
use serde_json::json;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use time::OffsetDateTime;

use super::codec::{decode_record, timestamp_text};
use super::columns::record_columns;
use super::error::{batch_item, storage};
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{
    apply_renew, check_renew, check_renew_args, lease_expiry, missing_round, raced,
    require_lease_duration,
};
use crate::{LeaseRef, RoundRef};

/// Every round of a batch; `?` is a JSON array of `[execution_id, round_id]` pairs.
const SELECT_BATCH: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE (execution_id, round_id) IN ",
    "(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))"
);

/// The renewals the rules allowed; `?3` is a JSON array of `[execution_id, round_id,
/// owner_id, lease_token]`. The guard is the single renewal's (the same lease, a renewable
/// status, unexpired at `?4`): a row that changed since the read inside this transaction
/// cannot match, and an unmatched lease is reported as raced.
const RENEW_BATCH: &str = concat!(
    "UPDATE m3_managed_input_rounds SET lease_expires_at=?1, updated_at=?2 ",
    "WHERE (execution_id, round_id, owner_id, lease_token) IN (SELECT json_extract(value, '$[0]'), ",
    "json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]') ",
    "FROM json_each(?3)) ",
    "AND status IN ('pending','response_validated','delivery_started') AND lease_expires_at>?4 ",
    "RETURNING execution_id, round_id"
);

type Key = (String, String);

fn key(round: &RoundRef) -> Key {
    (round.execution_id.clone(), round.round_id.clone())
}

impl SqliteManagedInputStore {
    pub(super) async fn renew_batch(
        &self,
        leases: &[(RoundRef, LeaseRef)],
        lease_duration: Duration,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        require_lease_duration(lease_duration)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => renew_in_tx(&mut write, leases, lease_duration, now).await,
            Err(error) => Err(error),
        };
        let outcomes = write.finish(result).await?;
        // No image: a renewed round waits, and whoever writes it next (the waiter woken by
        // its response) reads it first; 1,000 waiting rounds would otherwise hold 1,000.
        for (round, _) in leases {
            inner.images.forget(round);
        }
        Ok(outcomes)
    }
}

/// How many leases one read and one write take: the rows of a chunk are in memory at once,
/// and a worker's batch can hold thousands of rounds.
const CHUNK: usize = 64;

async fn renew_in_tx(
    conn: &mut SqliteConnection,
    leases: &[(RoundRef, LeaseRef)],
    lease_duration: Duration,
    now: OffsetDateTime,
) -> Result<Vec<Result<ManagedInputRecord>>> {
    let expires = lease_expiry(now, lease_duration)?;
    let mut outcomes = Vec::with_capacity(leases.len());
    for chunk in leases.chunks(CHUNK) {
        outcomes.extend(renew_chunk(conn, chunk, lease_duration, expires, now).await?);
    }
    Ok(outcomes)
}

async fn renew_chunk(
    conn: &mut SqliteConnection,
    leases: &[(RoundRef, LeaseRef)],
    lease_duration: Duration,
    expires: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<Vec<Result<ManagedInputRecord>>> {
    let rows = read_batch(conn, leases).await?;
    let mut outcomes: Vec<Result<ManagedInputRecord>> = leases
        .iter()
        .map(|(round, lease)| {
            check_renew_args(round, lease, lease_duration)?;
            let row = rows.get(&key(round)).ok_or_else(|| missing_round(round))?;
            let current = decode_record(row)?;
            check_renew(&current, lease, now)?;
            Ok(apply_renew(&current, expires, now))
        })
        .collect();
    drop(rows);
    let allowed: Vec<&(RoundRef, LeaseRef)> = leases
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| outcome.is_ok())
        .map(|(lease, _)| lease)
        .collect();
    let renewed = write_batch(conn, &allowed, expires, now).await?;
    for ((round, _), outcome) in leases.iter().zip(outcomes.iter_mut()) {
        if outcome.is_ok() && !renewed.contains(&key(round)) {
            *outcome = Err(raced("lease renewal"));
        }
    }
    outcomes.into_iter().map(batch_item).collect()
}

/// The stored rows of the batch's rounds, by round.
async fn read_batch(
    conn: &mut SqliteConnection,
    leases: &[(RoundRef, LeaseRef)],
) -> Result<HashMap<Key, SqliteRow>> {
    let keys: Vec<[&str; 2]> = leases
        .iter()
        .map(|(round, _)| [round.execution_id.as_str(), round.round_id.as_str()])
        .collect();
    let rows = sqlx::query(SELECT_BATCH)
        .bind(json!(keys).to_string())
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot read the managed-input rounds to renew", e))?;
    rows.into_iter()
        .map(|row| {
            let execution_id: String = row
                .try_get("execution_id")
                .map_err(|e| storage("cannot read a managed-input round's key", e))?;
            let round_id: String = row
                .try_get("round_id")
                .map_err(|e| storage("cannot read a managed-input round's key", e))?;
            Ok(((execution_id, round_id), row))
        })
        .collect()
}

/// Renews `allowed` in one statement; the rounds it renewed.
async fn write_batch(
    conn: &mut SqliteConnection,
    allowed: &[&(RoundRef, LeaseRef)],
    expires: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<HashSet<Key>> {
    if allowed.is_empty() {
        return Ok(HashSet::new());
    }
    let leases: Vec<[&str; 4]> = allowed
        .iter()
        .map(|(round, lease)| {
            [
                round.execution_id.as_str(),
                round.round_id.as_str(),
                lease.owner_id.as_str(),
                lease.lease_token.as_str(),
            ]
        })
        .collect();
    let now_text = timestamp_text(now);
    let rows = sqlx::query(RENEW_BATCH)
        .bind(timestamp_text(expires))
        .bind(&now_text)
        .bind(json!(leases).to_string())
        .bind(&now_text)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot renew the managed-input leases", e))?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get("execution_id")
                    .map_err(|e| storage("cannot read a renewed round's key", e))?,
                row.try_get("round_id")
                    .map_err(|e| storage("cannot read a renewed round's key", e))?,
            ))
        })
        .collect()
}
