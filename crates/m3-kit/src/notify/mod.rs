//! Notifications: a [`Notifier`] delivers the store's change feed to its webhook
//! subscriptions ([`m3_store::subscriptions`]), signed as the Standard Webhooks
//! specification says, at least once, with an answer link for each waiting round.
//!
//! `m3 notify` runs one; `m3 worker --notify` and `m3 serve --notify` run the same code in
//! their process. Several notifiers on one store share the work: each subscription is
//! leased to one of them at a time, and a notifier that dies leaves it to another once the
//! lease expires. The cursor moves only after a 2xx, so a record can be delivered twice
//! (after a crash between the POST and the report) but never lost; receivers drop
//! duplicates by `webhook-id`, which is the same on every attempt. `docs/notifications.md`
//! has the whole picture.

mod attempt;
mod deliver;
pub mod links;
mod options;
pub mod payload;
pub mod sign;
pub mod slack;

use std::sync::Arc;

use m3_store::ExecutionStore;
use m3_store::subscriptions::ClaimSubscriptions;
use m3_types::Result;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use attempt::Sender;
use deliver::Shared;
pub use options::NotifierOptions;

/// Delivers a store's change feed to its webhook subscriptions until stopped.
#[derive(Debug)]
pub struct Notifier {
    shared: Arc<Shared>,
}

impl Notifier {
    /// A notifier on `store`.
    ///
    /// # Errors
    /// `storage_error` if the store's subscriptions cannot be opened.
    pub async fn new(store: Arc<dyn ExecutionStore>, options: NotifierOptions) -> Result<Self> {
        let subscriptions = store.subscription_store().await?;
        let sender = Sender {
            store,
            timeout: options.timeout,
            public_url: options.public_url.clone(),
            link_ttl: options.link_ttl,
            clients: std::sync::Mutex::default(),
        };
        Ok(Self {
            shared: Arc::new(Shared {
                sender,
                subscriptions,
                options,
            }),
        })
    }

    /// Claims subscriptions and delivers each in a task of its own (a slow receiver holds
    /// up only its own subscription) until `stop` is cancelled; then releases them.
    ///
    /// # Errors
    /// None so far: a failing claim is logged and tried again at the next interval.
    pub async fn run(&self, stop: CancellationToken) -> Result<()> {
        let mut tasks = JoinSet::new();
        loop {
            let request = ClaimSubscriptions::new(
                self.shared.options.owner.clone(),
                self.shared.options.lease,
                usize::MAX,
            );
            match self.shared.subscriptions.claim_subscriptions(request).await {
                Ok(claimed) => {
                    for subscription in claimed {
                        tasks.spawn(deliver::serve(
                            Arc::clone(&self.shared),
                            subscription,
                            stop.child_token(),
                        ));
                    }
                }
                Err(error) => {
                    tracing::warn!(code = error.code(), %error, "cannot claim webhook subscriptions")
                }
            }
            while tasks.try_join_next().is_some() {}
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.shared.options.claim_interval) => {}
            }
        }
        while tasks.join_next().await.is_some() {}
        Ok(())
    }
}
