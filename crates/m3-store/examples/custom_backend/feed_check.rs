//! A check of what the conformance suite cannot see of a persistent feed: after retention
//! removed every record, the newest included, a store object opened afresh on the same
//! directory numbers its next record after all of them (the newest cursor lives in the
//! feed file, not in the records or in memory), and a reader behind the removed records
//! gets `cursor_expired` from it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use m3_store::changes::PruneChanges;
use m3_store::{ExecutionStore, NewExecution};
use m3_types::{Cursor, ExecutionStatus, SystemClock};
use time::OffsetDateTime;

use crate::demo::BoxError;
use crate::store::DirectoryStore;

/// Queues an execution and asks to cancel it (two records), prunes every record, then
/// queues another execution through a new store object on `dir` and reads the feed from
/// the start and from behind the prune.
///
/// # Errors
/// If the store fails or the feed breaks one of the rules above.
pub(crate) async fn cursors_survive_pruning_and_reopening(dir: &Path) -> Result<(), BoxError> {
    let first = DirectoryStore::open(dir, Arc::new(SystemClock))?;
    let id = first.create_execution(queueable()).await?.execution_id;
    first.transition(&id, ExecutionStatus::Queued, None).await?;
    first.request_cancel(&id, None).await?;
    // `execution.queued` then `execution.cancel_requested`: a cursor behind the newest.
    let before = first.read_changes(Cursor::START, 10).await?;
    let [oldest, _] = before.records.as_slice() else {
        return Err(format!("two records expected, read {before:?}").into());
    };
    let (behind_newest, newest) = (oldest.cursor, before.next);
    // Every record is older than an hour from now: retention removes them all.
    let later = OffsetDateTime::now_utc() + Duration::from_secs(3_600);
    let pruned = first.prune_changes(PruneChanges::before(later)).await?;
    if pruned.through != Some(newest) || first.read_changes(newest, 10).await?.next != newest {
        return Err(format!("pruning every record: {pruned:?}").into());
    }
    drop(first);

    let second = DirectoryStore::open(dir, Arc::new(SystemClock))?;
    let other = second.create_execution(queueable()).await?.execution_id;
    second
        .transition(&other, ExecutionStatus::Queued, None)
        .await?;
    let page = second.read_changes(Cursor::START, 10).await?;
    let reused = page.records.iter().any(|record| record.cursor <= newest);
    let (Some(next), false) = (page.records.first(), reused) else {
        return Err(
            format!("after pruning through {newest}, a new store object read {page:?}").into(),
        );
    };
    let behind = second.read_changes(behind_newest, 10).await;
    if behind.as_ref().err().map(|e| e.code()) != Some("cursor_expired") {
        return Err(format!("a reader behind the prune got {behind:?}").into());
    }
    println!(
        "change feed: {} records pruned through cursor {newest}; a reopened store object \
         numbered on from {}",
        pruned.records, next.cursor
    );
    Ok(())
}

/// A new execution for the check (its spec is never run).
fn queueable() -> NewExecution {
    NewExecution::new(serde_json::json!({"demo": "feed"}))
}
