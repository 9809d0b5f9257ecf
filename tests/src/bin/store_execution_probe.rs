//! A second OS process for the `store_execution_*` and `store_change_signal` tests: opens
//! the execution store at a path (or a `postgres://` URL) with the system clock and
//! performs one command.
//!
//! Usage:
//! - `store_execution_probe cancel <db> <execution_id> <reason>`: request cancellation;
//! - `store_execution_probe append <db> <execution_id> <count>`: append `count`
//!   `probe` events, printing one assigned sequence number per line;
//! - `store_execution_probe show <db> <execution_id>`: print a JSON summary
//!   (`lifecycle`, `cancel_requested`, `sequences`, `kinds`).
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use m3_store::{AppendEvent, ExecutionStore, SqliteExecutionStore};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("store_execution_probe: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Vec<String>) -> Result<(), BoxError> {
    let [command, db, execution_id, rest @ ..] = args.as_slice() else {
        return Err(
            "usage: store_execution_probe <cancel|append|show> <db> <execution_id> ...".into(),
        );
    };
    let store: Arc<dyn ExecutionStore> = if db.contains("://") {
        m3_store_postgres::register();
        m3_store::open(db).await?
    } else {
        Arc::new(SqliteExecutionStore::open(db).await?)
    };
    match (command.as_str(), rest) {
        ("cancel", [reason]) => {
            let record = store.request_cancel(execution_id, Some(reason)).await?;
            println!("{}", record.is_cancel_requested());
        }
        ("append", [count]) => {
            let count: u32 = count.parse()?;
            for n in 0..count {
                let event = store
                    .append_event(AppendEvent::new(
                        execution_id,
                        "probe",
                        json!({"n": n, "pid": std::process::id()}),
                    ))
                    .await?;
                println!("{}", event.sequence);
            }
        }
        ("show", []) => {
            let record = store
                .get_execution(execution_id)
                .await?
                .ok_or("execution does not exist")?;
            let events = store.list_events(execution_id, None).await?;
            let summary = json!({
                "lifecycle": record.lifecycle.as_str(),
                "cancel_requested": record.is_cancel_requested(),
                "sequences": events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
                "kinds": events.iter().map(|e| e.kind.clone()).collect::<Vec<_>>(),
            });
            println!("{summary}");
        }
        _ => return Err(format!("unknown command or arguments: {command}").into()),
    }
    Ok(())
}
