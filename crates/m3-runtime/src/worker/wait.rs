//! How an idle claim loop waits for something to be queued: the store's change signal
//! (topic `Queue`), and at least every idle poll a claim attempt anyway, whatever the
//! signal's own fallback: one cheap read per worker process, so an execution queued by a
//! process whose announcement was lost is claimed within the idle poll. The row is the
//! truth: the loop claims again after every wake-up, so this only decides latency.

use std::time::Duration;

use m3_store::signal::{ChangeSubscription, Wake};

/// Waits until something may have been queued, or `idle_poll` passed (`None`: only local
/// wake-ups, i.e. forever). Counts the wake-up's cause in `m3_queue_wakeups_total`: the
/// store's change signal, or the idle poll.
pub(super) async fn wait_for_queued(queue: Option<&mut ChangeSubscription>, idle_poll: Duration) {
    match queue {
        Some(subscription) => {
            let cause = match tokio::time::timeout(idle_poll, subscription.changed()).await {
                Ok(Wake::Signalled) => "signal",
                Ok(_) | Err(_) => "poll",
            };
            crate::metrics::Metrics::global().count_queue_wakeup(cause);
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_idle_poll_bounds_the_wait_on_a_live_signal() {
        use m3_store::signal::{ChangeHub, ChangeSignal, Topic};
        let hub = ChangeHub::with_intervals(Duration::from_secs(3600), Duration::from_secs(3600));
        let mut queue = hub.subscribe(Topic::Queue);
        // Nothing is announced and the signal would sleep an hour: the idle poll ends it.
        let waited = tokio::time::timeout(
            Duration::from_secs(600),
            wait_for_queued(Some(&mut queue), Duration::from_millis(10)),
        )
        .await;
        assert!(waited.is_ok(), "the idle poll returns");
    }
}
