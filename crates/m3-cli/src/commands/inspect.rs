//! The store commands: `executions`, `status`, `pending`, `result`, `cancel`, `recover`,
//! `rounds`. Each opens the kit on `--db` and calls one public kit method.

use std::path::Path;
use std::time::Duration;

use m3_kit::AsyncMcpTestKit;
use m3_types::{ExecutionOutcome, PendingElicitationRound, timestamp};
use serde_json::{Value, json};

use crate::failure::Failure;
use crate::output::Output;
use crate::progress::Ticker;
use crate::render;

/// Opens the kit on the store `db` names (`m3_store::open`: a path or a store URL; opening
/// runs recovery when `recover` is true).
pub(crate) async fn open_kit(db: &Path, recover: bool) -> Result<AsyncMcpTestKit, Failure> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    Ok(AsyncMcpTestKit::builder()
        .database(db)
        .env(env)
        .recover_on_open(recover)
        .build()
        .await?)
}

pub(crate) async fn executions(out: Output, db: &Path) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    let summaries = kit.executions().await?;
    if out.is_json() {
        let states: Vec<_> = summaries.iter().map(|s| &s.state).collect();
        out.document(&states)?;
    } else {
        let rows = summaries
            .iter()
            .map(|s| {
                vec![
                    s.state.execution_id.clone(),
                    s.state.lifecycle.to_string(),
                    s.state.outcome.map_or("-".to_owned(), |o| o.to_string()),
                    s.human_input.to_string(),
                    timestamp::format(s.state.created_at),
                    s.pending_rounds.to_string(),
                ]
            })
            .collect();
        out.say(render::executions(rows));
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn status(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    let state = kit.attach(execution).await?.snapshot().await?;
    if out.is_json() {
        out.document(&state)?;
    } else {
        out.say(render::snapshot(&state));
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn pending(
    out: Output,
    db: &Path,
    execution: Option<&str>,
) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    let mut rounds: Vec<PendingElicitationRound> = Vec::new();
    match execution {
        Some(execution) => rounds.extend(kit.attach(execution).await?.pending_elicitation().await?),
        None => {
            for summary in kit.executions().await? {
                if summary.pending_rounds == 0 {
                    continue;
                }
                let handle = kit.attach(&summary.state.execution_id).await?;
                rounds.extend(handle.pending_elicitation().await?);
            }
        }
    }
    if out.is_json() {
        out.document(&rounds)?;
    } else if rounds.is_empty() {
        out.say("no pending rounds");
    } else {
        for round in &rounds {
            out.say(render::round(round));
            out.say(format!("  {}", render::respond_hint(round)));
        }
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn result(
    out: Output,
    db: &Path,
    execution: &str,
    timeout: Option<f64>,
) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    let handle = kit.attach(execution).await?;
    let mut ticker = Ticker::start(out.shows_progress(), format!("waiting for {execution}"));
    let outcome = handle.result(timeout.map(Duration::from_secs_f64)).await;
    ticker.stop();
    let result = outcome?;
    if out.is_json() {
        out.document(&result)?;
    } else {
        out.say(render::result(&result));
    }
    kit.close().await?;
    if result.snapshot.outcome == Some(ExecutionOutcome::Completed) {
        Ok(())
    } else {
        Err(Failure::not_completed(&result))
    }
}

pub(crate) async fn cancel(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    kit.attach(execution).await?.cancel().await?;
    if out.is_json() {
        out.document(&json!({"execution_id": execution, "cancel_requested": true}))?;
    } else {
        out.say(format!("cancellation requested for execution {execution}"));
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn recover(out: Output, db: &Path) -> Result<(), Failure> {
    let kit = open_kit(db, false).await?;
    let report = kit.recover().await?;
    if out.is_json() {
        out.document(&report)?;
    } else if report.executions.is_empty() {
        out.say("nothing to recover");
    } else {
        for execution in &report.executions {
            out.say(format!(
                "terminalized execution {} ({}); failed rounds: {}",
                execution.execution_id,
                execution.reason,
                if execution.failed_rounds.is_empty() {
                    "-".to_owned()
                } else {
                    execution.failed_rounds.join(", ")
                }
            ));
        }
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn rounds(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_kit(db, true).await?;
    let rounds = kit.attach(execution).await?.rounds().await?;
    let values: Vec<Value> = rounds
        .iter()
        .map(|round| serde_json::to_value(round).unwrap_or(Value::Null))
        .collect();
    if out.is_json() {
        out.document(&values)?;
    } else if values.is_empty() {
        out.say(format!("execution {execution} has no rounds"));
    } else {
        out.say(render::rounds(&values));
    }
    kit.close().await?;
    Ok(())
}
