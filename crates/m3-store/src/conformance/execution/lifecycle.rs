//! Creation, reads, the lifecycle table, finish, cancel and the event log.

use std::time::Duration;

use m3_types::{ExecutionOutcome, ExecutionStatus, HumanInput, Reason};
use serde_json::json;

use super::ExecutionHarness;
use super::support::{
    CONFLICT, INVALID_ARGUMENT, NOT_FOUND, STATE, Step, advance, create, create_managed, read,
    sample_error,
};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::{CaseResult, start_time};
use crate::{
    AppendEvent, EVENT_EXECUTION_CREATED, EVENT_EXECUTION_FINISHED, EVENT_EXECUTION_STATE_CHANGED,
    FinishExecution, ListExecutions, NewExecution,
};

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

/// The reference's transition table, written out independently of
/// `ExecutionStatus::can_transition_to`.
fn allowed(from: ExecutionStatus, to: ExecutionStatus) -> bool {
    use ExecutionStatus::*;
    matches!(
        (from, to),
        (Created, Queued | Starting)
            | (Queued, Starting)
            | (Starting, Idle | RunningTurn | Closing)
            | (Idle, RunningTurn | Closing)
            | (RunningTurn, Idle | WaitingForInput | Closing)
            | (WaitingForInput, RunningTurn | Closing)
    )
}

/// The shortest path of allowed transitions from `created` to `target`.
fn path_to(target: ExecutionStatus) -> Vec<ExecutionStatus> {
    use ExecutionStatus::*;
    match target {
        Queued => vec![Queued],
        Starting => vec![Starting],
        Idle => vec![Starting, Idle],
        RunningTurn => vec![Starting, RunningTurn],
        WaitingForInput => vec![Starting, RunningTurn, WaitingForInput],
        Closing => vec![Starting, Closing],
        _ => vec![],
    }
}

/// A new execution is `created`, unleased, with its `execution.created` event at sequence 0.
pub async fn created_execution_reads_back_with_its_created_event(
    h: &ExecutionHarness,
) -> CaseResult {
    let record = create_managed(h).await?;
    ensure!(
        record.lifecycle == ExecutionStatus::Created,
        "lifecycle {:?}",
        record.lifecycle
    );
    ensure!(record.human_input == HumanInput::Managed, "human_input");
    ensure!(
        record.spec == json!({"prompt": "ask me"}),
        "spec {}",
        record.spec
    );
    ensure!(
        record.outcome.is_none() && record.sequence == 0,
        "outcome or sequence"
    );
    ensure!(
        record.created_at == start_time(),
        "created_at {}",
        record.created_at
    );
    ensure!(
        record.lease.is_none() && !record.is_cancel_requested() && !record.is_finished(),
        "a new execution has no lease, no cancel and is not finished"
    );
    ensure!(!record.execution_id.is_empty(), "generated id");
    let read = h.store.get_execution(&record.execution_id).await?;
    ensure!(
        read.as_ref() == Some(&record),
        "read back differs: {read:?}"
    );
    ensure!(
        h.store.get_execution("missing").await?.is_none(),
        "missing is None"
    );
    let events = h.store.list_events(&record.execution_id, None).await?;
    ensure!(events.len() == 1, "one event, got {}", events.len());
    let event = &events[0];
    ensure!(
        event.sequence == 0
            && event.kind == EVENT_EXECUTION_CREATED
            && event.payload["lifecycle"] == "created"
            && event.payload["human_input"] == "managed"
            && event.timestamp == start_time(),
        "unexpected created event {event:?}"
    );
    Ok(())
}

/// A chosen id makes creation idempotent for the same canonical spec; other data conflicts.
pub async fn create_with_chosen_id_is_idempotent_and_conflicts_on_other_data(
    h: &ExecutionHarness,
) -> CaseResult {
    let new = NewExecution::new(json!({"b": 2, "a": 1})).with_execution_id("exec-1");
    let first = h.store.create_execution(new.clone()).await?;
    let again = h
        .peer
        .create_execution(NewExecution::new(json!({"a": 1, "b": 2})).with_execution_id("exec-1"))
        .await?;
    ensure!(
        first == again,
        "same canonical spec must return the stored record"
    );
    ensure!(
        h.store.list_events("exec-1", None).await?.len() == 1,
        "one created event"
    );
    for other in [
        NewExecution::new(json!({"a": 2})).with_execution_id("exec-1"),
        new.clone().with_human_input(HumanInput::Managed),
    ] {
        expect_error(
            h.store.create_execution(other).await,
            CONFLICT,
            Some(Reason::IdConflict),
        )?;
    }
    expect_error(
        h.store
            .create_execution(NewExecution::new(json!({})).with_execution_id("  "))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::EmptyArgument),
    )?;
    Ok(())
}

/// Listing is oldest first and filters by lifecycle, human input and limit.
pub async fn list_executions_filters_and_orders_oldest_first(h: &ExecutionHarness) -> CaseResult {
    let a = create(h).await?;
    advance(h, Duration::from_secs(1));
    let b = create_managed(h).await?;
    advance(h, Duration::from_secs(1));
    let c = create(h).await?;
    h.store
        .transition(&c.execution_id, ExecutionStatus::Queued, None)
        .await?;
    let ids = |records: Vec<crate::ExecutionRecord>| {
        records
            .into_iter()
            .map(|r| r.execution_id)
            .collect::<Vec<_>>()
    };
    let all = ids(h.store.list_executions(ListExecutions::new()).await?);
    ensure!(
        all == [
            a.execution_id.clone(),
            b.execution_id.clone(),
            c.execution_id.clone()
        ],
        "oldest first: {all:?}"
    );
    let managed = ids(h
        .store
        .list_executions(ListExecutions::new().with_human_input(HumanInput::Managed))
        .await?);
    ensure!(managed == [b.execution_id], "managed filter: {managed:?}");
    let queued = ids(h
        .store
        .list_executions(ListExecutions::new().with_lifecycle(ExecutionStatus::Queued))
        .await?);
    ensure!(queued == [c.execution_id], "lifecycle filter: {queued:?}");
    let limited = h
        .store
        .list_executions(ListExecutions::new().with_limit(2))
        .await?;
    ensure!(limited.len() == 2, "limit: {}", limited.len());
    Ok(())
}

async fn bring_to(h: &ExecutionHarness, from: ExecutionStatus) -> Step<String> {
    let id = create(h).await?.execution_id;
    if from == ExecutionStatus::Finished {
        h.store
            .finish(FinishExecution::new(&id, ExecutionOutcome::Completed))
            .await?;
    } else {
        for step in path_to(from) {
            h.store.transition(&id, step, None).await?;
        }
    }
    Ok(id)
}

/// Every `(from, to)` pair: allowed moves change the lifecycle and append
/// `execution.state_changed`; refused ones change nothing.
pub async fn transition_table_is_enforced_for_every_pair(h: &ExecutionHarness) -> CaseResult {
    for from in ALL {
        for to in ALL {
            let id = bring_to(h, from).await?;
            let before = h.store.list_events(&id, None).await?.len();
            let result = h.store.transition(&id, to, None).await;
            if allowed(from, to) {
                let record = result?;
                let events = h.store.list_events(&id, None).await?;
                let last = events.last();
                ensure!(
                    record.lifecycle == to
                        && events.len() == before + 1
                        && last.is_some_and(|e| e.kind == EVENT_EXECUTION_STATE_CHANGED
                            && e.payload == json!({"lifecycle": to.as_str()})
                            && e.sequence == record.sequence),
                    "{from:?} -> {to:?}: wrong record or event"
                );
            } else {
                let error =
                    expect_error(result, INVALID_ARGUMENT, Some(Reason::InvalidTransition))?;
                ensure!(
                    error.details()["code"] == "invalid_transition",
                    "{from:?} -> {to:?}: detail code"
                );
                ensure!(
                    read(h, &id).await?.lifecycle == from,
                    "{from:?} -> {to:?} changed the lifecycle"
                );
                ensure!(
                    h.store.list_events(&id, None).await?.len() == before,
                    "{from:?} -> {to:?} appended an event"
                );
            }
        }
    }
    Ok(())
}

/// Every write on an execution that does not exist is `not_found`.
pub async fn operations_on_a_missing_execution_are_not_found(h: &ExecutionHarness) -> CaseResult {
    let s = &h.store;
    expect_error(
        s.transition("nope", ExecutionStatus::Queued, None).await,
        NOT_FOUND,
        None,
    )?;
    expect_error(
        s.finish(FinishExecution::new("nope", ExecutionOutcome::Completed))
            .await,
        NOT_FOUND,
        None,
    )?;
    expect_error(
        s.append_event(AppendEvent::new("nope", "diagnostic", json!({})))
            .await,
        NOT_FOUND,
        None,
    )?;
    expect_error(s.request_cancel("nope", None).await, NOT_FOUND, None)?;
    expect_error(s.is_cancel_requested("nope").await, NOT_FOUND, None)?;
    expect_error(super::support::lease(h, "nope", "w").await, NOT_FOUND, None)?;
    ensure!(
        s.list_events("nope", None).await?.is_empty(),
        "no events for a missing execution"
    );
    Ok(())
}

/// `finish` happens once; repeating it with identical data returns the stored record;
/// other data is a state error.
pub async fn finish_happens_once_and_is_idempotent_for_identical_data(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    h.store
        .transition(&id, ExecutionStatus::Starting, None)
        .await?;
    advance(h, Duration::from_secs(5));
    let request = FinishExecution::new(&id, ExecutionOutcome::TimedOut).with_error(sample_error());
    let finished = h.store.finish(request.clone()).await?;
    ensure!(
        finished.lifecycle == ExecutionStatus::Finished
            && finished.outcome == Some(ExecutionOutcome::TimedOut)
            && finished.error == Some(sample_error())
            && finished.finished_at == Some(start_time() + Duration::from_secs(5)),
        "unexpected finished record {finished:?}"
    );
    let events = h.store.list_events(&id, None).await?;
    let last = events.last();
    ensure!(
        last.is_some_and(|e| e.kind == EVENT_EXECUTION_FINISHED
            && e.payload["outcome"] == "timed_out"
            && e.payload["error"]["code"] == "timeout"),
        "unexpected finished event {last:?}"
    );
    advance(h, Duration::from_secs(5));
    let again = h.peer.finish(request).await?;
    ensure!(
        again == finished,
        "identical finish must return the stored record"
    );
    ensure!(
        h.store.list_events(&id, None).await?.len() == events.len(),
        "no new event"
    );
    for other in [
        FinishExecution::new(&id, ExecutionOutcome::Completed),
        FinishExecution::new(&id, ExecutionOutcome::TimedOut),
    ] {
        expect_error(
            h.store.finish(other).await,
            STATE,
            Some(Reason::FinishedDifferently),
        )?;
    }
    Ok(())
}

/// Appends get 1, 2, 3, ... after the created event; `after_sequence` pages.
pub async fn appended_events_get_consecutive_sequences_and_page(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    for n in 1..=5_u64 {
        let event = h
            .store
            .append_event(AppendEvent::new(&id, "diagnostic", json!({"n": n})))
            .await?;
        ensure!(
            event.sequence == n && event.payload == json!({"n": n}),
            "event {event:?}"
        );
    }
    let sequences = |events: Vec<crate::ExecutionEvent>| {
        events.into_iter().map(|e| e.sequence).collect::<Vec<_>>()
    };
    let all = sequences(h.store.list_events(&id, None).await?);
    ensure!(all == [0, 1, 2, 3, 4, 5], "sequences {all:?}");
    let tail = sequences(h.peer.list_events(&id, Some(3)).await?);
    ensure!(tail == [4, 5], "page after 3: {tail:?}");
    ensure!(
        h.store.list_events(&id, Some(5)).await?.is_empty(),
        "nothing after the last"
    );
    ensure!(read(h, &id).await?.sequence == 5, "record sequence");
    Ok(())
}

/// Empty and reserved kinds are refused; a finished execution's log ends with
/// `execution.finished`.
pub async fn append_event_refuses_bad_kinds_and_finished_executions(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    expect_error(
        h.store
            .append_event(AppendEvent::new(&id, "", json!({})))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::EmptyArgument),
    )?;
    for reserved in [
        EVENT_EXECUTION_CREATED,
        EVENT_EXECUTION_STATE_CHANGED,
        EVENT_EXECUTION_FINISHED,
    ] {
        expect_error(
            h.store
                .append_event(AppendEvent::new(&id, reserved, json!({})))
                .await,
            INVALID_ARGUMENT,
            Some(Reason::ReservedEventKind),
        )?;
    }
    h.store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
        .await?;
    expect_error(
        h.store
            .append_event(AppendEvent::new(&id, "diagnostic", json!({})))
            .await,
        STATE,
        Some(Reason::Finished),
    )?;
    let events = h.store.list_events(&id, None).await?;
    ensure!(
        events
            .last()
            .is_some_and(|e| e.kind == EVENT_EXECUTION_FINISHED),
        "the log must end with execution.finished"
    );
    Ok(())
}

/// The first cancel request's time and reason are kept; cancelling a finished execution is
/// a no-op.
pub async fn cancel_request_keeps_the_first_reason_and_ignores_finished(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    ensure!(
        !h.store.is_cancel_requested(&id).await?,
        "not cancelled yet"
    );
    let cancelled = h
        .store
        .request_cancel(&id, Some("caller requested cancellation"))
        .await?;
    ensure!(
        cancelled.cancel_requested_at == Some(start_time()),
        "cancel time"
    );
    advance(h, Duration::from_secs(1));
    let again = h.peer.request_cancel(&id, Some("second")).await?;
    ensure!(
        again.cancel_reason.as_deref() == Some("caller requested cancellation")
            && again.cancel_requested_at == Some(start_time()),
        "the first request must be kept: {again:?}"
    );
    ensure!(h.store.is_cancel_requested(&id).await?, "cancel flag");
    let other = create(h).await?.execution_id;
    h.store
        .finish(FinishExecution::new(&other, ExecutionOutcome::Completed))
        .await?;
    let after = h.store.request_cancel(&other, None).await?;
    ensure!(
        !after.is_cancel_requested(),
        "cancelling a finished execution is a no-op"
    );
    Ok(())
}

/// The peer store object reads what the store wrote.
pub async fn a_peer_reads_the_same_executions(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let record = h
        .store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Failed).with_error(sample_error()))
        .await?;
    let read = h.peer.get_execution(&id).await?;
    ensure!(
        read == Some(record),
        "the peer reads another record: {read:?}"
    );
    ensure!(
        h.peer.list_events(&id, None).await? == h.store.list_events(&id, None).await?,
        "the peer reads other events"
    );
    Ok(())
}
