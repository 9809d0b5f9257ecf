//! How a worker finds the executions other workers hand to it: the executions waiting for
//! input whose lease names it, found once by a listing and then from the store's change
//! feed, where a handover is an `execution.claimed` record (a new lease token) of an
//! execution waiting for input. Reading the feed costs nothing while nobody hands over.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use m3_store::{ExecutionRecord, ExecutionStore, ListExecutions};
use m3_types::{ChangeRecordKind, Cursor, ExecutionStatus, Result};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The feed records that may end a parked execution's wait.
const ENDS_A_WAIT: [ChangeRecordKind; 4] = [
    ChangeRecordKind::RoundAnswered,
    ChangeRecordKind::RoundFailed,
    ChangeRecordKind::ExecutionCancelRequested,
    ChangeRecordKind::ExecutionFinished,
];

/// Records per read while finding the feed's end.
const PAGE: usize = 1_000;

/// How long to wait before reading again after the feed failed (a lost database).
const RETRY: Duration = Duration::from_secs(1);

/// What the feed says to a pool.
#[derive(Debug)]
pub(super) enum Found {
    /// An execution handed to the pool.
    Handed(Box<ExecutionRecord>),
    /// Something that may end a parked execution's wait happened to execution `.0`: a
    /// round answered or failed, a cancel request, the execution finished.
    Touched(String),
}

/// Sends every execution handed to `owner_id` on `found` until `stop`: those handed over
/// already (a listing), then each as its handover commits; and each execution whose wait a
/// change may end. An execution may be sent twice (the listing and the feed overlap); the
/// receiver keeps one run per execution.
pub(super) async fn watch_handovers(
    store: Arc<dyn ExecutionStore>,
    owner_id: String,
    found: mpsc::UnboundedSender<Found>,
    stop: CancellationToken,
) {
    loop {
        let watched = tokio::select! {
            watched = watch_once(&store, &owner_id, &found) => watched,
            () = stop.cancelled() => return,
        };
        if let Err(error) = watched {
            tracing::warn!(%error, "following the change feed for handovers failed; starting again");
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// One pass: the feed's end, the listing, then the feed from that end until it fails.
async fn watch_once(
    store: &Arc<dyn ExecutionStore>,
    owner_id: &str,
    found: &mpsc::UnboundedSender<Found>,
) -> Result<()> {
    let from = feed_end(store.as_ref()).await?;
    let waiting = ListExecutions::new().with_lifecycle(ExecutionStatus::WaitingForInput);
    for record in store.list_executions(waiting).await? {
        if leased_to(&record, owner_id) {
            let _ = found.send(Found::Handed(Box::new(record)));
        }
    }
    let mut feed = std::pin::pin!(m3_store::changes::follow(Arc::clone(store), from));
    while let Some(change) = feed.next().await {
        let change = change?;
        if ENDS_A_WAIT.contains(&change.kind) {
            let _ = found.send(Found::Touched(change.execution_id.clone()));
            continue;
        }
        let handed = change.kind == ChangeRecordKind::ExecutionClaimed
            && change
                .execution
                .is_some_and(|state| state.lifecycle == ExecutionStatus::WaitingForInput);
        if !handed {
            continue;
        }
        if let Some(record) = store.get_execution(&change.execution_id).await?
            && leased_to(&record, owner_id)
        {
            let _ = found.send(Found::Handed(Box::new(record)));
        }
    }
    Ok(())
}

/// Whether `record` waits for input under a lease held by `owner_id`.
fn leased_to(record: &ExecutionRecord, owner_id: &str) -> bool {
    record.lifecycle == ExecutionStatus::WaitingForInput
        && record
            .lease
            .as_ref()
            .is_some_and(|lease| lease.owner_id == owner_id)
}

/// The cursor of the feed's newest record.
async fn feed_end(store: &dyn ExecutionStore) -> Result<Cursor> {
    let mut cursor = Cursor::START;
    loop {
        let page = store.read_changes(cursor, PAGE).await?;
        if page.records.is_empty() {
            return Ok(cursor);
        }
        cursor = page.next;
    }
}
