//! The store benchmark: one round's lifecycle through the `ManagedInputStore` contract
//! (`create_round`, `submit_responses`, `list_rounds`, `start_delivery`, `mark_delivered`,
//! `resolve`: the lifecycle of `/work/shared/bench/anchor_store_bench.py`, with the same
//! pending round, schema, response and validation), sequentially and from 1, 8 and 64
//! concurrent executions, beside the same five write transactions as bare SQL through sqlx.
//!
//! Without `--db`: the SQLite store at `synchronous` FULL and NORMAL on fresh files in
//! `--dir`. With `--db postgres://...`: the PostgreSQL store in fresh schemas on that
//! server (the URL's `max_connections` is the pool size), with the server's durability
//! settings printed first; each subject runs `--repeat` times (default 3), m3-rs and bare
//! sqlx alternating, and the summary gives every repetition and the median ratio.
//!
//! Then the change feed those lifecycles wrote is read back through `read_changes`, beside
//! the same pages as bare sqlx rows (`feed-read` lines).
//!
//! usage: `m3-store-bench [--db URL] [--rounds N] [--full-rounds N] [--dir DIR] [--concurrency 1,8,64|none] [--repeat N]`

mod args;
mod compare;
mod feed;
mod lifecycle;
mod postgres;
mod sqlite;

use args::{Args, parse_args};

async fn run(args: Args) -> m3_types::Result<()> {
    if let Some(url) = &args.db {
        return postgres::run(url, &args).await;
    }
    std::fs::create_dir_all(&args.dir).map_err(|e| {
        m3_types::Error::storage("cannot create the bench directory").with_source(e)
    })?;
    sqlite::run(&args).await
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return std::process::ExitCode::from(2);
        }
    };
    let (dir, remove_dir) = (args.dir.clone(), args.remove_dir && args.db.is_none());
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
    // On a worker thread, as a service's tasks run (not on the thread blocked in
    // `block_on`, which every wake-up from the I/O driver would have to unpark), like the
    // bare floor's tasks.
    let outcome = runtime.block_on(async {
        tokio::spawn(run(args))
            .await
            .unwrap_or_else(|e| Err(m3_types::Error::storage(format!("bench task failed: {e}"))))
    });
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
