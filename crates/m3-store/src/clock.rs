//! The store clock rule shared by every backend: any timezone-aware clock is accepted and its
//! time is normalized to UTC at the stored precision (microseconds), the same way in every
//! store.

use m3_types::Clock;
use time::{OffsetDateTime, UtcOffset};

/// "Now" from `clock`, converted to UTC and truncated to whole microseconds (the precision
/// every backend stores), so a value a store returns equals what a later read yields.
///
/// A clock reporting another offset (say `+05:30`) is not an error: the instant is kept and
/// only its representation changes.
///
/// ```
/// use m3_types::ManualClock;
/// use time::macros::datetime;
///
/// let clock = ManualClock::new(datetime!(2026-01-01 12:00:00.123456789 +05:30));
/// let now = m3_store::store_now(&clock);
/// assert_eq!(now, datetime!(2026-01-01 06:30:00.123456 UTC));
/// ```
pub fn store_now(clock: &dyn Clock) -> OffsetDateTime {
    truncate_to_stored_precision(clock.now().to_offset(UtcOffset::UTC))
}

/// Truncates `t` to whole microseconds, the stored precision of every timestamp.
pub fn truncate_to_stored_precision(t: OffsetDateTime) -> OffsetDateTime {
    let nanos = t.nanosecond();
    t.replace_nanosecond(nanos - nanos % 1_000).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A clock that reports a fixed time in an arbitrary offset, unlike `ManualClock` which
    /// normalizes on its own.
    #[derive(Debug)]
    struct Offset(Mutex<OffsetDateTime>);

    impl Clock for Offset {
        fn now(&self) -> OffsetDateTime {
            *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    #[test]
    fn a_non_utc_clock_is_normalized_to_the_same_instant() {
        let local = OffsetDateTime::UNIX_EPOCH
            .to_offset(UtcOffset::from_hms(-7, 0, 0).unwrap())
            .replace_nanosecond(999_999_999)
            .unwrap();
        let now = store_now(&Offset(Mutex::new(local)));
        assert_eq!(now.offset(), UtcOffset::UTC);
        assert_eq!(now.unix_timestamp(), local.unix_timestamp());
        assert_eq!(now.nanosecond(), 999_999_000);
    }
}
