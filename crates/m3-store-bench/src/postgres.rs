//! The PostgreSQL subjects (`--db postgres://...`): [`PgManagedInputStore`] in fresh schemas,
//! sequentially and from N concurrent executions, and in the same run the same five write
//! transactions per round as bare SQL through sqlx (the floor of any store on sqlx), with
//! the server's durability settings printed first. Each subject runs as interleaved pairs
//! (see [`compare`](crate::compare)). Every schema the run creates is dropped at its end.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use m3_store_postgres::{PgManagedInputStore, PgStoreOptions};
use m3_types::Result;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection};

use crate::args::Args;
use crate::compare::{Pair, ours_first, print_summary};
use crate::lifecycle::{concurrent, sequential, sqlx_error};

/// The five write transactions of one round, as bare SQL (no validation, no JSON records).
const STEPS: [&str; 5] = [
    "INSERT INTO r VALUES($1, 'r', 'pending', '{}')",
    "UPDATE r SET status = 'response_validated', payload = '{\"a\":1}' WHERE e = $1 AND id = 'r' AND status = 'pending'",
    "UPDATE r SET status = 'delivery_started' WHERE e = $1 AND id = 'r'",
    "UPDATE r SET status = 'delivered' WHERE e = $1 AND id = 'r'",
    "UPDATE r SET status = 'resolved' WHERE e = $1 AND id = 'r'",
];

/// The server settings that decide what a commit costs.
const SETTINGS: [&str; 5] = [
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
];

/// Schemas this run created, dropped at its end.
struct Schemas {
    admin: PgPool,
    created: Vec<String>,
}

impl Schemas {
    async fn fresh(&mut self) -> Result<String> {
        let name = format!("m3bench_{}", m3_types::new_id().to_ascii_lowercase());
        sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA \"{name}\"")))
            .execute(&self.admin)
            .await
            .map_err(sqlx_error)?;
        self.created.push(name.clone());
        Ok(name)
    }

    async fn drop_all(&self) -> Result<()> {
        for name in &self.created {
            sqlx::query(AssertSqlSafe(format!("DROP SCHEMA \"{name}\" CASCADE")))
                .execute(&self.admin)
                .await
                .map_err(sqlx_error)?;
        }
        Ok(())
    }
}

/// Every PostgreSQL subject against the server `url` names.
pub(crate) async fn run(url: &str, args: &Args) -> Result<()> {
    let options = PgStoreOptions::from_url(url)?;
    let connect = PgConnectOptions::from_str(&without_m3_parameters(url)?).map_err(sqlx_error)?;
    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(connect.clone())
        .await
        .map_err(sqlx_error)?;
    print_settings(&admin).await?;
    let mut schemas = Schemas {
        admin,
        created: Vec::new(),
    };
    let outcome = subjects(&options, &connect, args, &mut schemas).await;
    let dropped = schemas.drop_all().await;
    outcome.and(dropped)
}

/// What one measurement runs: the lifecycle one round after another, or from N
/// concurrent executions.
#[derive(Clone, Copy)]
enum Subject {
    Sequential,
    Concurrent(usize),
}

/// What every measurement needs.
struct Bench<'a> {
    options: &'a PgStoreOptions,
    connect: &'a PgConnectOptions,
    rounds: usize,
    schemas: &'a mut Schemas,
}

impl Bench<'_> {
    /// m3-rs rounds/s for `subject`, on a fresh store in a fresh schema.
    async fn ours(&mut self, subject: Subject) -> Result<f64> {
        let store = open(self.options, self.schemas).await?;
        match subject {
            Subject::Sequential => sequential(&store, "m3-rs postgres", self.rounds).await,
            Subject::Concurrent(executions) => {
                let label = format!("m3-rs postgres pool={}", self.options.pool_size());
                concurrent(Arc::new(store), &label, executions, self.rounds).await
            }
        }
    }

    /// Bare sqlx rounds/s for `subject` (as many connections as the store's pool allows).
    async fn bare(&mut self, subject: Subject) -> Result<f64> {
        let connections = match subject {
            Subject::Sequential => 1,
            Subject::Concurrent(executions) => executions.min(self.options.pool_size() as usize),
        };
        bare_floor(self.connect, self.schemas, self.rounds, connections).await
    }

    /// `subject` as `repeat` pairs, m3-rs and bare sqlx alternating which runs first.
    async fn pair(&mut self, name: String, subject: Subject, repeat: usize) -> Result<Pair> {
        let mut runs = Vec::with_capacity(repeat);
        for index in 0..repeat {
            println!("-- {name}: repetition {}/{repeat}", index + 1);
            let (ours, bare) = if ours_first(index) {
                let ours = self.ours(subject).await?;
                (ours, self.bare(subject).await?)
            } else {
                let bare = self.bare(subject).await?;
                (self.ours(subject).await?, bare)
            };
            runs.push((ours, bare));
        }
        Ok(Pair { name, runs })
    }
}

async fn subjects(
    options: &PgStoreOptions,
    connect: &PgConnectOptions,
    args: &Args,
    schemas: &mut Schemas,
) -> Result<()> {
    let mut bench = Bench {
        options,
        connect,
        rounds: args.rounds,
        schemas,
    };
    let single = bench
        .pair(
            "single execution (sequential)".into(),
            Subject::Sequential,
            args.repeat,
        )
        .await?;
    let mut concurrent = Vec::new();
    for &executions in &args.concurrency {
        let executions = executions.max(1);
        let name = format!("{executions} concurrent executions");
        let pair = bench
            .pair(name, Subject::Concurrent(executions), args.repeat)
            .await?;
        concurrent.push((executions, pair));
    }
    let title = format!(
        "PostgreSQL, pool={}, {} rounds, {} repetitions per subject (m3-rs and bare sqlx alternating)",
        options.pool_size(),
        args.rounds,
        args.repeat
    );
    print_summary(&title, &single, &concurrent);
    feed_rates(&mut bench).await
}

/// A fresh store runs `rounds` sequential lifecycles, then its feed is read through the
/// store and as bare rows.
async fn feed_rates(bench: &mut Bench<'_>) -> Result<()> {
    let schema = bench.schemas.fresh().await?;
    let store =
        m3_store_postgres::PgExecutionStore::open_with(bench.options.clone().schema_name(&schema)?)
            .await?;
    sequential(
        &store.rounds(),
        "m3-rs postgres (feed source)",
        bench.rounds,
    )
    .await?;
    crate::feed::store_rate(&store, "m3-rs postgres").await?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(
            bench
                .connect
                .clone()
                .options([("search_path", schema.as_str())]),
        )
        .await
        .map_err(sqlx_error)?;
    crate::feed::bare_postgres(&pool, "sqlx-bare postgres").await?;
    pool.close().await;
    Ok(())
}

async fn open(options: &PgStoreOptions, schemas: &mut Schemas) -> Result<PgManagedInputStore> {
    let schema = schemas.fresh().await?;
    PgManagedInputStore::open_with(options.clone().schema_name(&schema)?).await
}

async fn print_settings(admin: &PgPool) -> Result<()> {
    let mut shown = Vec::new();
    for name in SETTINGS {
        let value: String = sqlx::query_scalar("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(admin)
            .await
            .map_err(sqlx_error)?;
        shown.push(format!("{name}={value}"));
    }
    println!("postgres-settings {}", shown.join(" "));
    Ok(())
}

/// Bare SQL through sqlx on `connections` connections (one task per connection, each its
/// rounds in order): every write is its own sqlx transaction (`BEGIN`, the statement,
/// `COMMIT`), as the store's are. Prints and returns rounds/s.
async fn bare_floor(
    connect: &PgConnectOptions,
    schemas: &mut Schemas,
    rounds: usize,
    connections: usize,
) -> Result<f64> {
    let schema = schemas.fresh().await?;
    let connect = connect.clone().options([("search_path", schema.as_str())]);
    let mut conn = sqlx::PgConnection::connect_with(&connect)
        .await
        .map_err(sqlx_error)?;
    sqlx::query("CREATE TABLE r (e TEXT, id TEXT, status TEXT, payload TEXT, PRIMARY KEY (e, id))")
        .execute(&mut conn)
        .await
        .map_err(sqlx_error)?;
    let mut opened = vec![conn];
    while opened.len() < connections {
        opened.push(
            sqlx::PgConnection::connect_with(&connect)
                .await
                .map_err(sqlx_error)?,
        );
    }
    let per_connection = rounds.div_ceil(connections).max(1);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (c, mut conn) in opened.into_iter().enumerate() {
        tasks.spawn(async move {
            for i in 0..per_connection {
                let e = format!("t{c}-{i}");
                for step in STEPS {
                    let mut tx = conn.begin().await?;
                    sqlx::query(step).bind(&e).execute(&mut *tx).await?;
                    tx.commit().await?;
                }
            }
            Ok::<_, sqlx::Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined
            .map_err(|e| m3_types::Error::storage(format!("bench task failed: {e}")))?
            .map_err(sqlx_error)?;
    }
    let total = per_connection * connections;
    let rate = total as f64 / start.elapsed().as_secs_f64();
    println!(
        "sqlx-bare postgres connections={connections} rounds={total} tx_rounds_per_s={rate:.1}"
    );
    Ok(rate)
}

/// `url` without the parameters m3 reads itself (`schema`, `max_connections`,
/// `statement_timeout`), for a bare sqlx connection.
fn without_m3_parameters(url: &str) -> Result<String> {
    let mut parsed = url::Url::parse(url)
        .map_err(|e| m3_types::Error::model_validation(format!("invalid --db URL: {e}")))?;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(key, _)| {
            !matches!(
                key.as_ref(),
                "schema" | "max_connections" | "statement_timeout"
            )
        })
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    parsed.set_query(None);
    if !kept.is_empty() {
        parsed.query_pairs_mut().extend_pairs(kept);
    }
    Ok(parsed.into())
}
