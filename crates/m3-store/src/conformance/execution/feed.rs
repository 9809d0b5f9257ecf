//! The change feed: one record per state change, in the same step as the change, in
//! commit order; exact resume by cursor; bad cursors refused; retention.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{
    ChangeRecord, ChangeRecordKind, Cursor, ExecutionOutcome, ExecutionStatus, ManagedInputStatus,
    Reason,
};

use super::ExecutionHarness;
use super::support::{INVALID_ARGUMENT, Step, TTL, advance, create, create_managed};
use crate::conformance::CaseResult;
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::fixture::{address_round, submission};
use crate::{
    ClaimQueued, CreateRound, ExecutionStore, FinishExecution, LeaseRef, PruneChanges, RoundRef,
};

/// Every record after `after`, read in pages of `page`.
async fn read_all(
    store: &dyn ExecutionStore,
    after: Cursor,
    page: usize,
) -> Step<Vec<ChangeRecord>> {
    let mut records = Vec::new();
    let mut cursor = after;
    loop {
        let read = store.read_changes(cursor, page).await?;
        if read.records.is_empty() {
            ensure!(read.next == cursor, "an empty page moved the cursor");
            return Ok(records);
        }
        ensure!(read.records.len() <= page, "a page over its limit");
        cursor = read.next;
        records.extend(read.records);
    }
}

/// The newest cursor now (`START` on an empty feed).
async fn newest(store: &dyn ExecutionStore) -> Step<Cursor> {
    Ok(read_all(store, Cursor::START, 1_000)
        .await?
        .last()
        .map_or(Cursor::START, |r| r.cursor))
}

fn kinds(records: &[ChangeRecord]) -> Vec<&'static str> {
    records.iter().map(|r| r.kind.as_str()).collect()
}

/// A managed execution's whole life, from queue to finish with one answered round, appends
/// exactly the expected records, in order, with their ids, store times and states; the
/// peer store reads the same records; none carries an answer.
pub async fn every_change_appends_one_record_in_commit_order(h: &ExecutionHarness) -> CaseResult {
    let id = create_managed(h).await?.execution_id;
    h.store
        .transition(&id, ExecutionStatus::Queued, None)
        .await?;
    advance(h, Duration::from_millis(5));
    let claimed = h
        .store
        .claim_queued(ClaimQueued::new("worker-a", TTL))
        .await?
        .ok_or_else(|| crate::conformance::CaseFailure::new("nothing claimed"))?;
    let lease = claimed.lease.to_ref();
    h.store.renew_lease(&lease, TTL).await?;
    h.store
        .transition(&id, ExecutionStatus::RunningTurn, Some(&lease))
        .await?;
    let waiting = h
        .store
        .transition(&id, ExecutionStatus::WaitingForInput, Some(&lease))
        .await?;
    let rounds = h.store.managed_input_store().await?;
    advance(h, Duration::from_millis(5));
    let round = rounds
        .create_round(CreateRound::new(address_round(&id, "r0"), "worker-a", TTL))
        .await?;
    let (round_ref, round_lease) = (RoundRef::of(&round), LeaseRef::of(&round.lease));
    rounds.renew(&round_ref, &round_lease, TTL).await?;
    advance(h, Duration::from_millis(5));
    let answered = rounds
        .submit_responses(&round_ref, &round_lease, submission("k1"))
        .await?;
    // An idempotent repeat changes nothing and appends nothing.
    rounds
        .submit_responses(&round_ref, &round_lease, submission("k1"))
        .await?;
    rounds.start_delivery(&round_ref, &round_lease).await?;
    rounds.mark_delivered(&round_ref, &round_lease).await?;
    rounds.resolve(&round_ref, &round_lease).await?;
    h.store
        .transition(&id, ExecutionStatus::RunningTurn, Some(&lease))
        .await?;
    h.store.request_cancel(&id, Some("stop")).await?;
    h.store.request_cancel(&id, Some("again")).await?;
    advance(h, Duration::from_millis(5));
    let finished = h
        .store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled).with_lease(lease))
        .await?;

    let records = read_all(h.store.as_ref(), Cursor::START, 1_000).await?;
    let expected = [
        "execution.queued",
        "execution.claimed",
        "execution.waiting_for_input",
        "round.pending",
        "round.answered",
        "round.delivery_started",
        "round.delivered",
        "round.resolved",
        "execution.cancel_requested",
        "execution.finished",
    ];
    ensure!(kinds(&records) == expected, "kinds {:?}", kinds(&records));
    let cursors: Vec<Cursor> = records.iter().map(|r| r.cursor).collect();
    ensure!(
        cursors.windows(2).all(|w| w[0] < w[1]) && cursors[0] > Cursor::START,
        "cursors {cursors:?} do not grow"
    );
    for record in &records {
        ensure!(
            record.execution_id == id,
            "record of {}",
            record.execution_id
        );
        ensure!(record.actor.is_none(), "an actor nobody recorded");
        ensure!(
            record.round_id.is_some() == record.kind.is_round()
                && record.round.is_some() == record.kind.is_round()
                && record.execution.is_some() != record.kind.is_round(),
            "{} carries the wrong subject",
            record.kind
        );
    }
    let at = |kind: &str| {
        records
            .iter()
            .find(|r| r.kind.as_str() == kind)
            .map(|r| r.at)
    };
    ensure!(
        at("execution.claimed") == Some(claimed.record.updated_at),
        "claimed at"
    );
    ensure!(
        at("execution.waiting_for_input") == Some(waiting.updated_at),
        "waiting at"
    );
    ensure!(at("round.pending") == Some(round.updated_at), "pending at");
    ensure!(
        at("round.answered") == Some(answered.updated_at),
        "answered at"
    );
    ensure!(
        at("execution.finished") == Some(finished.updated_at),
        "finished at"
    );
    let answered_record = records
        .iter()
        .find(|r| r.kind == ChangeRecordKind::RoundAnswered);
    let state = answered_record.and_then(|r| r.round.clone());
    ensure!(
        state
            .as_ref()
            .is_some_and(|s| s.status == ManagedInputStatus::ResponseValidated
                && s.round_index == 0
                && s.server == round.pending.server
                && s.operation_kind == Some(round.pending.operation_kind)
                && s.operation_name == round.pending.operation_name
                && s.failure_code.is_none()),
        "round state {state:?}"
    );
    let last = records.last().and_then(|r| r.execution);
    ensure!(
        last.is_some_and(|s| s.lifecycle == ExecutionStatus::Finished
            && s.outcome == Some(ExecutionOutcome::Cancelled)),
        "finished state {last:?}"
    );
    let text = serde_json::to_string(&records).unwrap_or_default();
    ensure!(
        !text.contains("1 Main Street"),
        "a record carries the answer"
    );
    let peer = read_all(h.peer.as_ref(), Cursor::START, 3).await?;
    ensure!(peer == records, "the peer reads another feed");
    Ok(())
}

/// Reading from every cursor, with every page size, gives exactly the records after it.
pub async fn a_reader_resumes_exactly_once_from_any_cursor(h: &ExecutionHarness) -> CaseResult {
    for _ in 0..4 {
        let id = create(h).await?.execution_id;
        h.store
            .transition(&id, ExecutionStatus::Queued, None)
            .await?;
        h.store.request_cancel(&id, None).await?;
    }
    let all = read_all(h.store.as_ref(), Cursor::START, 1_000).await?;
    ensure!(all.len() == 8, "{} records", all.len());
    for page in [1, 2, 3, 7] {
        for (index, record) in all.iter().enumerate() {
            let rest = read_all(h.peer.as_ref(), record.cursor, page).await?;
            ensure!(
                rest == all[index + 1..],
                "resume after {} (page {page})",
                record.cursor
            );
        }
    }
    Ok(())
}

/// A refused change appends nothing; a renewal and a claim of nothing append nothing
/// either.
pub async fn a_refused_change_appends_nothing(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let before = newest(h.store.as_ref()).await?;
    let refused = h
        .store
        .transition(&id, ExecutionStatus::WaitingForInput, None)
        .await;
    ensure!(
        refused.is_err(),
        "a created execution went to waiting_for_input"
    );
    ensure!(
        h.store
            .claim_queued(ClaimQueued::new("worker-a", TTL))
            .await?
            .is_none(),
        "claimed a created execution"
    );
    let rounds = h.store.managed_input_store().await?;
    let round = rounds
        .create_round(CreateRound::new(address_round(&id, "r0"), "worker-a", TTL))
        .await?;
    let after_create = newest(h.store.as_ref()).await?;
    let wrong = LeaseRef::new("worker-b", "not-the-token");
    let refused = rounds
        .submit_responses(&RoundRef::of(&round), &wrong, submission("k1"))
        .await;
    ensure!(refused.is_err(), "a wrong lease answered");
    rounds
        .renew(&RoundRef::of(&round), &LeaseRef::of(&round.lease), TTL)
        .await?;
    let after = newest(h.store.as_ref()).await?;
    let appended = read_all(h.store.as_ref(), before, 100).await?;
    ensure!(
        kinds(&appended) == ["round.pending"],
        "appended {:?}",
        kinds(&appended)
    );
    ensure!(
        after == after_create,
        "something after the round's creation appended"
    );
    Ok(())
}

/// Writers racing through both store objects get distinct cursors; the feed holds each
/// change once, and each reader sees them in the same order.
pub async fn concurrent_writers_get_distinct_cursors(h: &ExecutionHarness) -> CaseResult {
    let mut ids = Vec::new();
    for _ in 0..16 {
        ids.push(create(h).await?.execution_id);
    }
    let tasks: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(index, id)| {
            let store: Arc<dyn ExecutionStore> = if index % 2 == 0 {
                Arc::clone(&h.store)
            } else {
                Arc::clone(&h.peer)
            };
            let id = id.clone();
            tokio::spawn(async move {
                store.transition(&id, ExecutionStatus::Queued, None).await?;
                store.request_cancel(&id, None).await
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| {
            crate::conformance::CaseFailure::new(format!("a writer panicked: {e}"))
        })??;
    }
    let records = read_all(h.store.as_ref(), Cursor::START, 5).await?;
    ensure!(records.len() == 32, "{} records", records.len());
    let cursors: BTreeSet<Cursor> = records.iter().map(|r| r.cursor).collect();
    ensure!(cursors.len() == 32, "cursors repeat");
    for id in &ids {
        let own: Vec<&str> = records
            .iter()
            .filter(|r| &r.execution_id == id)
            .map(|r| r.kind.as_str())
            .collect();
        ensure!(
            own == ["execution.queued", "execution.cancel_requested"],
            "{id}: {own:?}"
        );
    }
    let peer = read_all(h.peer.as_ref(), Cursor::START, 7).await?;
    ensure!(peer == records, "the peer reads another order");
    Ok(())
}

/// A reader that keeps resuming from its last cursor while writers commit through both
/// store objects collects every record exactly once, in the order of a final full read:
/// no record commits behind a cursor a reader has already passed.
pub async fn a_reader_beside_concurrent_writers_misses_nothing(h: &ExecutionHarness) -> CaseResult {
    let mut ids = Vec::new();
    for _ in 0..24 {
        ids.push(create(h).await?.execution_id);
    }
    let writers: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(index, id)| {
            let store: Arc<dyn ExecutionStore> = if index % 2 == 0 {
                Arc::clone(&h.store)
            } else {
                Arc::clone(&h.peer)
            };
            let id = id.clone();
            tokio::spawn(async move {
                store.transition(&id, ExecutionStatus::Queued, None).await?;
                tokio::task::yield_now().await;
                store.request_cancel(&id, None).await
            })
        })
        .collect();
    let mut seen = Vec::new();
    let mut cursor = Cursor::START;
    loop {
        let done = writers.iter().all(tokio::task::JoinHandle::is_finished);
        let page = h.peer.read_changes(cursor, 5).await?;
        cursor = page.next;
        seen.extend(page.records);
        if done && cursor == newest(h.store.as_ref()).await? {
            break;
        }
        tokio::task::yield_now().await;
    }
    for writer in writers {
        writer.await.map_err(|e| {
            crate::conformance::CaseFailure::new(format!("a writer panicked: {e}"))
        })??;
    }
    let all = read_all(h.store.as_ref(), Cursor::START, 1_000).await?;
    ensure!(all.len() == 48, "{} records", all.len());
    ensure!(
        seen == all,
        "the following reader saw {} records, not the {}",
        seen.len(),
        all.len()
    );
    Ok(())
}

/// A page size outside the bounds and a cursor beyond the newest record are
/// `invalid_argument` with typed reasons, and change nothing.
pub async fn bad_pages_and_cursors_are_refused(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    h.store
        .transition(&id, ExecutionStatus::Queued, None)
        .await?;
    let newest = newest(h.store.as_ref()).await?;
    expect_error(
        h.store.read_changes(Cursor::START, 0).await,
        INVALID_ARGUMENT,
        Some(Reason::LimitExceeded),
    )?;
    expect_error(
        h.store
            .read_changes(Cursor::START, crate::changes::MAX_CHANGE_PAGE + 1)
            .await,
        INVALID_ARGUMENT,
        Some(Reason::LimitExceeded),
    )?;
    expect_error(
        h.store
            .read_changes(Cursor::new(newest.get() + 1), 10)
            .await,
        INVALID_ARGUMENT,
        Some(Reason::CursorInFuture),
    )?;
    let page = h.store.read_changes(newest, 10).await?;
    ensure!(
        page.records.is_empty() && page.next == newest,
        "a read at the end"
    );
    Ok(())
}

/// Pruning removes the records older than the given time and nothing else (a dry run
/// only counts); a reader behind what was removed gets `cursor_expired`, a reader at or
/// after it, or at the start, goes on.
pub async fn prune_removes_old_records_and_expires_cursors_behind_them(
    h: &ExecutionHarness,
) -> CaseResult {
    let old = create(h).await?.execution_id;
    h.store
        .transition(&old, ExecutionStatus::Queued, None)
        .await?;
    h.store.request_cancel(&old, None).await?;
    advance(h, Duration::from_secs(3_600));
    let cut = crate::store_now(&h.clock);
    let young = create(h).await?.execution_id;
    h.store
        .transition(&young, ExecutionStatus::Queued, None)
        .await?;
    let all = read_all(h.store.as_ref(), Cursor::START, 100).await?;
    ensure!(all.len() == 3, "{} records", all.len());
    let dry = h
        .store
        .prune_changes(PruneChanges::before(cut).dry_run())
        .await?;
    ensure!(
        dry.records == 2 && dry.through == Some(all[1].cursor),
        "dry run {dry:?}"
    );
    ensure!(
        read_all(h.store.as_ref(), Cursor::START, 100).await? == all,
        "a dry run removed records"
    );
    let pruned = h.store.prune_changes(PruneChanges::before(cut)).await?;
    ensure!(pruned == dry, "pruned {pruned:?}, dry run said {dry:?}");
    expect_error(
        h.peer.read_changes(all[0].cursor, 10).await,
        "cursor_expired",
        None,
    )?;
    ensure!(
        read_all(h.peer.as_ref(), all[1].cursor, 10).await? == all[2..],
        "a reader at the pruned cursor"
    );
    ensure!(
        read_all(h.peer.as_ref(), Cursor::START, 10).await? == all[2..],
        "a reader from the start"
    );
    let again = h.store.prune_changes(PruneChanges::before(cut)).await?;
    ensure!(again.records == 0, "pruned twice");
    ensure!(
        h.store.get_execution(&old).await?.is_some(),
        "pruning removed an execution"
    );
    // Cursors are never reused: the next record comes after every pruned one.
    h.store.request_cancel(&young, None).await?;
    let next = read_all(h.store.as_ref(), all[2].cursor, 10).await?;
    ensure!(
        next.len() == 1 && next[0].cursor > all[2].cursor,
        "after a prune: {next:?}"
    );
    Ok(())
}

/// Pruning every record, the newest included, never lets a cursor be reused: the next record
/// comes after every pruned one, and a reader at the old newest cursor goes on.
pub async fn pruning_every_record_never_reuses_a_cursor(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    h.store
        .transition(&id, ExecutionStatus::Queued, None)
        .await?;
    let newest = newest(h.store.as_ref()).await?;
    advance(h, Duration::from_secs(60));
    let pruned = h
        .store
        .prune_changes(PruneChanges::before(crate::store_now(&h.clock)))
        .await?;
    ensure!(pruned.through == Some(newest), "pruned {pruned:?}");
    h.store.request_cancel(&id, None).await?;
    let next = read_all(h.peer.as_ref(), newest, 10).await?;
    ensure!(
        next.len() == 1 && next[0].cursor > newest,
        "after pruning everything: {next:?}"
    );
    let from_start = read_all(h.peer.as_ref(), Cursor::START, 10).await?;
    ensure!(
        from_start == next,
        "a reader from the start: {from_start:?}"
    );
    Ok(())
}
