//! The change signal: how a waiter learns that something it waits for may have changed.
//!
//! A store tells waiters "re-read now" after it commits a change: a response committed, a
//! round created or moved, an execution queued, transitioned, cancelled or finished. The row
//! stays the truth and the signal is only a hint: a waiter always re-reads the store after a
//! wake-up, and every [`ChangeSubscription`] also wakes on its own: after
//! [`DEFAULT_FALLBACK_POLL`] (1 s) while the signal cannot reach it (signal off, no socket,
//! a backend without one), after [`SAFETY_POLL`] (30 s) while it can. So a lost or disabled
//! signal costs latency, never correctness, and waiting on a working signal costs next to
//! nothing.
//!
//! The pieces:
//!
//! - [`ExecutionStore::change_signal`](crate::ExecutionStore::change_signal) returns the
//!   store's [`ChangeSignal`]. Its default is a [`PollingSignal`], so a custom backend needs
//!   nothing to be correct.
//! - [`ChangeSignal::subscribe`] returns a [`ChangeSubscription`] for a [`Topic`]; the waiter
//!   loops "read the row; if not done, `subscription.changed().await`".
//! - A backend announces each committed [`Change`] with [`ChangeSignal::notify`], after the
//!   commit (or, for a transactional channel such as PostgreSQL's `NOTIFY`, inside the
//!   transaction, which delivers at the commit).
//! - [`ChangeHub`] is the in-process fan-out every backend can reuse: the memory backend is
//!   only a hub; the SQLite backend adds a Unix datagram to each other waiting process (see
//!   `docs/custom-backend.md`).
//! - A [`ChangeProbe`] a backend attaches to its hub replaces the execution waiters' own
//!   safety re-reads with one batched read per interval ([`probe`]).
//!
//! ```
//! # async fn demo() -> m3_types::Result<()> {
//! use m3_store::NewExecution;
//! use m3_store::signal::{Topic, Wake};
//!
//! let store = m3_store::open("memory:").await?;
//! let record = store.create_execution(NewExecution::new(serde_json::json!({}))).await?;
//! let signal = store.change_signal();
//! // Subscribe first, then read: a change committed after `subscribe` returns is never missed.
//! let mut changes = signal.subscribe(Topic::Execution(record.execution_id.clone()));
//! store.request_cancel(&record.execution_id, None).await?;
//! assert_eq!(changes.changed().await, Wake::Signalled);
//! assert!(store.is_cancel_requested(&record.execution_id).await?);
//! # Ok(()) }
//! ```

mod change;
mod contract;
#[cfg(unix)]
pub mod datagram;
mod hub;
pub mod probe;
mod wake;

pub use change::{Change, ChangeKind, Topic};
pub use contract::{Announce, ChangeSignal, PollingSignal};
pub use hub::{ChangeHub, ChangeSubscription};
pub use probe::{ChangeProbe, ProbeFuture};
pub use wake::{DEFAULT_FALLBACK_POLL, SAFETY_POLL, Wake};

/// The environment variable that turns the store's change signal off when set to `off`
/// (`0`, `false` and `poll` too): waiters then poll every [`DEFAULT_FALLBACK_POLL`]. For
/// file systems without Unix sockets, and for tests of the fallback.
pub const SIGNAL_ENV: &str = "M3_CHANGE_SIGNAL";

/// Whether [`SIGNAL_ENV`] leaves the signal on (unset or any other value: on).
pub fn signal_enabled_by_env() -> bool {
    std::env::var(SIGNAL_ENV).map_or(true, |value| !switches_off(&value))
}

/// Whether a [`SIGNAL_ENV`] value turns the signal off.
fn switches_off(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "off" | "0" | "false" | "poll" | "no"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_switch_reads_off_values() {
        // Only the parser: the process environment is shared by parallel tests.
        for value in ["off", "OFF", " 0 ", "false", "poll", "no"] {
            assert!(switches_off(value), "{value}");
        }
        for value in ["", "on", "1", "datagram"] {
            assert!(!switches_off(value), "{value}");
        }
    }
}
