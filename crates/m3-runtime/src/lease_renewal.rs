//! Lease renewal that rides out transient store errors.
//!
//! A renewal can fail for a reason that says nothing about the lease: another process holds
//! the database's write lock past the busy timeout (`SQLITE_BUSY`), a connection drops. Such
//! a failure is retried until the lease would actually have expired; only a lost lease (a
//! conflict: another worker took it, or the row moved on) or an expired one ends the work
//! it protects. Both renewal tasks (the execution heartbeat and each round's renewal) use it.

use std::future::Future;
use std::time::Duration;

use m3_types::{Error, Result};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest pause between two attempts after a transient failure.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

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

    fn renewed(&mut self, attempt_started: Instant) {
        self.expires = attempt_started + self.lease;
    }

    fn expired_by(&self, at: Instant) -> bool {
        at >= self.expires
    }
}

/// Whether a renewal error leaves the lease possibly still ours: anything but a lost lease
/// (`conflict`), a round or execution that moved on (`state`) or vanished (`not_found`).
pub(crate) fn is_transient(error: &Error) -> bool {
    !(error.is_conflict() || error.is_state() || error.is_not_found())
}

/// Runs `renew` until it succeeds, retrying transient failures (see [`is_transient`]) every
/// `every` at most [`RETRY_PAUSE`] apart while the lease may still be live. Returns the
/// last outcome: `Ok` (and `deadline` moved on), a non-transient error, or the transient
/// error of the last attempt before the lease expired. `None` when `stop` fired meanwhile.
pub(crate) async fn renew_until_expiry<T, F, Fut>(
    deadline: &mut LeaseDeadline,
    every: Duration,
    stop: &CancellationToken,
    mut renew: F,
) -> Option<Result<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let pause = every.min(RETRY_PAUSE);
    loop {
        let started = Instant::now();
        match renew().await {
            Ok(value) => {
                deadline.renewed(started);
                return Some(Ok(value));
            }
            Err(error) if is_transient(&error) && !deadline.expired_by(Instant::now() + pause) => {
                tracing::warn!(%error, "lease renewal failed; retrying while the lease is live");
                tokio::select! {
                    () = stop.cancelled() => return None,
                    () = tokio::time::sleep(pause) => {}
                }
            }
            Err(error) => return Some(Err(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn busy() -> Error {
        Error::storage("cannot begin a write transaction")
    }

    #[tokio::test]
    async fn a_transient_failure_is_retried_until_it_succeeds() {
        let mut deadline = LeaseDeadline::granted_now(Duration::from_secs(30));
        let attempts = AtomicU32::new(0);
        let outcome = renew_until_expiry(
            &mut deadline,
            Duration::from_millis(10),
            &CancellationToken::new(),
            || async {
                match attempts.fetch_add(1, Ordering::SeqCst) {
                    0..=3 => Err(busy()),
                    _ => Ok(()),
                }
            },
        )
        .await;
        assert!(matches!(outcome, Some(Ok(()))));
        assert_eq!(attempts.load(Ordering::SeqCst), 5);
        assert!(!deadline.expired_by(Instant::now() + Duration::from_secs(20)));
    }

    #[tokio::test]
    async fn a_transient_failure_becomes_fatal_when_the_lease_expires() {
        let granted = Instant::now();
        let lease = Duration::from_millis(300);
        let mut deadline = LeaseDeadline::granted_now(lease);
        let outcome: Option<Result<()>> = renew_until_expiry(
            &mut deadline,
            Duration::from_millis(50),
            &CancellationToken::new(),
            || async { Err(busy()) },
        )
        .await;
        let Some(Err(error)) = outcome else {
            panic!("expected the last transient error")
        };
        assert!(error.is_storage());
        // It gave up only when one more pause would have reached the expiry.
        assert!(Instant::now() + Duration::from_millis(50) >= granted + lease);
    }

    #[tokio::test]
    async fn a_lost_lease_is_fatal_at_once() {
        let mut deadline = LeaseDeadline::granted_now(Duration::from_secs(30));
        let attempts = AtomicU32::new(0);
        let outcome: Option<Result<()>> = renew_until_expiry(
            &mut deadline,
            Duration::from_secs(1),
            &CancellationToken::new(),
            || async {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(Error::managed_input_conflict("lease token mismatch"))
            },
        )
        .await;
        assert!(matches!(outcome, Some(Err(error)) if error.is_conflict()));
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn stopping_ends_the_retries() {
        let mut deadline = LeaseDeadline::granted_now(Duration::from_secs(30));
        let stop = CancellationToken::new();
        stop.cancel();
        let outcome: Option<Result<()>> =
            renew_until_expiry(&mut deadline, Duration::from_secs(1), &stop, || async {
                Err(busy())
            })
            .await;
        assert!(outcome.is_none());
    }
}
