//! `m3 submit`: queues one agent execution (the arguments of `m3 run`) and prints its id;
//! any `m3 worker` on the store runs it, with the worker's environment for the servers
//! (bare server commands are resolved on this process's `PATH` at submission).

use std::path::Path;

use serde_json::json;

use crate::cli::RunArgs;
use crate::commands::run::submission;
use crate::failure::Failure;
use crate::output::Output;

pub(crate) async fn run(out: Output, db: &Path, args: RunArgs) -> Result<(), Failure> {
    if args.interactive {
        return Err(Failure::usage(
            "m3 submit only queues: answer its rounds with `m3 respond` (or use `m3 run --interactive`)",
        ));
    }
    let submission = submission(&args)?;
    let kit = m3_kit::AsyncMcpTestKit::builder()
        .database(db)
        .embedded_worker(false)
        .recovery_sweep(None)
        .build()
        .await?;
    let submitted = submission
        .submit(&kit)
        .await
        .map(|handle| handle.execution_id().to_owned());
    kit.close().await?;
    let execution_id = submitted?;
    if out.is_json() {
        out.document(&json!({"execution_id": execution_id}))?;
    } else {
        out.say(&execution_id);
    }
    Ok(())
}
