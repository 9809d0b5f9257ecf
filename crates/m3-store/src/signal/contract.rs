//! The [`ChangeSignal`] contract (subscriptions for waiters, announcements for committers),
//! its implementations that need nothing else (the in-process [`ChangeHub`] and the
//! [`PollingSignal`] fallback), and [`Announce`], how a backend announces after a commit.

use std::fmt::Debug;
use std::time::Duration;

use super::change::{Change, Topic};
use super::hub::{ChangeHub, ChangeSubscription};
use super::wake::DEFAULT_FALLBACK_POLL;

/// Announces a change after a successful store operation: what the backends wrap their
/// mutations in. An error announces nothing (nothing was committed).
///
/// ```
/// use m3_store::signal::{Announce, Change, ChangeHub, ChangeKind};
///
/// let hub = ChangeHub::new();
/// let committed: m3_types::Result<String> = Ok("exec-1".to_owned());
/// let id = committed.announce(&hub, |id| Change::new(id.as_str(), ChangeKind::Execution))?;
/// assert_eq!(id, "exec-1");
/// # Ok::<(), m3_types::Error>(())
/// ```
pub trait Announce: Sized {
    /// `self`, after `signal.notify(change(ok))` if `self` is `Ok`.
    fn announce<F: FnOnce(&Self::Ok) -> Change>(self, signal: &dyn ChangeSignal, change: F)
    -> Self;

    /// The success type.
    type Ok;
}

impl<T> Announce for m3_types::Result<T> {
    type Ok = T;

    fn announce<F: FnOnce(&T) -> Change>(self, signal: &dyn ChangeSignal, change: F) -> Self {
        if let Ok(value) = &self {
            signal.notify(&change(value));
        }
        self
    }
}

/// A store's change signal: subscriptions for waiters, announcements for committers.
///
/// Object safe (`Arc<dyn ChangeSignal>`), cheap to call. Implementations must keep two
/// promises: a change announced with [`notify`](Self::notify) after
/// [`subscribe`](Self::subscribe) returned wakes that subscription at least once (in this
/// process at once; in other processes as the backend can, best effort), and a subscription
/// never sleeps longer than its fallback interval. Spurious wake-ups are allowed.
pub trait ChangeSignal: Debug + Send + Sync {
    /// Starts listening for changes matching `topic`. Subscribe *before* reading the state
    /// you wait on, so a change committed between the read and the wait is not missed.
    fn subscribe(&self, topic: Topic) -> ChangeSubscription;

    /// Announces a committed `change` to the waiters of this and (if the backend can) other
    /// processes. Backends call it after their commit; it never blocks and never fails (a
    /// lost announcement is covered by the fallback poll).
    fn notify(&self, change: &Change);

    /// A short name of the mechanism, for diagnostics: `"poll"`, `"in-process"`,
    /// `"unix-datagram"`, `"postgres-notify"`, ...
    fn mechanism(&self) -> &'static str;
}

/// The fallback signal: announces nothing, and every subscription wakes after its interval.
/// The default of [`ExecutionStore::change_signal`](crate::ExecutionStore::change_signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollingSignal {
    every: Duration,
}

impl PollingSignal {
    /// Subscriptions wake every `every` (at least 1 ms).
    pub fn new(every: Duration) -> Self {
        Self {
            every: every.max(Duration::from_millis(1)),
        }
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        self.every
    }
}

impl Default for PollingSignal {
    /// Every [`DEFAULT_FALLBACK_POLL`].
    fn default() -> Self {
        Self::new(DEFAULT_FALLBACK_POLL)
    }
}

impl ChangeSignal for PollingSignal {
    fn subscribe(&self, _topic: Topic) -> ChangeSubscription {
        ChangeSubscription::polling(self.every)
    }

    fn notify(&self, _change: &Change) {}

    fn mechanism(&self) -> &'static str {
        "poll"
    }
}

impl ChangeSignal for ChangeHub {
    fn subscribe(&self, topic: Topic) -> ChangeSubscription {
        self.register(topic)
    }

    fn notify(&self, change: &Change) {
        self.publish(change);
    }

    fn mechanism(&self) -> &'static str {
        "in-process"
    }
}
