//! Lease renewal that rides out transient store errors.
//!
//! A renewal can fail for a reason that says nothing about the lease: another process holds
//! the database's write lock past the busy timeout (`SQLITE_BUSY`), a connection drops. Such
//! a failure is retried until the lease would actually have expired; only a lost lease (a
//! conflict: another worker took it, or the row moved on) or an expired one ends the work
//! it protects. The worker's [`LeaseKeeper`](super::LeaseKeeper) applies these
//! rules to every lease it renews.

use std::time::Duration;

use m3_types::Error;
use tokio::time::Instant;

/// The longest pause between two attempts after a transient failure.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// When the lease this process holds expires, as far as it knows: `lease` after the start of
/// the last renewal that succeeded (the store measured from a later instant, so this is
/// never later than the stored expiry).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseDeadline {
    lease: Duration,
    expires: Instant,
}

impl LeaseDeadline {
    /// A lease of `lease` granted a moment ago (the store's expiry may be a little earlier;
    /// a renewal attempted after it is refused by the store, which is fatal).
    pub(crate) fn granted_now(lease: Duration) -> Self {
        Self {
            lease,
            expires: Instant::now() + lease,
        }
    }

    pub(crate) fn renewed(&mut self, attempt_started: Instant) {
        self.expires = attempt_started + self.lease;
    }

    pub(crate) fn expired_by(&self, at: Instant) -> bool {
        at >= self.expires
    }
}

/// Whether a renewal error leaves the lease possibly still ours: anything but a lost lease
/// (`conflict`), a round or execution that moved on (`state`) or vanished (`not_found`).
pub(crate) fn is_transient(error: &Error) -> bool {
    !(error.is_conflict() || error.is_state() || error.is_not_found())
}
