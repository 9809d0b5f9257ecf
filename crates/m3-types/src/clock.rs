//! Clocks: the system clock and a settable manual clock for tests.

use std::sync::{Arc, Mutex, PoisonError};

use time::{Duration, OffsetDateTime};

/// Source of the current UTC time. Stores and runtimes take one so tests can drive expiry.
pub trait Clock: std::fmt::Debug + Send + Sync {
    /// The current time, in UTC, truncated to microseconds.
    fn now(&self) -> OffsetDateTime;
}

/// Truncates to whole microseconds (the stored precision).
pub(crate) fn truncate_micros(t: OffsetDateTime) -> OffsetDateTime {
    let nanos = t.nanosecond();
    t.replace_nanosecond(nanos - nanos % 1000).unwrap_or(t)
}

/// The operating system's clock.
#[derive(Debug, Clone, Copy, Default)]
#[expect(
    clippy::exhaustive_structs,
    reason = "unit struct, used as the value `SystemClock`"
)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        truncate_micros(OffsetDateTime::now_utc())
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<OffsetDateTime>>,
}

impl ManualClock {
    /// A clock showing `start` (converted to UTC, truncated to microseconds).
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Arc::new(Mutex::new(normalize(start))),
        }
    }

    /// Sets the time.
    pub fn set(&self, t: OffsetDateTime) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = normalize(t);
    }

    /// Moves the time by `by` (may be negative).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now = normalize(now.saturating_add(by));
    }

    /// Moves the time by a std duration.
    pub fn advance_std(&self, by: std::time::Duration) {
        self.advance(Duration::try_from(by).unwrap_or(Duration::MAX));
    }
}

fn normalize(t: OffsetDateTime) -> OffsetDateTime {
    truncate_micros(t.to_offset(time::UtcOffset::UTC))
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
