//! `m3 respond EXECUTION ROUND --idempotency-key KEY RESPONSES`.

use std::path::Path;

use serde_json::json;

use crate::cli::RespondArgs;
use crate::commands::inspect::open_kit;
use crate::failure::Failure;
use crate::output::Output;
use crate::responses::{ResponseArgs, parse_responses};

pub(crate) async fn run(out: Output, db: &Path, args: RespondArgs) -> Result<(), Failure> {
    let responses = parse_responses(&ResponseArgs {
        responses: args.responses,
        accept: args.accept,
        accept_url: args.accept_url,
        decline: args.decline,
        cancel: args.cancel,
    })?;
    let kit = open_kit(db, true).await?;
    let handle = kit.attach(&args.execution).await?;
    handle
        .respond_elicitation(&args.round, responses, &args.idempotency_key)
        .await?;
    if out.is_json() {
        out.document(&json!({
            "execution_id": args.execution,
            "round_id": args.round,
            "idempotency_key": args.idempotency_key,
            "committed": true
        }))?;
    } else {
        out.say(format!(
            "responses committed to round {} of execution {}",
            args.round, args.execution
        ));
    }
    kit.close().await?;
    Ok(())
}
