//! [`FailureThrottle`]: failed authentications counted per source address; an address that
//! failed too often is refused (429 `too_many_failures`) for the rest of its window before
//! any credential of it is checked, so guessing tokens from one address is slow.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many failures one address may have in a window.
pub(crate) const MAX_FAILURES: u32 = 20;

/// The window failures are counted in.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// Past this many tracked addresses, expired windows are dropped (bounds the memory).
const PRUNE_ABOVE: usize = 4_096;

/// Failed authentications per source address.
#[derive(Debug, Default)]
pub(crate) struct FailureThrottle {
    windows: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailureThrottle {
    /// Whether `address` is refused now (too many failures in its current window).
    pub(crate) fn is_blocked(&self, address: IpAddr, now: Instant) -> bool {
        let windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        windows.get(&address).is_some_and(|(start, count)| {
            now.duration_since(*start) < WINDOW && *count >= MAX_FAILURES
        })
    }

    /// Counts one failure of `address`.
    pub(crate) fn record_failure(&self, address: IpAddr, now: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        if windows.len() > PRUNE_ABOVE {
            windows.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        }
        let entry = windows.entry(address).or_insert((now, 0));
        if now.duration_since(entry.0) >= WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_after_its_failures_until_the_window_ends() {
        let throttle = FailureThrottle::default();
        let (one, other) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let start = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert!(!throttle.is_blocked(one, start));
            throttle.record_failure(one, start);
        }
        assert!(throttle.is_blocked(one, start));
        assert!(!throttle.is_blocked(other, start));
        assert!(!throttle.is_blocked(one, start + WINDOW));
        throttle.record_failure(one, start + WINDOW);
        assert!(!throttle.is_blocked(one, start + WINDOW));
    }
}
