//! Batched lease renewal of both PostgreSQL stores: the rows of the whole batch read in
//! one statement, every decision taken by the shared rules, and every renewed row written
//! by one `UPDATE ... FROM unnest(...)`.

use std::collections::HashMap;
use std::time::Duration;

use m3_types::{ManagedInputRecord, Result};
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::error::db;
use super::executions::{Pending, PgExecutionStore, commit, decode as decode_execution, encode};
use super::round_write::{decode, encode as encode_round};
use super::rounds::PgManagedInputStore;
use m3_store::execution::rules::{lease_expiry, renew_step};
use m3_store::managed_input::rules::{renew_item, require_lease_duration};
use m3_store::{ExecutionLease, ExecutionLeaseRef, LeaseRef, RoundRef};

type RoundKey = (String, String);

/// One round of the batch as read: the stored JSON (the compare-and-set guard of the
/// write) and the record after the batch's renewals of it, if any.
struct ReadRound {
    stored: String,
    renewed: Option<ManagedInputRecord>,
}

impl PgManagedInputStore {
    /// `renew_leases`: one read, the rules per item, one guarded write; an item whose row
    /// a concurrent writer changed in between is renewed again on its own
    /// (`renew_alone`, which decides on the new record).
    pub(super) async fn do_renew_leases(
        &self,
        leases: &[(RoundRef, LeaseRef)],
        lease_duration: Duration,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        require_lease_duration(lease_duration)?;
        // Two autocommit statements: on the store object's kept connection, like every
        // round write outside a transaction.
        let mut conn = self.shared().connection().await?;
        let read = self.read_batch(conn.in_use(), leases).await;
        conn.settle(&read);
        let (mut read, now) = read?;
        let mut outcomes: Vec<Result<ManagedInputRecord>> = leases
            .iter()
            .map(|item| renew_read(&mut read, item, lease_duration, now))
            .collect();
        let written = self.write_batch(conn.in_use(), &read).await;
        conn.settle(&written);
        conn.release();
        let written = written?;
        for (outcome, (round, lease)) in outcomes.iter_mut().zip(leases) {
            match outcome {
                Ok(record) if written.contains(&key(round)) => self.keep_written(record),
                Ok(_) => *outcome = self.renew_alone(round, lease, lease_duration).await,
                Err(_) => {}
            }
        }
        Ok(outcomes)
    }

    /// The stored rows of the batch's rounds, and the store's now.
    async fn read_batch(
        &self,
        conn: &mut PgConnection,
        leases: &[(RoundRef, LeaseRef)],
    ) -> Result<(HashMap<RoundKey, ReadRound>, OffsetDateTime)> {
        let (executions, rounds): (Vec<&str>, Vec<&str>) = leases
            .iter()
            .map(|(round, _)| (round.execution_id.as_str(), round.round_id.as_str()))
            .unzip();
        let rows: Vec<(String, String, String, OffsetDateTime)> = sqlx::query_as(
            "SELECT execution_id, round_id, r.record_json, clock_timestamp() FROM m3rs_rounds r \
             JOIN unnest($1::text[], $2::text[]) AS b(execution_id, round_id) \
             USING (execution_id, round_id)",
        )
        .bind(&executions)
        .bind(&rounds)
        .fetch_all(conn)
        .await
        .map_err(db("cannot read the managed-input rounds"))?;
        let now = match rows.first() {
            Some((_, _, _, server_now)) => self.shared().now(*server_now),
            None => m3_store::store_now(self.shared().clock.as_ref()),
        };
        let read = rows
            .into_iter()
            .map(|(execution_id, round_id, stored, _)| {
                let round = ReadRound {
                    stored,
                    renewed: None,
                };
                ((execution_id, round_id), round)
            })
            .collect();
        Ok((read, now))
    }

    /// Writes every renewed round over the row it was read from, in one statement;
    /// returns the rounds written (a row changed since the read is not).
    async fn write_batch(
        &self,
        conn: &mut PgConnection,
        read: &HashMap<RoundKey, ReadRound>,
    ) -> Result<Vec<RoundKey>> {
        let mut columns = RoundColumns::default();
        for ((execution_id, round_id), round) in read {
            if let Some(record) = &round.renewed {
                columns.push(execution_id, round_id, &round.stored, record)?;
            }
        }
        if columns.execution_ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_as(
            "UPDATE m3rs_rounds AS r SET record_json = b.record_json, \
             lease_expires_at = b.lease_expires_at, updated_at = b.updated_at \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], \
             $5::timestamptz[], $6::text[]) \
             AS b(execution_id, round_id, record_json, lease_expires_at, updated_at, previous) \
             WHERE r.execution_id = b.execution_id AND r.round_id = b.round_id \
             AND r.record_json = b.previous RETURNING r.execution_id, r.round_id",
        )
        .bind(&columns.execution_ids)
        .bind(&columns.round_ids)
        .bind(&columns.records)
        .bind(&columns.expiries)
        .bind(&columns.updated)
        .bind(&columns.previous)
        .fetch_all(conn)
        .await
        .map_err(db("cannot renew the managed-input leases"))
    }
}

/// The batch's rows as the columns of one `unnest`.
#[derive(Default)]
struct RoundColumns {
    execution_ids: Vec<String>,
    round_ids: Vec<String>,
    records: Vec<String>,
    expiries: Vec<OffsetDateTime>,
    updated: Vec<OffsetDateTime>,
    previous: Vec<String>,
}

impl RoundColumns {
    fn push(
        &mut self,
        execution_id: &str,
        round_id: &str,
        previous: &str,
        record: &ManagedInputRecord,
    ) -> Result<()> {
        self.execution_ids.push(execution_id.to_owned());
        self.round_ids.push(round_id.to_owned());
        self.records.push(encode_round(record)?);
        self.expiries.push(record.lease.expires_at);
        self.updated.push(record.updated_at);
        self.previous.push(previous.to_owned());
        Ok(())
    }
}

fn key(round: &RoundRef) -> RoundKey {
    (round.execution_id.clone(), round.round_id.clone())
}

/// `renew` of one item on the rounds read (the rules decide; nothing is written yet).
fn renew_read(
    read: &mut HashMap<RoundKey, ReadRound>,
    item: &(RoundRef, LeaseRef),
    lease_duration: Duration,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let slot = read.get_mut(&key(&item.0));
    let current = slot.as_ref().map(|slot| match &slot.renewed {
        Some(record) => Ok(record.clone()),
        None => decode(&slot.stored),
    });
    let record = renew_item((&item.0, &item.1), lease_duration, current, now)?;
    if let Some(slot) = slot {
        slot.renewed = Some(record.clone());
    }
    Ok(record)
}

impl PgExecutionStore {
    /// `renew_leases`: the batch's rows locked in one statement (in id order, so batch
    /// renewers never deadlock), the rules per item, one write, one commit.
    pub(super) async fn do_renew_leases(
        &self,
        leases: &[ExecutionLeaseRef],
        ttl: Duration,
    ) -> Result<Vec<Result<ExecutionLease>>> {
        if leases.is_empty() {
            lease_expiry(m3_store::store_now(self.shared().clock.as_ref()), ttl)?;
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = leases.iter().map(|l| l.execution_id.as_str()).collect();
        let mut tx = self.begin().await?;
        let rows: Vec<(String, String, OffsetDateTime)> = sqlx::query_as(
            "SELECT execution_id, record_json, clock_timestamp() FROM m3rs_executions \
             WHERE execution_id = ANY($1) ORDER BY execution_id FOR UPDATE",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db("cannot read the executions"))?;
        let now = match rows.first() {
            Some((_, _, server_now)) => self.shared().now(*server_now),
            None => m3_store::store_now(self.shared().clock.as_ref()),
        };
        let expires_at = lease_expiry(now, ttl)?;
        let mut read = HashMap::with_capacity(rows.len());
        for (id, stored, _) in rows {
            read.insert(id, Pending::new(decode_execution(&stored)?));
        }
        let outcomes = leases
            .iter()
            .map(|lease| renew_step(read.get_mut(&lease.execution_id), lease, expires_at, now))
            .collect();
        write_executions(&mut tx, read.values().filter(|p| p.is_changed())).await?;
        commit(tx).await?;
        Ok(outcomes)
    }
}

/// Writes the renewed leases of `pending` in one statement (renewal changes only the
/// record, its lease expiry and `updated_at`).
async fn write_executions<'a>(
    conn: &mut sqlx::PgConnection,
    pending: impl Iterator<Item = &'a Pending>,
) -> Result<()> {
    let (mut ids, mut records, mut expiries, mut updated) = (vec![], vec![], vec![], vec![]);
    for p in pending {
        ids.push(p.record.execution_id.clone());
        records.push(encode(&p.record)?);
        expiries.push(p.record.lease.as_ref().map(|l| l.expires_at));
        updated.push(p.record.updated_at);
    }
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE m3rs_executions AS e SET record_json = b.record_json, \
         lease_expires_at = b.lease_expires_at, updated_at = b.updated_at \
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) \
         AS b(execution_id, record_json, lease_expires_at, updated_at) \
         WHERE e.execution_id = b.execution_id",
    )
    .bind(&ids)
    .bind(&records)
    .bind(&expiries)
    .bind(&updated)
    .execute(&mut *conn)
    .await
    .map_err(db("cannot renew the execution leases"))?;
    Ok(())
}
