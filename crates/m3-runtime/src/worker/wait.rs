//! How an idle claim loop waits for something to be queued: the store's change signal
//! (topic `Queue`), whose subscription falls back to a slow poll when no signal can reach
//! it. The row is the truth: the loop claims again after every wake-up, so this only
//! decides latency.

use m3_store::signal::ChangeSubscription;

/// Waits until something may have been queued (`None`: only local wake-ups, i.e. forever).
pub(super) async fn wait_for_queued(queue: Option<&mut ChangeSubscription>) {
    match queue {
        Some(subscription) => {
            subscription.changed().await;
        }
        None => std::future::pending().await,
    }
}
