//! Execution store: creation, reads, lifecycle transitions, finish, cancel and
//! the event log, on real SQLite files.

mod store_execution_support;

use std::time::Duration;

use m3_store::{
    EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_STATE_CHANGED,
    ExecutionStore, FinishExecution, ListExecutions, NewExecution,
};
use m3_types::{ErrorCode, ErrorInfo, ExecutionOutcome, ExecutionStatus, HumanInput};
use serde_json::json;
use store_execution_support::*;

const ALL: [ExecutionStatus; 8] = [
    ExecutionStatus::Created,
    ExecutionStatus::Queued,
    ExecutionStatus::Starting,
    ExecutionStatus::Idle,
    ExecutionStatus::RunningTurn,
    ExecutionStatus::WaitingForInput,
    ExecutionStatus::Closing,
    ExecutionStatus::Finished,
];

/// The reference's transition table (anchor-managed-input.md 2.8).
fn allowed(from: ExecutionStatus, to: ExecutionStatus) -> bool {
    use ExecutionStatus::*;
    matches!(
        (from, to),
        (Created, Queued | Starting | Finished)
            | (Queued, Starting | Finished)
            | (Starting, Idle | RunningTurn | Closing | Finished)
            | (Idle, RunningTurn | Closing | Finished)
            | (RunningTurn, Idle | WaitingForInput | Closing | Finished)
            | (WaitingForInput, RunningTurn | Closing | Finished)
            | (Closing, Finished)
    )
}

/// Shortest path of allowed transitions from `created` to `target`.
fn path_to(target: ExecutionStatus) -> Vec<ExecutionStatus> {
    use ExecutionStatus::*;
    match target {
        Created => vec![],
        Queued => vec![Queued],
        Starting => vec![Starting],
        Idle => vec![Starting, Idle],
        RunningTurn => vec![Starting, RunningTurn],
        WaitingForInput => vec![Starting, RunningTurn, WaitingForInput],
        Closing => vec![Starting, Closing],
        Finished => vec![],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn created_execution_reads_back_with_its_created_event() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create_managed(&store).await?;
    assert_eq!(record.lifecycle, ExecutionStatus::Created);
    assert_eq!(record.human_input, HumanInput::Managed);
    assert_eq!(record.spec, json!({"prompt": "ask me"}));
    assert_eq!(record.outcome, None);
    assert_eq!(record.sequence, 0);
    assert_eq!(record.created_at, START);
    assert!(record.lease.is_none() && !record.is_cancel_requested() && !record.is_finished());
    assert_eq!(record.execution_id.len(), 26, "ULID text");

    let read = store.get_execution(&record.execution_id).await?;
    assert_eq!(read.as_ref(), Some(&record));
    assert_eq!(store.get_execution("missing").await?, None);

    let events = store.list_events(&record.execution_id, None).await?;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].sequence, 0);
    assert_eq!(events[0].kind, EVENT_EXECUTION_CREATED);
    assert_eq!(events[0].payload["lifecycle"], "created");
    assert_eq!(events[0].payload["human_input"], "managed");
    assert_eq!(events[0].timestamp, START);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn create_with_chosen_id_is_idempotent_and_conflicts_on_other_data() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let new = NewExecution::new(json!({"b": 2, "a": 1})).with_execution_id("exec-1");
    let first = store.create_execution(new.clone()).await?;
    // Same spec with another key order is the same canonical JSON.
    let again = store
        .create_execution(NewExecution::new(json!({"a": 1, "b": 2})).with_execution_id("exec-1"))
        .await?;
    assert_eq!(first, again);
    assert_eq!(store.list_events("exec-1", None).await?.len(), 1);

    assert_code(
        store
            .create_execution(NewExecution::new(json!({"a": 2})).with_execution_id("exec-1"))
            .await,
        "managed_input_conflict",
    );
    assert_code(
        store
            .create_execution(new.clone().with_human_input(HumanInput::Managed))
            .await,
        "managed_input_conflict",
    );
    assert_code(
        store
            .create_execution(NewExecution::new(json!({})).with_execution_id("  "))
            .await,
        "invalid_argument",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn list_executions_filters_and_orders_oldest_first() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let a = create(&store).await?;
    fx.clock.advance_std(Duration::from_secs(1));
    let b = create_managed(&store).await?;
    fx.clock.advance_std(Duration::from_secs(1));
    let c = create(&store).await?;
    store
        .transition(&c.execution_id, ExecutionStatus::Queued, None)
        .await?;

    let all = store.list_executions(ListExecutions::new()).await?;
    let ids: Vec<_> = all.iter().map(|r| r.execution_id.as_str()).collect();
    assert_eq!(ids, [&a.execution_id, &b.execution_id, &c.execution_id]);

    let managed = store
        .list_executions(ListExecutions::new().with_human_input(HumanInput::Managed))
        .await?;
    assert_eq!(managed.len(), 1);
    assert_eq!(managed[0].execution_id, b.execution_id);

    let queued = store
        .list_executions(ListExecutions::new().with_lifecycle(ExecutionStatus::Queued))
        .await?;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].execution_id, c.execution_id);

    let limited = store
        .list_executions(ListExecutions::new().with_limit(2))
        .await?;
    assert_eq!(limited.len(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn transition_table_is_enforced_for_every_pair() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    for from in ALL {
        for to in ALL {
            let record = create(&store).await?;
            let id = record.execution_id.as_str();
            if from == ExecutionStatus::Finished {
                store
                    .finish(FinishExecution::new(id, ExecutionOutcome::Completed))
                    .await?;
            } else {
                for step in path_to(from) {
                    store.transition(id, step, None).await?;
                }
            }
            let before = store.list_events(id, None).await?.len();
            let result = store.transition(id, to, None).await;
            if allowed(from, to) && to != ExecutionStatus::Finished {
                let record = result?;
                assert_eq!(record.lifecycle, to, "{from:?} -> {to:?}");
                let events = store.list_events(id, None).await?;
                assert_eq!(events.len(), before + 1);
                let last = &events[before];
                assert_eq!(last.kind, EVENT_EXECUTION_STATE_CHANGED);
                assert_eq!(last.payload, json!({"lifecycle": to.as_str()}));
                assert_eq!(record.sequence, last.sequence);
            } else {
                let err = assert_code(result, "invalid_argument");
                assert_eq!(
                    err.details()["code"],
                    "invalid_transition",
                    "{from:?} -> {to:?}"
                );
                assert_eq!(err.details()["reason"], "invalid_transition");
                let unchanged = store.get_execution(id).await?.ok_or("missing")?;
                assert_eq!(unchanged.lifecycle, from);
                assert_eq!(store.list_events(id, None).await?.len(), before);
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn transition_of_a_missing_execution_is_a_conflict() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    assert_code(
        store
            .transition("nope", ExecutionStatus::Queued, None)
            .await,
        "managed_input_conflict",
    );
    Ok(())
}

fn sample_error() -> ErrorInfo {
    ErrorInfo::new(ErrorCode::Timeout, "execution timed out")
}

#[tokio::test(flavor = "multi_thread")]
async fn finish_happens_once_and_is_idempotent_for_identical_data() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let id = record.execution_id.as_str();
    store
        .transition(id, ExecutionStatus::Starting, None)
        .await?;
    fx.clock.advance_std(Duration::from_secs(5));

    let request = FinishExecution::new(id, ExecutionOutcome::TimedOut).with_error(sample_error());
    let finished = store.finish(request.clone()).await?;
    assert_eq!(finished.lifecycle, ExecutionStatus::Finished);
    assert_eq!(finished.outcome, Some(ExecutionOutcome::TimedOut));
    assert_eq!(finished.error, Some(sample_error()));
    assert_eq!(finished.finished_at, Some(START + Duration::from_secs(5)));

    let events = store.list_events(id, None).await?;
    let last = events.last().ok_or("no events")?;
    assert_eq!(last.kind, EVENT_EXECUTION_FINISHED);
    assert_eq!(last.payload["outcome"], "timed_out");
    assert_eq!(last.payload["error"]["code"], "timeout");

    fx.clock.advance_std(Duration::from_secs(5));
    let again = store.finish(request).await?;
    assert_eq!(
        again, finished,
        "identical finish returns the stored record"
    );
    assert_eq!(store.list_events(id, None).await?.len(), events.len());

    assert_code(
        store
            .finish(FinishExecution::new(id, ExecutionOutcome::Completed))
            .await,
        "managed_input_state",
    );
    assert_code(
        store
            .finish(FinishExecution::new(id, ExecutionOutcome::TimedOut))
            .await,
        "managed_input_state",
    );
    assert_code(
        store
            .finish(FinishExecution::new("nope", ExecutionOutcome::Completed))
            .await,
        "managed_input_conflict",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn appended_events_get_consecutive_sequences_and_page_by_after_sequence() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let id = record.execution_id.as_str();
    for n in 1..=5_u64 {
        let event = store
            .append_event(id, "diagnostic", json!({"n": n}), None)
            .await?;
        assert_eq!(event.sequence, n);
        assert_eq!(event.payload, json!({"n": n}));
    }
    let all = store.list_events(id, None).await?;
    let sequences: Vec<u64> = all.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [0, 1, 2, 3, 4, 5]);
    let tail = store.list_events(id, Some(3)).await?;
    assert_eq!(tail.iter().map(|e| e.sequence).collect::<Vec<_>>(), [4, 5]);
    assert!(store.list_events(id, Some(5)).await?.is_empty());
    assert!(store.list_events("missing", None).await?.is_empty());
    assert_eq!(store.get_execution(id).await?.ok_or("missing")?.sequence, 5);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn append_event_refuses_bad_kinds_missing_and_finished_executions() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let id = record.execution_id.as_str();
    assert_code(
        store.append_event(id, "", json!({}), None).await,
        "invalid_argument",
    );
    for reserved in [
        EVENT_EXECUTION_CREATED,
        EVENT_EXECUTION_STATE_CHANGED,
        EVENT_EXECUTION_FINISHED,
    ] {
        assert_code(
            store.append_event(id, reserved, json!({}), None).await,
            "invalid_argument",
        );
    }
    assert_code(
        store
            .append_event("missing", "diagnostic", json!({}), None)
            .await,
        "managed_input_conflict",
    );
    store
        .finish(FinishExecution::new(id, ExecutionOutcome::Cancelled))
        .await?;
    assert_code(
        store.append_event(id, "diagnostic", json!({}), None).await,
        "managed_input_state",
    );
    let events = store.list_events(id, None).await?;
    assert_eq!(
        events.last().map(|e| e.kind.as_str()),
        Some(EVENT_EXECUTION_FINISHED)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_append_only_in_the_database() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let updated = sqlx::query("UPDATE m3rs_execution_events SET kind = 'x' WHERE execution_id = ?")
        .bind(&record.execution_id)
        .execute(store.pool())
        .await;
    let err = updated.err().ok_or("update of an event succeeded")?;
    assert!(err.to_string().contains("append-only"), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_request_keeps_the_first_reason_and_ignores_finished() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let id = record.execution_id.as_str();
    assert!(!store.is_cancel_requested(id).await?);
    let cancelled = store
        .request_cancel(id, Some("caller requested cancellation"))
        .await?;
    assert!(cancelled.is_cancel_requested());
    assert_eq!(cancelled.cancel_requested_at, Some(START));
    fx.clock.advance_std(Duration::from_secs(1));
    let again = store.request_cancel(id, Some("second")).await?;
    assert_eq!(
        again.cancel_reason.as_deref(),
        Some("caller requested cancellation")
    );
    assert_eq!(again.cancel_requested_at, Some(START));
    assert!(store.is_cancel_requested(id).await?);

    let other = create(&store).await?;
    store
        .finish(FinishExecution::new(
            &other.execution_id,
            ExecutionOutcome::Completed,
        ))
        .await?;
    let after = store.request_cancel(&other.execution_id, None).await?;
    assert!(
        !after.is_cancel_requested(),
        "cancelling a finished execution is a no-op"
    );

    assert_code(
        store.request_cancel("missing", None).await,
        "managed_input_conflict",
    );
    assert_code(
        store.is_cancel_requested("missing").await,
        "managed_input_conflict",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn reopened_store_reads_the_same_executions() -> TestResult {
    let fx = Fixture::new()?;
    let record = {
        let store = fx.open().await?;
        let record = create(&store).await?;
        store
            .finish(
                FinishExecution::new(&record.execution_id, ExecutionOutcome::Failed)
                    .with_error(sample_error()),
            )
            .await?
    };
    let reopened = fx.open().await?;
    assert_eq!(
        reopened.get_execution(&record.execution_id).await?,
        Some(record)
    );
    Ok(())
}
