//! The SQLite subjects: [`SqliteManagedInputStore`] at `synchronous` FULL and NORMAL on
//! fresh files, and bare SQLite through sqlx with the same five write transactions.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use m3_store::sqlite::{SqliteStoreOptions, SqliteSynchronous};
use m3_store::{ManagedInputStore, SqliteManagedInputStore};

use crate::args::Args;
use crate::lifecycle::{concurrent, percentile, sequential, sqlx_error};

fn sync_name(sync: SqliteSynchronous) -> &'static str {
    match sync {
        SqliteSynchronous::Full => "FULL",
        SqliteSynchronous::Normal => "NORMAL",
        SqliteSynchronous::Off => "OFF",
        SqliteSynchronous::Extra => "EXTRA",
    }
}

async fn open(path: &Path, sync: SqliteSynchronous) -> m3_types::Result<SqliteManagedInputStore> {
    SqliteManagedInputStore::open_with(path, SqliteStoreOptions::new().synchronous(sync)).await
}

/// The floor of any store built on sqlx: bare SQLite through sqlx (one connection, WAL, the
/// five write transactions of `sqlite_limit.py`, no validation, no JSON), once with sqlx
/// transactions (`begin_with` / statement / `commit`: 3 worker round trips each) and once as
/// one-script transactions (`BEGIN IMMEDIATE; statement; COMMIT`: 1 round trip each), plus the
/// latency of a no-op `SELECT 1` round trip.
async fn sqlx_floor(dir: &Path, sync: SqliteSynchronous, rounds: usize) -> m3_types::Result<()> {
    use sqlx::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let name = sync_name(sync);
    let path = dir.join(format!("floor-{name}.sqlite"));
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(sync);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .map_err(sqlx_error)?;
    sqlx::query("CREATE TABLE IF NOT EXISTS r(e TEXT, id TEXT, status TEXT, payload TEXT, PRIMARY KEY(e,id))")
        .execute(&mut conn)
        .await
        .map_err(sqlx_error)?;
    const STEPS: [&str; 5] = [
        "INSERT INTO r VALUES(?,'r','pending','{}')",
        "UPDATE r SET status='response_validated', payload='{\"a\":1}' WHERE e=? AND id='r' AND status='pending'",
        "UPDATE r SET status='delivery_started' WHERE e=? AND id='r'",
        "UPDATE r SET status='delivered' WHERE e=? AND id='r'",
        "UPDATE r SET status='resolved' WHERE e=? AND id='r'",
    ];
    const SCRIPTS: [&str; 5] = [
        "BEGIN IMMEDIATE;INSERT INTO r VALUES(?,'r','pending','{}');COMMIT",
        "BEGIN IMMEDIATE;UPDATE r SET status='response_validated', payload='{\"a\":1}' WHERE e=? AND id='r' AND status='pending';COMMIT",
        "BEGIN IMMEDIATE;UPDATE r SET status='delivery_started' WHERE e=? AND id='r';COMMIT",
        "BEGIN IMMEDIATE;UPDATE r SET status='delivered' WHERE e=? AND id='r';COMMIT",
        "BEGIN IMMEDIATE;UPDATE r SET status='resolved' WHERE e=? AND id='r';COMMIT",
    ];
    let start = Instant::now();
    for i in 0..rounds {
        let e = format!("t{i}");
        for step in STEPS {
            let mut tx = conn
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(sqlx_error)?;
            sqlx::query(step)
                .bind(&e)
                .execute(&mut *tx)
                .await
                .map_err(sqlx_error)?;
            tx.commit().await.map_err(sqlx_error)?;
        }
    }
    let tx_rate = rounds as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..rounds {
        let e = format!("s{i}");
        for script in SCRIPTS {
            sqlx::query(script)
                .bind(&e)
                .execute(&mut conn)
                .await
                .map_err(sqlx_error)?;
        }
    }
    let script_rate = rounds as f64 / start.elapsed().as_secs_f64();
    let mut trips = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(100) {
        let t = Instant::now();
        let _: i64 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut conn)
            .await
            .map_err(sqlx_error)?;
        trips.push(t.elapsed());
    }
    trips.sort_unstable();
    println!(
        "sqlx-bare sync={name} rounds={rounds} tx_rounds_per_s={tx_rate:.1} script_rounds_per_s={script_rate:.1} select1_p50_us={:.1} select1_p99_us={:.1}",
        percentile(&trips, 50.0).as_secs_f64() * 1e6,
        percentile(&trips, 99.0).as_secs_f64() * 1e6,
    );
    Ok(())
}

/// The feed the sequential lifecycles at `path` wrote, read through the store and bare.
async fn feed_rates(path: &Path) -> m3_types::Result<()> {
    let store = m3_store::SqliteExecutionStore::open(path).await?;
    crate::feed::store_rate(&store, "m3-rs sqlite").await?;
    crate::feed::bare_sqlite(store.pool(), "sqlx-bare sqlite").await?;
    Ok(())
}

/// Every SQLite subject, in `args.dir`.
pub(crate) async fn run(args: &Args) -> m3_types::Result<()> {
    for (sync, rounds) in [
        (SqliteSynchronous::Full, args.full_rounds),
        (SqliteSynchronous::Normal, args.rounds),
    ] {
        let path = args
            .dir
            .join(format!("sequential-{}.sqlite", sync_name(sync)));
        let store = open(&path, sync).await?;
        sequential(&store, &format!("m3-rs sync={}", sync_name(sync)), rounds).await?;
        sqlx_floor(&args.dir, sync, rounds).await?;
        if sync == SqliteSynchronous::Normal {
            feed_rates(&path).await?;
        }
    }
    for (sync, rounds) in [
        (SqliteSynchronous::Full, args.full_rounds),
        (SqliteSynchronous::Normal, args.rounds),
    ] {
        for &executions in &args.concurrency {
            let executions = executions.max(1);
            let name = sync_name(sync);
            let path = args
                .dir
                .join(format!("concurrent-{name}-{executions}.sqlite"));
            let store: Arc<dyn ManagedInputStore> = Arc::new(open(&path, sync).await?);
            concurrent(store, &format!("m3-rs sync={name}"), executions, rounds).await?;
        }
    }
    Ok(())
}
