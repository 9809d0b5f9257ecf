//! Execution store: several store objects and several OS processes on one
//! SQLite file (cancel flag, event sequences, lease exclusivity).

mod store_execution_support;

use std::process::Output;
use std::time::Duration;

use m3_store::{AppendEvent, ExecutionStore, FinishExecution};
use m3_types::{ExecutionOutcome, ExecutionStatus};
use serde_json::{Value, json};
use store_execution_support::*;

const PROBE: &str = env!("CARGO_BIN_EXE_store_execution_probe");

#[tokio::test(flavor = "multi_thread")]
async fn second_store_object_sees_cancel_events_and_lease() -> TestResult {
    let fx = Fixture::new()?;
    let first = fx.open().await?;
    let second = fx.open().await?;
    let id = create(&first).await?.execution_id;
    assert!(!second.is_cancel_requested(&id).await?);
    second.request_cancel(&id, Some("from elsewhere")).await?;
    assert!(first.is_cancel_requested(&id).await?);

    let held = lease(&first, &id, "worker-a").await?;
    let err = assert_code(
        lease(&second, &id, "worker-b").await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_held");
    first
        .append_event(
            AppendEvent::new(&id, "diagnostic", json!({"from": "first"})).with_lease(held.to_ref()),
        )
        .await?;
    let seen = second.list_events(&id, Some(0)).await?;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].payload, json!({"from": "first"}));

    second
        .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled).with_lease(held.to_ref()))
        .await?;
    let record = first.get_execution(&id).await?.ok_or("missing")?;
    assert_eq!(record.outcome, Some(ExecutionOutcome::Cancelled));
    Ok(())
}

async fn probe(args: &[&str]) -> TestResult<Output> {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(PROBE).args(args).output(),
    )
    .await??;
    assert!(
        output.status.success(),
        "probe {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}

#[tokio::test(flavor = "multi_thread")]
async fn another_process_sets_the_cancel_flag_and_reads_events() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let db = fx.path.to_str().ok_or("path is not UTF-8")?;

    probe(&["cancel", db, &id, "caller requested cancellation"]).await?;
    let record = store.get_execution(&id).await?.ok_or("missing")?;
    assert!(record.is_cancel_requested());
    assert_eq!(
        record.cancel_reason.as_deref(),
        Some("caller requested cancellation")
    );

    store.transition(&id, ExecutionStatus::Queued, None).await?;
    store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
        .await?;
    let shown = probe(&["show", db, &id]).await?;
    let summary: Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(summary["lifecycle"], "finished");
    assert_eq!(summary["cancel_requested"], true);
    assert_eq!(summary["sequences"], json!([0, 1, 2]));
    assert_eq!(
        summary["kinds"],
        json!([
            "execution.created",
            "execution.state_changed",
            "execution.finished"
        ])
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn appenders_in_several_processes_share_one_sequence() -> TestResult {
    const PER_PROCESS: u64 = 20;
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let db = fx.path.to_str().ok_or("path is not UTF-8")?.to_owned();
    let count = PER_PROCESS.to_string();

    let args = ["append", db.as_str(), id.as_str(), count.as_str()];
    let local = async {
        let mut mine = Vec::new();
        for n in 0..PER_PROCESS {
            mine.push(
                store
                    .append_event(AppendEvent::new(&id, "local", json!({"n": n})))
                    .await?
                    .sequence,
            );
        }
        Ok::<_, m3_types::Error>(mine)
    };
    let (a, b, mine) = tokio::join!(probe(&args), probe(&args), local);
    let mut all: Vec<u64> = mine?;
    for output in [a?, b?] {
        let text = String::from_utf8(output.stdout)?;
        let child: Vec<u64> = text.lines().map(str::parse).collect::<Result<_, _>>()?;
        assert_eq!(child.len() as u64, PER_PROCESS);
        assert!(child.windows(2).all(|w| w[0] < w[1]), "{child:?}");
        all.extend(child);
    }
    all.sort_unstable();
    assert_eq!(all, (1..=3 * PER_PROCESS).collect::<Vec<_>>());
    let events = store.list_events(&id, None).await?;
    assert_eq!(events.len() as u64, 3 * PER_PROCESS + 1);
    Ok(())
}
