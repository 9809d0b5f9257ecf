//! [`NotifierOptions`]: how a notifier delivers (leases, timeouts, retries, answer links).

use std::time::Duration;

use url::Url;

/// How a [`Notifier`](super::Notifier) delivers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NotifierOptions {
    /// This notifier's id in the subscriptions' leases.
    pub owner: String,
    /// How long a subscription stays leased without a renewal (renewed every third).
    pub lease: Duration,
    /// How often to look for subscriptions nobody delivers.
    pub claim_interval: Duration,
    /// How long one POST may take, answer included.
    pub timeout: Duration,
    /// How long a record is retried before it is dead-lettered.
    pub retry_for: Duration,
    /// The wait after the first failure (doubled after each further one).
    pub first_retry: Duration,
    /// The longest wait between two attempts.
    pub max_retry_interval: Duration,
    /// `m3 serve`'s public base URL: answer links are made only when it is set.
    pub public_url: Option<Url>,
    /// The longest an answer link lives (a round's deadline ends it sooner).
    pub link_ttl: Duration,
}

impl Default for NotifierOptions {
    fn default() -> Self {
        Self {
            owner: format!("notifier-{}", m3_types::new_id()),
            lease: Duration::from_secs(30),
            claim_interval: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(24 * 60 * 60),
            first_retry: Duration::from_secs(1),
            max_retry_interval: Duration::from_secs(60 * 60),
            public_url: None,
            link_ttl: Duration::from_secs(24 * 60 * 60),
        }
    }
}
