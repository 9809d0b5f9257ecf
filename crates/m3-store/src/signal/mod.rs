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

#[cfg(unix)]
pub mod datagram;
mod hub;
pub mod probe;

use std::fmt::Debug;
use std::time::Duration;

pub use hub::{ChangeHub, ChangeSubscription};
pub use probe::{ChangeProbe, ProbeFuture};

/// How long a waiter sleeps at most before it re-reads the store without a wake-up: the
/// fallback that makes a lost or missing signal cost latency only.
pub const DEFAULT_FALLBACK_POLL: Duration = Duration::from_secs(1);

/// How long a waiter sleeps at most before it re-reads the store while the signal is live
/// (see [`ChangeHub::is_live`]): only a safety net for an announcement lost on the way (a
/// committer killed between its commit and its send). Where the backend attaches a
/// [`ChangeProbe`] (SQLite), one batched read per store and interval stands in for the
/// re-reads of all the execution waiters ([`probe`]); elsewhere each waiter re-reads.
pub const SAFETY_POLL: Duration = Duration::from_secs(30);

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

/// What a committed change was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A round of the execution was created or changed (a response committed, delivery
    /// started or ended, resolved, failed, claimed).
    Round,
    /// The execution itself changed: created, transitioned, cancel requested, lease
    /// acquired or released, finished or terminalized by recovery.
    Execution,
    /// The execution was queued: a worker may claim it.
    Queued,
    /// Unknown: wake every waiter (a backend that cannot say what changed, a garbled or
    /// possibly dropped notification).
    Any,
}

impl ChangeKind {
    /// The one-byte wire tag of this kind (used by the datagram and `NOTIFY` payloads).
    pub fn tag(self) -> u8 {
        match self {
            Self::Round => b'r',
            Self::Execution => b'e',
            Self::Queued => b'q',
            Self::Any => b'*',
        }
    }

    /// The kind of a wire tag; an unknown tag is [`ChangeKind::Any`].
    pub fn from_tag(tag: u8) -> Self {
        match tag {
            b'r' => Self::Round,
            b'e' => Self::Execution,
            b'q' => Self::Queued,
            _ => Self::Any,
        }
    }
}

/// One committed change: which execution, and what about it (build with [`Change::new`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Change {
    /// The execution the change belongs to (empty for [`ChangeKind::Any`] of no execution).
    pub execution_id: String,
    /// What changed.
    pub kind: ChangeKind,
}

/// Longest execution id a wire payload carries; a longer one is sent as [`ChangeKind::Any`].
const MAX_WIRE_ID: usize = 512;

impl Change {
    /// The change a commit that left an execution as `record` announces (its kind from
    /// [`ChangeKind::of_lifecycle`]).
    pub fn of_execution(record: &crate::ExecutionRecord) -> Self {
        Self::new(
            record.execution_id.clone(),
            ChangeKind::of_lifecycle(record.lifecycle),
        )
    }

    /// A change of `kind` to execution `execution_id`.
    pub fn new(execution_id: impl Into<String>, kind: ChangeKind) -> Self {
        Self {
            execution_id: execution_id.into(),
            kind,
        }
    }

    /// A change nobody can attribute: wakes every waiter.
    pub fn any() -> Self {
        Self::new(String::new(), ChangeKind::Any)
    }

    /// The wire payload: the kind's tag, then the execution id in UTF-8 (a bare `*` for
    /// [`ChangeKind::Any`] or an id longer than 512 bytes).
    pub fn encode(&self) -> Vec<u8> {
        if self.kind == ChangeKind::Any || self.execution_id.len() > MAX_WIRE_ID {
            return vec![ChangeKind::Any.tag()];
        }
        let mut out = Vec::with_capacity(1 + self.execution_id.len());
        out.push(self.kind.tag());
        out.extend_from_slice(self.execution_id.as_bytes());
        out
    }

    /// Decodes a wire payload; anything malformed is [`Change::any`] (wake everyone).
    pub fn decode(payload: &[u8]) -> Self {
        match payload.split_first() {
            Some((&tag, id)) => match (ChangeKind::from_tag(tag), std::str::from_utf8(id)) {
                (ChangeKind::Any, _) | (_, Err(_)) => Self::any(),
                (_, Ok("")) => Self::any(),
                (kind, Ok(id)) => Self::new(id, kind),
            },
            None => Self::any(),
        }
    }
}

impl ChangeKind {
    /// The kind of a change that leaves an execution in `lifecycle`: [`Queued`](Self::Queued)
    /// while it is queued (claimable), else [`Execution`](Self::Execution).
    pub fn of_lifecycle(lifecycle: m3_types::ExecutionStatus) -> Self {
        if lifecycle == m3_types::ExecutionStatus::Queued {
            Self::Queued
        } else {
            Self::Execution
        }
    }
}

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

/// What a waiter wants to hear about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topic {
    /// Every change of one execution: its row, its cancel flag, its rounds.
    Execution(String),
    /// Any round of any execution was created or changed.
    Rounds,
    /// An execution was queued (what a worker's claim loop waits for).
    Queue,
    /// Every change.
    All,
}

impl Topic {
    /// Whether `change` concerns this topic ([`ChangeKind::Any`] concerns every topic).
    pub fn matches(&self, change: &Change) -> bool {
        if change.kind == ChangeKind::Any {
            return true;
        }
        match self {
            Self::Execution(id) => *id == change.execution_id,
            Self::Rounds => change.kind == ChangeKind::Round,
            Self::Queue => change.kind == ChangeKind::Queued,
            Self::All => true,
        }
    }
}

/// Why [`ChangeSubscription::changed`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wake {
    /// A matching change was announced (re-read now).
    Signalled,
    /// The fallback interval passed without one (re-read anyway: a signal may have been lost).
    Poll,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_garbage_wakes_everyone() {
        let change = Change::new("01KB", ChangeKind::Round);
        assert_eq!(Change::decode(&change.encode()), change);
        let queued = Change::new("x", ChangeKind::Queued);
        assert_eq!(Change::decode(&queued.encode()), queued);
        assert_eq!(Change::decode(b""), Change::any());
        assert_eq!(Change::decode(b"r"), Change::any());
        assert_eq!(Change::decode(b"r\xff\xfe"), Change::any());
        assert_eq!(Change::decode(b"zabc"), Change::any());
        let long = Change::new("x".repeat(MAX_WIRE_ID + 1), ChangeKind::Execution);
        assert_eq!(long.encode(), b"*");
    }

    #[test]
    fn topics_match_their_changes() {
        let round = Change::new("a", ChangeKind::Round);
        let queued = Change::new("a", ChangeKind::Queued);
        assert!(Topic::Execution("a".into()).matches(&round));
        assert!(!Topic::Execution("b".into()).matches(&round));
        assert!(Topic::Rounds.matches(&round));
        assert!(!Topic::Rounds.matches(&queued));
        assert!(Topic::Queue.matches(&queued));
        assert!(!Topic::Queue.matches(&round));
        assert!(Topic::All.matches(&queued));
        assert!(Topic::Execution("b".into()).matches(&Change::any()));
    }

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
