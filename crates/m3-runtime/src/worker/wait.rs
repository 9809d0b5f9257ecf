//! How an idle claim loop waits for something to be queued. The row is the truth: the
//! loop claims again after every wake-up, so this only decides latency.

use std::time::Duration;

use m3_store::ExecutionStore;

/// Waits until something may have been queued: `poll` (`None`: only local wake-ups, i.e.
/// forever here).
pub(super) async fn wait_for_queued(_store: &dyn ExecutionStore, poll: Option<Duration>) {
    match poll {
        Some(poll) => tokio::time::sleep(poll).await,
        None => std::future::pending().await,
    }
}
