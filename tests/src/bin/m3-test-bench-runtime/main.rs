//! Benchmarks of the managed-input runtime and the worker service (run with `--release`);
//! each prints our figure beside its target (and the same-process reference) in one run.
//!
//! - `respond [ROUNDS] [--db URL]`: submit -> visible, and respond -> MCP retry sent, with
//!   the answer committed in the worker's process and in another process (a child of this
//!   binary, woken across processes by the store's change signal), on SQLite, and on
//!   PostgreSQL when `--db postgres://...` or `M3_TEST_POSTGRES_URL` names a server; the
//!   other process answers through the kit, then by POSTing to `m3 serve`'s JSON API (a
//!   server in that process), so the HTTP path is compared with the kit's in one run;
//! - `worker [STARTS] [WAITING]`: `m3 submit` -> an idle `m3 worker` starts the execution;
//!   then WAITING managed executions waiting at once in one `m3 worker`: its RSS without
//!   its servers, its CPU while idle, the servers' memory (`m3` from `M3_BIN`, beside this
//!   binary, or on `PATH`);
//! - `events [COMMITS] [--db URL]`: commit -> an `m3 events --follow` process prints the
//!   record, beside a follower in the committing process, on SQLite and (as for `respond`)
//!   PostgreSQL;
//! - `notify [ROUNDS] [--db URL]`: a round committed -> a local receiver has the webhook
//!   POST of an in-process notifier, one at a time; then 1,000 rounds created at once -> all
//!   delivered; on SQLite and (as for `respond`) PostgreSQL;
//! - `traces [ROUNDS]`: submit -> visible and respond -> MCP retry in one process with
//!   tracing off and with the OTLP exporter on (to `tests/peers/otlp_receiver.py`): at most
//!   5% slower;
//! - `handover [PARKED] [STDIO] [HANDED] [ANSWERED] [--db URL] [--window SECS]`: PARKED
//!   transferable executions (2026-07-28 over Streamable HTTP) waiting in one `m3 worker`,
//!   parked: its RSS and idle CPU over the window (default 60 s), beside STDIO stdio ones;
//!   then, on SQLite and (as for `respond`) PostgreSQL, HANDED waiting executions handed
//!   from a worker stopped by SIGTERM to a live one, and respond -> retry for ANSWERED of
//!   them beside ANSWERED never handed over;
//! - `smoke`: every benchmark in a tiny configuration (scripts/test.sh: keeps them running,
//!   asserts no timing).
//!
//! ```sh
//! cargo build --release -p m3-cli -p m3-tests
//! target/release/m3-test-bench-runtime respond 200
//! target/release/m3-test-bench-runtime worker 100 1000
//! ```

mod events;
mod handover;
mod notify;
mod respond;
mod respond_http;
mod stats;
mod traces;
mod worker;

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| -> Result<usize, Error> {
        Ok(args
            .get(i)
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(default))
    };
    match args.first().map(String::as_str) {
        Some("serve-shipping") => {
            m3_fixtures::serve_stdio(m3_fixtures::ShippingOptions::new(m3_fixtures::Era::Modern))
                .await?;
            Ok(())
        }
        Some("respond-child") => {
            let db = args.get(1).ok_or("respond-child <db>")?;
            respond::responder(db, respond::AnswerPath::Kit).await
        }
        Some("respond-child-http") => {
            let db = args.get(1).ok_or("respond-child-http <db>")?;
            respond::responder(db, respond::AnswerPath::Http).await
        }
        Some("respond") => {
            let db = flag(&args, "--db");
            let rounds = args
                .iter()
                .skip(1)
                .find_map(|a| a.parse().ok())
                .unwrap_or(200);
            respond_everywhere(rounds, db.as_deref()).await
        }
        Some("worker") => {
            let dir = tempfile::tempdir()?;
            worker::submit_to_start(dir.path(), number(1, 100)?).await?;
            worker::waiting_at_once(dir.path(), number(2, 1000)?).await
        }
        Some("events") => {
            let db = flag(&args, "--db");
            let commits = args
                .iter()
                .skip(1)
                .find_map(|a| a.parse().ok())
                .unwrap_or(200);
            events_everywhere(commits, db.as_deref()).await
        }
        Some("notify") => {
            let db = flag(&args, "--db");
            let rounds = args
                .iter()
                .skip(1)
                .find_map(|a| a.parse().ok())
                .unwrap_or(200);
            notify_everywhere(rounds, notify::BURST, db.as_deref()).await
        }
        Some("handover") => {
            let window = flag(&args, "--window").map(|w| w.parse()).transpose()?.unwrap_or(60);
            let db = flag(&args, "--db");
            let sizes = [number(1, 10_000)?, number(2, 1_000)?, number(3, 1_000)?, number(4, 50)?];
            handover_everywhere(sizes, db.as_deref(), std::time::Duration::from_secs(window)).await
        }
        Some("traces") => traces::bench(number(1, 200)?),
        Some("traces-child") => {
            traces::child(args.get(1).map(String::as_str) == Some("on"), number(2, 200)?).await
        }
        Some("smoke") => {
            respond_everywhere(2, None).await?;
            traces::bench(2)?;
            notify_everywhere(2, 5, None).await?;
            events_everywhere(3, None).await?;
            let dir = tempfile::tempdir()?;
            worker::submit_to_start(dir.path(), 2).await?;
            worker::waiting_at_once(dir.path(), 3).await?;
            handover_everywhere([3, 2, 3, 2], None, std::time::Duration::from_secs(1)).await
        }
        _ => Err("usage: m3-test-bench-runtime respond [ROUNDS] [--db URL] | events [COMMITS] [--db URL] | notify [ROUNDS] [--db URL] | worker [STARTS] [WAITING] | handover [PARKED] [STDIO] [HANDED] [ANSWERED] [--db URL] [--window SECS] | traces [ROUNDS] | smoke".into()),
    }
}

/// The value after `name` in `args`.
fn flag(args: &[String], name: &str) -> Option<String> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

/// The events benchmark on SQLite, then on PostgreSQL when a server is named.
async fn events_everywhere(commits: usize, db: Option<&str>) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let sqlite = dir.path().join("events.sqlite").display().to_string();
    events::bench("sqlite", &sqlite, commits).await?;
    if let Some(url) = postgres_url(db)? {
        events::bench("postgres", &url, commits).await?;
    }
    Ok(())
}

/// The notify benchmark on SQLite, then on PostgreSQL when a server is named.
async fn notify_everywhere(rounds: usize, burst: usize, db: Option<&str>) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let sqlite = dir.path().join("notify.sqlite").display().to_string();
    notify::bench("sqlite", &sqlite, rounds, burst).await?;
    if let Some(url) = postgres_url(db)? {
        notify::bench("postgres", &url, rounds, burst).await?;
    }
    Ok(())
}

/// The handover benchmark: `[parked, stdio, handed, answered]` executions; parked and stdio
/// waiting on SQLite, the handover on SQLite and then on PostgreSQL when a server is named.
async fn handover_everywhere(
    [parked, stdio, handed, answered]: [usize; 4],
    db: Option<&str>,
    window: std::time::Duration,
) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    handover::parked_at_once(dir.path(), parked, window).await?;
    worker::waiting_at_once_over(dir.path(), stdio, window).await?;
    let sqlite = dir.path().join("handover.sqlite").display().to_string();
    handover::handover("sqlite", &sqlite, handed, answered).await?;
    if let Some(url) = postgres_url(db)? {
        handover::handover("postgres", &url, handed, answered).await?;
    }
    Ok(())
}

/// The server `--db` names, else a fresh schema on `M3_TEST_POSTGRES_URL`, else none.
fn postgres_url(db: Option<&str>) -> Result<Option<String>, Error> {
    Ok(match db {
        Some(url) => Some(url.to_owned()),
        None if std::env::var_os("M3_TEST_POSTGRES_URL").is_some() => {
            Some(m3_store_postgres::testing::isolated_url()?)
        }
        None => None,
    })
}

/// The respond benchmark on SQLite, then on PostgreSQL when a server is named (`--db`, or a
/// fresh schema on `M3_TEST_POSTGRES_URL`).
async fn respond_everywhere(rounds: usize, db: Option<&str>) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let sqlite = dir.path().join("bench.sqlite").display().to_string();
    respond::bench("sqlite", &sqlite, rounds).await?;
    if let Some(url) = postgres_url(db)? {
        respond::bench("postgres", &url, rounds).await?;
    }
    Ok(())
}
