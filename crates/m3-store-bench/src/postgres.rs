//! The PostgreSQL subjects (`--db postgres://...`): [`PgManagedInputStore`] in fresh schemas,
//! sequentially and from N concurrent executions, and in the same run the same five write
//! transactions per round as bare SQL through sqlx (the floor of any store on sqlx), with
//! the server's durability settings printed first. Every schema the run creates is dropped
//! at its end.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use m3_store::ManagedInputStore;
use m3_store::postgres::{PgManagedInputStore, PgStoreOptions};
use m3_types::Result;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection};

use crate::Args;
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

async fn subjects(
    options: &PgStoreOptions,
    connect: &PgConnectOptions,
    args: &Args,
    schemas: &mut Schemas,
) -> Result<()> {
    let pool = options.pool_size();
    let store = open(options, schemas).await?;
    let single = sequential(&store, "m3-rs postgres", args.rounds).await?;
    let floor = bare_floor(connect, schemas, args.rounds, 1).await?;
    let mut rates = Vec::new();
    for &executions in &args.concurrency {
        let executions = executions.max(1);
        let store: Arc<dyn ManagedInputStore> = Arc::new(open(options, schemas).await?);
        let label = format!("m3-rs postgres pool={pool}");
        let ours = concurrent(store, &label, executions, args.rounds).await?;
        let bare = bare_floor(connect, schemas, args.rounds, executions.min(pool as usize)).await?;
        rates.push((executions, ours, bare));
    }
    println!();
    println!("== summary (rounds/s, PostgreSQL, pool={pool})");
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "subject", "m3-rs", "bare sqlx", "ratio"
    );
    let row = |name: &str, ours: f64, bare: f64| {
        println!(
            "{name:<40} {ours:>12.1} {bare:>12.1} {:>7.0}%",
            100.0 * ours / bare
        );
    };
    row("single execution (sequential)", single, floor);
    for (executions, ours, bare) in &rates {
        row(&format!("{executions} concurrent executions"), *ours, *bare);
    }
    if let Some((executions, ours, _)) = rates.iter().max_by_key(|(e, _, _)| *e) {
        println!(
            "m3-rs postgres {executions} concurrent / single: {:.1}x (target >= 4x)",
            ours / single
        );
    }
    println!(
        "m3-rs postgres single / bare sqlx: {:.0}% (target >= 80%)",
        100.0 * single / floor
    );
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
