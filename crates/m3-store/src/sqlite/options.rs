//! [`SqliteStoreOptions`]: how a [`SqliteManagedInputStore`](super::SqliteManagedInputStore)
//! opens its database.

use std::sync::Arc;
use std::time::Duration;

use m3_types::{Clock, SystemClock};
pub use sqlx::sqlite::SqliteSynchronous;

/// Default SQLite busy timeout: how long a writer waits for the write lock.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default number of pooled connections per store object.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;

/// Options for [`SqliteManagedInputStore::open_with`](super::SqliteManagedInputStore::open_with).
///
/// ```
/// use std::time::Duration;
/// use m3_store::sqlite::{SqliteStoreOptions, SqliteSynchronous};
///
/// let options = SqliteStoreOptions::new()
///     .busy_timeout(Duration::from_secs(10))
///     .synchronous(SqliteSynchronous::Normal);
/// assert_eq!(options.get_busy_timeout(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct SqliteStoreOptions {
    busy_timeout: Duration,
    clock: Arc<dyn Clock>,
    synchronous: SqliteSynchronous,
    max_connections: u32,
    change_signal: bool,
}

impl SqliteStoreOptions {
    /// The defaults: busy timeout 5 s, the system UTC clock, `synchronous = FULL`, at most 4
    /// pooled connections, the cross-process change signal on (unless
    /// [`M3_CHANGE_SIGNAL=off`](crate::signal::SIGNAL_ENV)).
    pub fn new() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            clock: Arc::new(SystemClock),
            synchronous: SqliteSynchronous::Full,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            change_signal: crate::signal::signal_enabled_by_env(),
        }
    }

    /// How long a statement waits for another writer's lock before failing with
    /// `storage_error` (default 5 s, the original's `busy_timeout_ms=5000`).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The clock that defines "now" for leases and timestamps (default: the system clock).
    ///
    /// It must return UTC timestamps: opening a store with a clock whose current time has
    /// another offset fails with `managed_input_invalid`. This is the Rust analogue of the
    /// original's rule that a clock must return timezone-aware datetimes; `OffsetDateTime` is
    /// always aware, so the store insists on UTC instead, which keeps the stored text and its
    /// lexical order exact.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// SQLite's `synchronous` setting (default `FULL`, the original's effective setting: every
    /// commit is durable at the cost of one fsync). `NORMAL` in WAL mode may lose the last
    /// commits on power loss but never corrupts the database.
    pub fn synchronous(mut self, synchronous: SqliteSynchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// The most pooled connections (default 4, minimum 1). Writers are serialized anyway;
    /// more connections only let reads run beside a write. Besides the pool, a store object
    /// opens one connection of its own on its first write (the hot writes, and reads while
    /// it is idle, run there), so it holds at most `max_connections + 1`.
    pub fn max_connections(mut self, max_connections: u32) -> Self {
        self.max_connections = max_connections.max(1);
        self
    }

    /// Whether waiting processes are woken by a Unix datagram after each commit of another
    /// process (default on; the environment variable
    /// [`M3_CHANGE_SIGNAL`](crate::signal::SIGNAL_ENV)`=off` turns the default off). Off, a
    /// waiter in another process notices a change at its next fallback poll (about a second):
    /// slower, equally correct. Waiters in the committing process are woken at once either
    /// way. Turn it off on file systems without Unix sockets.
    pub fn change_signal(mut self, enabled: bool) -> Self {
        self.change_signal = enabled;
        self
    }

    /// Whether the cross-process change signal is on.
    pub fn get_change_signal(&self) -> bool {
        self.change_signal
    }

    /// The configured busy timeout.
    pub fn get_busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// The configured clock.
    pub fn get_clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The configured `synchronous` setting.
    pub fn get_synchronous(&self) -> SqliteSynchronous {
        self.synchronous
    }

    /// The configured connection limit.
    pub fn get_max_connections(&self) -> u32 {
        self.max_connections
    }
}

impl Default for SqliteStoreOptions {
    fn default() -> Self {
        Self::new()
    }
}
