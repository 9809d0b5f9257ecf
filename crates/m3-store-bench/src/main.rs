//! Round-lifecycle benchmark of [`SqliteManagedInputStore`].
//!
//! One round = `create_round`, `submit_responses`, `list_rounds`, `start_delivery`,
//! `mark_delivered`, `resolve` — the lifecycle of `/work/shared/bench/anchor_store_bench.py`,
//! with the same pending round, schema, response and validation. For `synchronous` FULL and
//! NORMAL it runs N rounds sequentially on a fresh file and prints rounds/s and p50/p99 per
//! operation, then runs 1, 8 and 64 concurrent executions sharing one file.
//!
//! usage: `m3-store-bench [--rounds N] [--full-rounds N] [--dir DIR] [--concurrency 1,8,64]`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_store::sqlite::{SqliteStoreOptions, SqliteSynchronous};
use m3_store::{
    CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundRef, SqliteManagedInputStore,
};
use m3_types::{
    Clock, ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind,
    PendingElicitationRound, SystemClock,
};
use serde_json::{Map, Value, json};

const OPERATIONS: [&str; 6] = [
    "create_round",
    "submit_responses",
    "list_rounds",
    "start_delivery",
    "mark_delivered",
    "resolve",
];

struct Args {
    rounds: usize,
    remove_dir: bool,
    full_rounds: usize,
    dir: PathBuf,
    concurrency: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        rounds: 2000,
        remove_dir: true,
        full_rounds: 500,
        dir: std::env::temp_dir().join(format!("m3-store-bench-{}", m3_types::new_id())),
        concurrency: vec![1, 8, 64],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rounds" => args.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--full-rounds" => {
                args.full_rounds = value()?
                    .parse()
                    .map_err(|e| format!("--full-rounds: {e}"))?;
            }
            "--dir" => {
                args.dir = PathBuf::from(value()?);
                args.remove_dir = false;
            }
            "--concurrency" => {
                args.concurrency = value()?
                    .split(',')
                    .map(|n| n.trim().parse().map_err(|e| format!("--concurrency: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => {
                return Err("usage: m3-store-bench [--rounds N] [--full-rounds N] [--dir DIR] [--concurrency 1,8,64]".into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

fn schema() -> Map<String, Value> {
    match json!({"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                 "required": ["street", "city"]})
    {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn pending(execution_id: &str, round_id: &str) -> PendingElicitationRound {
    let request =
        FormElicitationRequest::new("shipping_address", "Enter the delivery address.", schema());
    let mut requests = BTreeMap::new();
    requests.insert(
        "shipping_address".to_owned(),
        ElicitationRequest::Form(request),
    );
    PendingElicitationRound {
        round_id: round_id.to_owned(),
        execution_id: execution_id.to_owned(),
        logical_operation_id: "tool-1".to_owned(),
        server: "shipping".to_owned(),
        operation_kind: OperationKind::Tool,
        operation_name: "book_shipment".to_owned(),
        request_state: Some("opaque".to_owned()),
        requests,
        created_at: SystemClock.now(),
        deadline: None,
    }
}

fn response() -> ResponseSubmission {
    let content = match json!({"street": "1 Main Street", "city": "Pune"}) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    ResponseSubmission::single("shipping_address", ElicitationResponse::accept(content), "")
}

/// Runs one full lifecycle, recording each operation's latency into `samples`.
async fn lifecycle(
    store: &dyn ManagedInputStore,
    execution_id: &str,
    key: &str,
    samples: &mut [Vec<Duration>; 6],
) -> m3_types::Result<()> {
    let round_id = "round-0";
    let mut timed = |index: usize, start: Instant| {
        if let Some(bucket) = samples.get_mut(index) {
            bucket.push(start.elapsed());
        }
    };
    let t = Instant::now();
    let record = store
        .create_round(
            CreateRound::new(
                pending(execution_id, round_id),
                "bench-worker",
                Duration::from_secs(30),
            )
            .with_round_index(0)
            .with_round_limit(10),
        )
        .await?;
    timed(0, t);
    let round = RoundRef::new(execution_id, round_id);
    let lease = LeaseRef::of(&record.lease);
    let mut submission = response();
    submission.idempotency_key = key.to_owned();
    let t = Instant::now();
    store.submit_responses(&round, &lease, submission).await?;
    timed(1, t);
    let t = Instant::now();
    store.list_rounds(execution_id).await?;
    timed(2, t);
    let t = Instant::now();
    store.start_delivery(&round, &lease).await?;
    timed(3, t);
    let t = Instant::now();
    store.mark_delivered(&round, &lease).await?;
    timed(4, t);
    let t = Instant::now();
    store.resolve(&round, &lease).await?;
    timed(5, t);
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted
        .get(rank.min(sorted.len() - 1))
        .copied()
        .unwrap_or_default()
}

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

async fn sequential(dir: &Path, sync: SqliteSynchronous, rounds: usize) -> m3_types::Result<()> {
    let path = dir.join(format!("sequential-{}.sqlite", sync_name(sync)));
    let store = open(&path, sync).await?;
    let mut samples: [Vec<Duration>; 6] = Default::default();
    // Warm-up outside the measurement (statement cache, pool, file growth).
    let mut warm: [Vec<Duration>; 6] = Default::default();
    for i in 0..20 {
        lifecycle(&store, &format!("warm-{i}"), &format!("w-{i}"), &mut warm).await?;
    }
    let start = Instant::now();
    for i in 0..rounds {
        lifecycle(
            &store,
            &format!("exec-{i}"),
            &format!("k-{i}"),
            &mut samples,
        )
        .await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "m3-rs sync={} rounds={rounds} seconds={elapsed:.3} rounds_per_s={:.1}",
        sync_name(sync),
        rounds as f64 / elapsed
    );
    println!("  {:<18} {:>10} {:>10}", "operation", "p50 us", "p99 us");
    for (name, bucket) in OPERATIONS.iter().zip(samples.iter_mut()) {
        bucket.sort_unstable();
        println!(
            "  {:<18} {:>10.1} {:>10.1}",
            name,
            percentile(bucket, 50.0).as_secs_f64() * 1e6,
            percentile(bucket, 99.0).as_secs_f64() * 1e6
        );
    }
    Ok(())
}

async fn concurrent(
    dir: &Path,
    sync: SqliteSynchronous,
    executions: usize,
    rounds: usize,
) -> m3_types::Result<()> {
    let path = dir.join(format!(
        "concurrent-{}-{executions}.sqlite",
        sync_name(sync)
    ));
    let store: Arc<dyn ManagedInputStore> = Arc::new(open(&path, sync).await?);
    let per_execution = rounds.div_ceil(executions).max(1);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for e in 0..executions {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut samples: [Vec<Duration>; 6] = Default::default();
            for i in 0..per_execution {
                // Each execution runs its rounds in order, as a worker would.
                let execution = format!("exec-{e}-{i}");
                lifecycle(
                    store.as_ref(),
                    &execution,
                    &format!("k-{e}-{i}"),
                    &mut samples,
                )
                .await?;
            }
            Ok::<_, m3_types::Error>(samples)
        });
    }
    let mut all: [Vec<Duration>; 6] = Default::default();
    while let Some(joined) = tasks.join_next().await {
        let samples =
            joined.map_err(|e| m3_types::Error::storage(format!("bench task failed: {e}")))??;
        for (into, from) in all.iter_mut().zip(samples) {
            into.extend(from);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let total = per_execution * executions;
    let submit = &mut all[1];
    submit.sort_unstable();
    println!(
        "m3-rs sync={} executions={executions} rounds={total} seconds={elapsed:.3} rounds_per_s={:.1} submit_p50_us={:.1} submit_p99_us={:.1}",
        sync_name(sync),
        total as f64 / elapsed,
        percentile(submit, 50.0).as_secs_f64() * 1e6,
        percentile(submit, 99.0).as_secs_f64() * 1e6,
    );
    Ok(())
}

fn sqlx_error(e: sqlx::Error) -> m3_types::Error {
    m3_types::Error::storage("bench floor query failed").with_source(e)
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

async fn run(args: Args) -> m3_types::Result<()> {
    std::fs::create_dir_all(&args.dir).map_err(|e| {
        m3_types::Error::storage("cannot create the bench directory").with_source(e)
    })?;
    for (sync, rounds) in [
        (SqliteSynchronous::Full, args.full_rounds),
        (SqliteSynchronous::Normal, args.rounds),
    ] {
        sequential(&args.dir, sync, rounds).await?;
        sqlx_floor(&args.dir, sync, rounds).await?;
    }
    for (sync, rounds) in [
        (SqliteSynchronous::Full, args.full_rounds),
        (SqliteSynchronous::Normal, args.rounds),
    ] {
        for &executions in &args.concurrency {
            concurrent(&args.dir, sync, executions.max(1), rounds).await?;
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return std::process::ExitCode::from(2);
        }
    };
    let (dir, remove_dir) = (args.dir.clone(), args.remove_dir);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start tokio: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(args));
    if remove_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {} {e} {:?}", e.code(), e.details());
            std::process::ExitCode::FAILURE
        }
    }
}
