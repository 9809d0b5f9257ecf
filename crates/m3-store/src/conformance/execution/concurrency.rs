//! Concurrent writers through the store and its peer.

use std::collections::BTreeSet;
use std::sync::Arc;

use m3_types::ExecutionStatus;
use serde_json::json;

use super::ExecutionHarness;
use super::support::{CONFLICT, TTL, create};
use crate::conformance::CaseFailure;
use crate::conformance::CaseResult;
use crate::conformance::check::ensure;
use crate::{AcquireLease, AppendEvent, ExecutionStore};

fn stores(h: &ExecutionHarness) -> [Arc<dyn ExecutionStore>; 2] {
    [Arc::clone(&h.store), Arc::clone(&h.peer)]
}

fn joined<T>(result: Result<T, tokio::task::JoinError>) -> Result<T, CaseFailure> {
    result.map_err(|e| CaseFailure::new(format!("a concurrent task failed: {e}")))
}

/// Appenders racing on two store objects get distinct, gap-free sequences, each in order.
pub async fn concurrent_appenders_get_distinct_gap_free_sequences(
    h: &ExecutionHarness,
) -> CaseResult {
    const TASKS: u64 = 6;
    const PER_TASK: u64 = 10;
    let id = create(h).await?.execution_id;
    let both = stores(h);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&both[(task % 2) as usize]);
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for n in 0..PER_TASK {
                let event = store
                    .append_event(AppendEvent::new(
                        &id,
                        "diagnostic",
                        json!({"task": task, "n": n}),
                    ))
                    .await?;
                mine.push(event.sequence);
            }
            Ok::<_, m3_types::Error>(mine)
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        let mine = joined(task.await)??;
        ensure!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "a task's appends out of order: {mine:?}"
        );
        for sequence in mine {
            ensure!(all.insert(sequence), "sequence {sequence} handed out twice");
        }
    }
    ensure!(
        all == (1..=TASKS * PER_TASK).collect::<BTreeSet<_>>(),
        "sequences have gaps"
    );
    let listed: Vec<u64> = h
        .peer
        .list_events(&id, None)
        .await?
        .iter()
        .map(|e| e.sequence)
        .collect();
    ensure!(
        listed == (0..=TASKS * PER_TASK).collect::<Vec<_>>(),
        "listed sequences {listed:?}"
    );
    Ok(())
}

/// Workers racing for one execution: exactly one wins, the others get a conflict.
pub async fn racing_workers_get_exactly_one_lease(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let both = stores(h);
    let tasks: Vec<_> = (0..6_usize)
        .map(|worker| {
            let store = Arc::clone(&both[worker % 2]);
            let id = id.clone();
            tokio::spawn(async move {
                store
                    .acquire_lease(AcquireLease::new(&id, format!("worker-{worker}"), TTL))
                    .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match joined(task.await)? {
            Ok(lease) => winners.push(lease),
            Err(error) => ensure!(error.code() == CONFLICT, "unexpected error {error}"),
        }
    }
    ensure!(winners.len() == 1, "winners: {winners:?}");
    let stored = h.peer.get_execution(&id).await?.and_then(|r| r.lease);
    ensure!(
        stored.as_ref() == winners.first(),
        "the stored lease is not the winner's"
    );
    Ok(())
}

/// The same transition raced six times applies once and appends one event.
pub async fn racing_transitions_apply_once(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let both = stores(h);
    let tasks: Vec<_> = (0..6_usize)
        .map(|n| {
            let store = Arc::clone(&both[n % 2]);
            let id = id.clone();
            tokio::spawn(async move { store.transition(&id, ExecutionStatus::Queued, None).await })
        })
        .collect();
    let mut applied = 0;
    for task in tasks {
        match joined(task.await)? {
            Ok(_) => applied += 1,
            Err(error) => ensure!(
                error.reason() == Some(m3_types::Reason::InvalidTransition),
                "unexpected error {error}"
            ),
        }
    }
    ensure!(applied == 1, "applied {applied} times");
    ensure!(
        h.store.list_events(&id, None).await?.len() == 2,
        "one state_changed event"
    );
    Ok(())
}
