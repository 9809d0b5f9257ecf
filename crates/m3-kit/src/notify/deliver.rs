//! One subscription's delivery loop: follow the feed from its durable cursor, POST each
//! wanted record until a 2xx (retrying with backoff and jitter, dead-lettering after the
//! budget), report every step under the subscription's lease, and stop when the lease is
//! lost, the subscription disabled or removed, or the notifier stopped.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use m3_store::changes::follow;
use m3_store::subscriptions::{
    DeliveryOutcome, DeliveryReport, StoredSubscription, Subscription, SubscriptionLeaseRef,
    SubscriptionStore,
};
use m3_types::{ChangeRecord, Cursor, Result};
use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::attempt::{Attempt, Sender};
use super::options::NotifierOptions;

/// How long a subscription with passed-over records waits for another record before it
/// reports them (so its cursor does not lag far behind an idle feed).
const IDLE_REPORT: Duration = Duration::from_millis(500);

/// What one subscription's loop shares with the notifier.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) sender: Sender,
    pub(crate) subscriptions: Arc<dyn SubscriptionStore>,
    pub(crate) options: NotifierOptions,
}

/// Delivers `claimed` until its lease is lost or `stop` is cancelled; then releases it.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    claimed: StoredSubscription,
    stop: CancellationToken,
) {
    let Some(lease) = SubscriptionLeaseRef::of(&claimed.subscription) else {
        return;
    };
    let id = claimed.subscription.id.clone();
    match Loop::new(&shared, claimed, lease.clone()).run(&stop).await {
        Ok(()) => tracing::debug!(subscription = %id, "stopped delivering"),
        Err(error) => {
            tracing::info!(subscription = %id, code = error.code(), %error, "stopped delivering")
        }
    }
    if let Err(error) = shared.subscriptions.release_subscription(&lease).await {
        tracing::warn!(subscription = %id, code = error.code(), "cannot release the subscription");
    }
}

struct Loop<'a> {
    shared: &'a Shared,
    claimed: StoredSubscription,
    lease: SubscriptionLeaseRef,
    renew_at: Instant,
    /// The newest record passed over and not yet reported.
    passed_over: Option<Cursor>,
}

impl<'a> Loop<'a> {
    fn new(shared: &'a Shared, claimed: StoredSubscription, lease: SubscriptionLeaseRef) -> Self {
        let renew_at = Instant::now() + shared.options.lease / 3;
        Self {
            shared,
            claimed,
            lease,
            renew_at,
            passed_over: None,
        }
    }

    fn subscription(&self) -> &Subscription {
        &self.claimed.subscription
    }

    async fn run(mut self, stop: &CancellationToken) -> Result<()> {
        let store = Arc::clone(&self.shared.sender.store);
        let mut feed = Box::pin(follow(store, self.subscription().delivery.cursor));
        loop {
            self.renew_if_due().await?;
            let wait = self
                .renew_at
                .saturating_duration_since(Instant::now())
                .min(IDLE_REPORT);
            let next = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                next = tokio::time::timeout(wait, feed.next()) => next,
            };
            let record = match next {
                Err(_) => {
                    self.report_passed_over().await?;
                    continue;
                }
                Ok(None) => return Ok(()),
                Ok(Some(record)) => record?,
            };
            if self.subscription().wants(&record) {
                if !self.deliver(&record, stop).await? {
                    return Ok(());
                }
            } else {
                self.passed_over = Some(record.cursor);
            }
        }
    }

    /// Delivers `record` until it is delivered, dead-lettered or the receiver is gone;
    /// `false` when the loop should stop (gone, or stopped).
    async fn deliver(&mut self, record: &ChangeRecord, stop: &CancellationToken) -> Result<bool> {
        loop {
            if let Some(due) = self.subscription().delivery.next_attempt_at {
                let wait = (due - self.now()).try_into().unwrap_or(Duration::ZERO);
                tokio::select! {
                    () = stop.cancelled() => return Ok(false),
                    () = tokio::time::sleep(wait.min(self.shared.options.lease / 3)) => {}
                }
                self.renew_if_due().await?;
                if self.now() < due {
                    continue;
                }
            }
            let now = self.now();
            let attempt = self
                .shared
                .sender
                .attempt(self.subscription(), &self.claimed.secrets, record, now)
                .await;
            let outcome = match attempt {
                Attempt::Delivered => DeliveryOutcome::Delivered {
                    through: record.cursor,
                    delivered: 1,
                },
                Attempt::Gone => {
                    m3_runtime::metrics::Metrics::global().count_webhook_delivery("gone");
                    self.report(DeliveryOutcome::Gone).await?;
                    return Ok(false);
                }
                Attempt::Failed { status, error } => self.failure(record, status, error, now),
            };
            count_delivery(&outcome);
            let done = !matches!(outcome, DeliveryOutcome::Failed { .. });
            self.report(outcome).await?;
            if done {
                self.passed_over = None;
                return Ok(true);
            }
        }
    }

    /// A failed attempt: retried after a backoff, or dead-lettered once the budget is spent.
    fn failure(
        &self,
        record: &ChangeRecord,
        status: Option<u16>,
        error: String,
        now: OffsetDateTime,
    ) -> DeliveryOutcome {
        let progress = &self.subscription().delivery;
        let first = progress.first_failed_at.unwrap_or(now);
        let options = &self.shared.options;
        if now - first >= options.retry_for {
            return DeliveryOutcome::DeadLettered {
                cursor: record.cursor,
                kind: record.kind,
                status,
                error,
            };
        }
        DeliveryOutcome::Failed {
            cursor: record.cursor,
            status,
            error,
            next_attempt_at: now + backoff(progress.attempts, options),
        }
    }

    async fn report(&mut self, outcome: DeliveryOutcome) -> Result<()> {
        let report = DeliveryReport::new(self.lease.clone(), outcome);
        self.claimed.subscription = self.shared.subscriptions.report_delivery(report).await?;
        Ok(())
    }

    async fn report_passed_over(&mut self) -> Result<()> {
        if let Some(through) = self.passed_over.take() {
            self.report(DeliveryOutcome::Delivered {
                through,
                delivered: 0,
            })
            .await?;
        }
        Ok(())
    }

    async fn renew_if_due(&mut self) -> Result<()> {
        if Instant::now() < self.renew_at {
            return Ok(());
        }
        let lease = self.shared.options.lease;
        self.claimed.subscription = self
            .shared
            .subscriptions
            .renew_subscription(&self.lease, lease)
            .await?;
        self.renew_at = Instant::now() + lease / 3;
        Ok(())
    }

    fn now(&self) -> OffsetDateTime {
        m3_store::store_now(self.shared.sender.store.clock().as_ref())
    }
}

/// Counts one attempt's result in `m3_webhook_deliveries_total` (and a dead letter).
fn count_delivery(outcome: &DeliveryOutcome) {
    let result = match outcome {
        DeliveryOutcome::Delivered { .. } => "delivered",
        DeliveryOutcome::DeadLettered { .. } => "dead_lettered",
        _ => "failed",
    };
    m3_runtime::metrics::Metrics::global().count_webhook_delivery(result);
}

/// The wait after the `attempts`+1-th failure: the first retry interval doubled per
/// failure, capped, with up to 20% random jitter so receivers that come back are not hit
/// by every notifier at once.
pub(crate) fn backoff(attempts: u32, options: &NotifierOptions) -> Duration {
    let doubled = options
        .first_retry
        .saturating_mul(2_u32.saturating_pow(attempts.min(30)));
    let base = doubled.min(options.max_retry_interval);
    let mut random = [0_u8; 2];
    let jitter = if getrandom::fill(&mut random).is_ok() {
        f64::from(u16::from_le_bytes(random)) / f64::from(u16::MAX) * 0.2
    } else {
        0.0
    };
    base.mul_f64(1.0 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_cap() {
        let options = NotifierOptions::default();
        let first = backoff(0, &options);
        assert!(first >= options.first_retry && first <= options.first_retry.mul_f64(1.2));
        let third = backoff(2, &options);
        assert!(
            third >= options.first_retry * 4 && third <= (options.first_retry * 4).mul_f64(1.2)
        );
        let late = backoff(40, &options);
        assert!(
            late >= options.max_retry_interval && late <= options.max_retry_interval.mul_f64(1.2)
        );
    }
}
