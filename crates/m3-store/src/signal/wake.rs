//! How long a waiter sleeps without a wake-up, and why
//! [`ChangeSubscription::changed`](super::ChangeSubscription::changed) returned ([`Wake`]).

use std::time::Duration;

/// How long a waiter sleeps at most before it re-reads the store without a wake-up: the
/// fallback that makes a lost or missing signal cost latency only.
pub const DEFAULT_FALLBACK_POLL: Duration = Duration::from_secs(1);

/// How long a waiter sleeps at most before it re-reads the store while the signal is live
/// (see [`ChangeHub::is_live`](super::ChangeHub::is_live)): only a safety net for an
/// announcement lost on the way (a committer killed between its commit and its send). Where
/// the backend attaches a [`ChangeProbe`](super::ChangeProbe) (SQLite), one batched read
/// per store and interval stands in for the re-reads of all the execution waiters
/// ([`probe`](super::probe)); elsewhere each waiter re-reads.
pub const SAFETY_POLL: Duration = Duration::from_secs(30);

/// Why [`ChangeSubscription::changed`](super::ChangeSubscription::changed) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wake {
    /// A matching change was announced (re-read now).
    Signalled,
    /// The fallback interval passed without one (re-read anyway: a signal may have been lost).
    Poll,
}
