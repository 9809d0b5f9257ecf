//! Riding out a database that drops its connections.
//!
//! A PostgreSQL restart (or a network reset) fails the statements in flight and, once, each
//! pooled connection the server closed meanwhile: `storage_error`s with reason
//! `connection_lost`, which [`Error::is_retryable`] reports. Nothing was decided by such a
//! call, and the pool reconnects on its own once the server is back. So the worker's own
//! store calls are repeated with backoff instead of failing the execution: waits re-read
//! until the round's lease ends (see the coordinator), and writes retry for at most the
//! lease duration, after which the lease has certainly expired and the store would refuse
//! the write anyway (recovery then fails the execution closed). Every write retried here is
//! idempotent when repeated after a commit whose acknowledgement was lost (round transitions,
//! `finish`), or made so ([`transition`] reads the lifecycle before repeating).

use std::future::Future;
use std::time::Duration;

use m3_store::{ExecutionLeaseRef, ExecutionRecord, ExecutionStore};
use m3_types::{Error, ExecutionStatus, Result};
use tokio::time::Instant;

/// The first pause after a retryable failure.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Doubling pauses between attempts: 0.1 s, 0.2 s, ... up to 2 s.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: FIRST_PAUSE }
    }
}

impl Backoff {
    /// The pause before the next attempt (each one twice the last, up to [`MAX_PAUSE`]).
    pub(crate) fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(MAX_PAUSE);
        pause
    }

    /// Back to the first pause, after a call that worked.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST_PAUSE;
    }
}

/// Runs `attempt` until it succeeds, fails with an error that is not retryable, or `budget`
/// has passed since the first failure (then the last error is returned). `what` names the
/// call in the log.
pub(crate) async fn retrying<T, F, Fut>(what: &str, budget: Duration, mut attempt: F) -> Result<T>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut backoff = Backoff::default();
    let mut give_up_at: Option<Instant> = None;
    let mut repeated = false;
    loop {
        let error = match attempt(repeated).await {
            Err(error) if error.is_retryable() && error.is_storage() => error,
            done => return done,
        };
        let pause = backoff.next_pause();
        let until = *give_up_at.get_or_insert_with(|| Instant::now() + budget);
        if Instant::now() + pause > until {
            tracing::warn!(%error, call = what, "the database is still unreachable; giving up");
            return Err(error);
        }
        tracing::warn!(%error, call = what, ?pause, "lost the database connection; retrying");
        tokio::time::sleep(pause).await;
        repeated = true;
    }
}

/// `executions.transition(execution_id, to, lease)`, retried as [`retrying`] does. A
/// repeat first reads the execution: if the lost attempt committed, the lifecycle is
/// already `to` and nothing is written again.
pub(crate) async fn transition(
    executions: &dyn ExecutionStore,
    execution_id: &str,
    to: ExecutionStatus,
    lease: &ExecutionLeaseRef,
    budget: Duration,
) -> Result<ExecutionRecord> {
    retrying("transition", budget, |repeated| async move {
        if repeated
            && let Some(current) = executions.get_execution(execution_id).await?
            && current.lifecycle == to
        {
            return Ok(current);
        }
        executions.transition(execution_id, to, Some(lease)).await
    })
    .await
}

/// Whether `error` is a lost database connection (worth another attempt).
pub(crate) fn is_connection_lost(error: &Error) -> bool {
    error.is_storage() && error.is_retryable()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use m3_types::Reason;

    use super::*;

    fn lost() -> Error {
        Error::storage("connection lost").with_reason(Reason::ConnectionLost)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_connection_is_retried_until_the_call_works() {
        let calls = AtomicU32::new(0);
        let done = retrying("read", Duration::from_secs(30), |_| async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0..=2 => Err(lost()),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(done.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_retried_and_the_budget_ends_the_retries() {
        let calls = AtomicU32::new(0);
        let refused: Result<()> = retrying("write", Duration::from_secs(30), |_| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::storage("disk full"))
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a full disk is not retried"
        );
        let down: Result<()> =
            retrying("write", Duration::from_secs(1), |_| async { Err(lost()) }).await;
        assert!(down.is_err_and(|e| is_connection_lost(&e)));
    }

    #[test]
    fn the_pauses_double_up_to_the_cap_and_reset() {
        let mut backoff = Backoff::default();
        let pauses: Vec<Duration> = (0..7).map(|_| backoff.next_pause()).collect();
        assert_eq!(pauses[0], FIRST_PAUSE);
        assert_eq!(pauses[1], FIRST_PAUSE * 2);
        assert_eq!(pauses[6], MAX_PAUSE);
        backoff.reset();
        assert_eq!(backoff.next_pause(), FIRST_PAUSE);
    }
}
