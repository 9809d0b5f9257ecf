//! Reading a round inside a write transaction, where the shared rules in
//! [`crate::managed_input::rules`] decide on it.

use m3_types::{ManagedInputRecord, Result};
use sqlx::SqliteConnection;

use super::codec::decode_record;
use super::columns::record_columns;
use super::error::storage;
use crate::RoundRef;
use crate::managed_input::rules::missing_round;

/// The round's row inside the current transaction, or `None`.
pub(crate) async fn fetch_round(
    conn: &mut SqliteConnection,
    round: &RoundRef,
) -> Result<Option<ManagedInputRecord>> {
    select_round(conn, SELECT_ROUND, round).await
}

/// Runs `sql` (ending in the round SELECT) for `round` and decodes the row, if any.
async fn select_round(
    conn: &mut SqliteConnection,
    sql: &'static str,
    round: &RoundRef,
) -> Result<Option<ManagedInputRecord>> {
    let rows = sqlx::query(sql)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot read a managed-input round", e))?;
    rows.first().map(decode_record).transpose()
}

/// Opens the write transaction (`BEGIN IMMEDIATE`) and reads the round that must exist, in
/// one round trip to the connection's worker.
pub(crate) async fn begin_and_fetch_existing(
    conn: &mut SqliteConnection,
    round: &RoundRef,
) -> Result<ManagedInputRecord> {
    select_round(conn, BEGIN_SELECT_ROUND, round)
        .await?
        .ok_or_else(|| missing_round(round))
}

const SELECT_ROUND: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? AND round_id=?"
);

const BEGIN_SELECT_ROUND: &str = concat!(
    "BEGIN IMMEDIATE;SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? AND round_id=?"
);
