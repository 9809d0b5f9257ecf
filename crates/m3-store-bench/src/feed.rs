//! Change-feed read throughput: every record of a store that ran the lifecycle benchmark,
//! read through `ExecutionStore::read_changes` in pages, beside the same pages selected as
//! bare rows through sqlx (no decoding): the floor of what any reader of that table gets.

use std::time::Instant;

use m3_store::ExecutionStore;
use m3_types::{Cursor, Result};
use sqlx::Row;

use crate::lifecycle::sqlx_error;

/// Records per read, as `m3 events` and the server's stream read them.
pub(crate) const PAGE: usize = 1_000;

/// Reads the whole feed through the store and prints its rate; returns it.
pub(crate) async fn store_rate(store: &dyn ExecutionStore, label: &str) -> Result<f64> {
    let started = Instant::now();
    let (mut cursor, mut records, mut pages) = (Cursor::START, 0usize, 0usize);
    loop {
        let page = store.read_changes(cursor, PAGE).await?;
        if page.records.is_empty() {
            break;
        }
        records += page.records.len();
        pages += 1;
        cursor = page.next;
    }
    Ok(report(label, records, pages, started))
}

/// The bare page: the columns a record is made of, after a cursor, in cursor order.
const SELECT_PAGE: &str = "SELECT cursor, kind, execution_id, round_id, at, actor, state_json \
     FROM m3rs_changes WHERE cursor > $1 ORDER BY cursor LIMIT $2";

/// Selects the same pages as bare SQLite rows and prints the rate; returns it.
pub(crate) async fn bare_sqlite(pool: &sqlx::SqlitePool, label: &str) -> Result<f64> {
    let started = Instant::now();
    let (mut cursor, mut records, mut pages) = (0i64, 0usize, 0usize);
    loop {
        let rows = sqlx::query(SELECT_PAGE)
            .bind(cursor)
            .bind(PAGE as i64)
            .fetch_all(pool)
            .await
            .map_err(sqlx_error)?;
        let Some(last) = rows.last() else { break };
        cursor = last.try_get::<i64, _>(0).map_err(sqlx_error)?;
        records += rows.len();
        pages += 1;
    }
    Ok(report(label, records, pages, started))
}

/// Selects the same pages as bare PostgreSQL rows and prints the rate; returns it.
pub(crate) async fn bare_postgres(pool: &sqlx::PgPool, label: &str) -> Result<f64> {
    let started = Instant::now();
    let (mut cursor, mut records, mut pages) = (0i64, 0usize, 0usize);
    loop {
        let rows = sqlx::query(SELECT_PAGE)
            .bind(cursor)
            .bind(PAGE as i64)
            .fetch_all(pool)
            .await
            .map_err(sqlx_error)?;
        let Some(last) = rows.last() else { break };
        cursor = last.try_get::<i64, _>(0).map_err(sqlx_error)?;
        records += rows.len();
        pages += 1;
    }
    Ok(report(label, records, pages, started))
}

fn report(label: &str, records: usize, pages: usize, started: Instant) -> f64 {
    let rate = records as f64 / started.elapsed().as_secs_f64();
    println!("feed-read {label} records={records} pages={pages} records_per_s={rate:.0}");
    rate
}
