//! The database server's clock as this store object knows it: the latest reading of
//! `clock_timestamp()` a statement returned, advanced by the local monotonic clock since.
//!
//! A reading is taken by the server before it answers, so the estimate is never ahead of the
//! server's clock (up to the drift of two clocks over the time since the reading, which
//! every write refreshes). A write that decides on the estimate instead of a fresh reading
//! pins it in its own `WHERE` ([`Estimate::window`]): the row changes only if the server's
//! clock, at the write, is within [`AHEAD_SLACK`] behind and [`LAG_LIMIT`] ahead of the time
//! the decision used. Anything else (a server clock stepped back or forward, a statement
//! held up for longer) writes nothing, and the write is decided again on a fresh reading.
//! So a decision never uses a time further from the commit than a read-then-write would
//! under the same delay, and it saves the read.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use m3_types::Clock;
use time::OffsetDateTime;

/// How far the server's clock may be behind an estimate at the write (drift of the two
/// clocks since the reading).
pub(crate) const AHEAD_SLACK: Duration = Duration::from_millis(1);

/// How far the server's clock may be ahead of an estimate at the write: the write's own
/// delay, as a read-then-write has it between its read and its write.
pub(crate) const LAG_LIMIT: Duration = Duration::from_millis(100);

/// The latest reading of the server's clock (see the module docs).
#[derive(Debug)]
pub(crate) struct ServerTime {
    latest: Mutex<Reading>,
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    server: OffsetDateTime,
    /// When the answer carrying `server` arrived.
    received: Instant,
}

impl Reading {
    fn at(&self, instant: Instant) -> OffsetDateTime {
        let since = instant.saturating_duration_since(self.received);
        self.server + time::Duration::try_from(since).unwrap_or(time::Duration::ZERO)
    }
}

/// The earliest and latest server time at which a write may commit.
pub(crate) type Window = (OffsetDateTime, OffsetDateTime);

/// The server's time as estimated for one decision, and the window its write pins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimate {
    /// At the stored precision.
    pub(crate) now: OffsetDateTime,
}

impl Estimate {
    /// The earliest and latest server time at which a write decided at `now` may commit.
    pub(crate) fn window(&self) -> Window {
        (self.now - AHEAD_SLACK, self.now + LAG_LIMIT)
    }
}

impl ServerTime {
    /// Starts from `server`, read in an answer that arrived at `received`.
    pub(crate) fn new(server: OffsetDateTime, received: Instant) -> Self {
        Self {
            latest: Mutex::new(Reading { server, received }),
        }
    }

    /// Learns from a reading of `clock_timestamp()` that arrived at `received`, keeping
    /// whichever of it and the current estimate is later (both are lower bounds).
    pub(crate) fn observe(&self, server: OffsetDateTime, received: Instant) {
        let reading = Reading { server, received };
        let mut latest = self.lock();
        let now = Instant::now();
        if reading.at(now) >= latest.at(now) {
            *latest = reading;
        }
    }

    /// Starts again from a reading of `clock_timestamp()` that arrived at `received`, even an
    /// earlier one: after a write missed its window, the server's clock was stepped back or
    /// the estimate is wrong, and only a fresh reading says which.
    pub(crate) fn reset(&self, server: OffsetDateTime, received: Instant) {
        *self.lock() = Reading { server, received };
    }

    /// The server's time now, as estimated.
    pub(crate) fn estimate(&self) -> Estimate {
        Estimate {
            now: m3_store::truncate_to_stored_precision(self.lock().at(Instant::now())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reading> {
        // A reading is replaced whole: a panicking holder leaves a valid one.
        self.latest.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the store reports to callers as its clock (deadlines, recovery scans).
impl Clock for ServerTime {
    fn now(&self) -> OffsetDateTime {
        self.estimate().now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_advances_with_the_local_clock_and_keeps_the_later_reading() {
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let received = Instant::now();
        let time = ServerTime::new(start, received);
        assert!(time.estimate().now >= start);

        // An older reading (a slower answer of a concurrent statement) is not taken.
        time.observe(start - time::Duration::seconds(5), Instant::now());
        assert!(time.estimate().now >= start);

        // A later one is.
        let later = start + time::Duration::hours(1);
        time.observe(later, Instant::now());
        let estimate = time.estimate();
        assert!(estimate.now >= later && estimate.now < later + time::Duration::seconds(5));
        let (earliest, latest) = estimate.window();
        assert_eq!(earliest, estimate.now - AHEAD_SLACK);
        assert_eq!(latest, estimate.now + LAG_LIMIT);

        // A reset takes even an earlier reading.
        time.reset(start, Instant::now());
        assert!(time.estimate().now < later);
    }
}
