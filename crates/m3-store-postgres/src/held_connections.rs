//! A few pool connections a store object keeps checked out between its operations.
//!
//! sqlx 0.9 pings every connection it takes back into the pool (a `Sync` round trip, from
//! a spawned task), unconditionally: six per round's lifecycle, more client messages than
//! its statements' (`docs/performance.md`). An operation that ends cleanly puts its
//! connection here instead, and the next operation of the store object takes it without a
//! checkout: no ping, no task. What makes that safe:
//!
//! - **Only a connection whose operation finished is kept.** [`StoreConnection`] starts
//!   *in use*; the operation settles it after its last statement and releases it. A
//!   future dropped mid-statement (cancellation) drops it unreleased, and it goes back to
//!   the pool, whose ping on release drains or closes it, as without this cache.
//! - **A connection that may be broken is closed, never reused**: any sqlx error other
//!   than an error the server reported for the statement, and those of SQLSTATE classes
//!   `08` (connection exception), `57P` (the server ends the session:
//!   `pg_terminate_backend`, shutdown) and `XX` (internal error).
//! - **Only statements outside a transaction run on a kept connection** (round writes,
//!   their announcements, reads): there is never a transaction to roll back.
//! - **The pool is never starved by this cache**: a connection is kept only while the pool
//!   still has an idle connection or room for a new one, at most [`MAX_KEPT`] (and half
//!   the pool), and a kept connection nobody took for [`HOLD`] goes back to the pool.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPool;
use sqlx::{PgConnection, Postgres};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::error::db;

/// Most connections one store object keeps.
pub(crate) const MAX_KEPT: usize = 8;

/// How long a kept connection may wait for the next operation before it goes back to the
/// pool.
pub(crate) const HOLD: Duration = Duration::from_millis(50);

/// The connections a store object keeps, newest last.
type Kept = Mutex<Vec<KeptConnection>>;

/// A kept connection and when it was kept.
#[derive(Debug)]
struct KeptConnection {
    /// Always `Some` until taken or dropped.
    conn: Option<PoolConnection<Postgres>>,
    since: Instant,
}

impl KeptConnection {
    fn take(mut self) -> Option<PoolConnection<Postgres>> {
        self.conn.take()
    }
}

impl Drop for KeptConnection {
    /// Back to the pool, which needs a tokio runtime to take it (sqlx spawns there); with
    /// none (the store dropped after its runtime ended) it is closed instead.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && tokio::runtime::Handle::try_current().is_err()
        {
            drop(conn.detach());
        }
    }
}

/// The kept connections of one store object (see the module docs).
#[derive(Debug)]
pub(crate) struct KeptConnections {
    pool: PgPool,
    max_connections: u32,
    capacity: usize,
    kept: Arc<Kept>,
    /// Tells the sweeper that a connection was kept into an empty cache.
    kept_one: Arc<Notify>,
    sweeper: OnceLock<Option<Sweeper>>,
}

impl KeptConnections {
    /// The cache in front of `pool` (of `max_connections`).
    pub(crate) fn new(pool: PgPool, max_connections: u32) -> Self {
        let half = usize::try_from(max_connections / 2).unwrap_or(MAX_KEPT);
        Self {
            pool,
            max_connections,
            capacity: half.min(MAX_KEPT),
            kept: Arc::default(),
            kept_one: Arc::default(),
            sweeper: OnceLock::new(),
        }
    }

    /// A kept connection, else one of the pool; in use until settled.
    pub(crate) async fn connection(&self) -> m3_types::Result<StoreConnection<'_>> {
        let conn = match self.take() {
            Some(conn) => conn,
            None => self
                .pool
                .acquire()
                .await
                .map_err(db("cannot connect to PostgreSQL"))?,
        };
        Ok(StoreConnection {
            conn,
            cache: self,
            state: State::InUse,
        })
    }

    fn take(&self) -> Option<PoolConnection<Postgres>> {
        lock(&self.kept).pop().and_then(KeptConnection::take)
    }

    /// Keeps `conn` when there is room and the pool can spare it; otherwise it goes back
    /// to the pool.
    fn keep(&self, conn: PoolConnection<Postgres>) {
        let pool_can_spare = self.pool.num_idle() > 0 || self.pool.size() < self.max_connections;
        if !pool_can_spare || !self.start_sweeper() {
            return;
        }
        let mut kept = lock(&self.kept);
        if kept.len() >= self.capacity {
            return;
        }
        kept.push(KeptConnection {
            conn: Some(conn),
            since: Instant::now(),
        });
        if kept.len() == 1 {
            self.kept_one.notify_one();
        }
    }

    /// Starts the sweeper on first use; `false` without a tokio runtime (nothing is kept:
    /// nobody would give it back).
    fn start_sweeper(&self) -> bool {
        self.sweeper
            .get_or_init(|| {
                let runtime = tokio::runtime::Handle::try_current().ok()?;
                let task = sweep(Arc::clone(&self.kept), Arc::clone(&self.kept_one));
                Some(Sweeper(runtime.spawn(task)))
            })
            .is_some()
    }

    /// How many connections are kept now.
    #[cfg(test)]
    pub(crate) fn kept_count(&self) -> usize {
        lock(&self.kept).len()
    }
}

fn lock(kept: &Kept) -> std::sync::MutexGuard<'_, Vec<KeptConnection>> {
    // A panic while holding the lock cannot leave the list inconsistent (push and pop).
    kept.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Gives back to the pool every connection kept for longer than [`HOLD`], while any is
/// kept; ends when its store object drops it.
async fn sweep(kept: Arc<Kept>, kept_one: Arc<Notify>) {
    loop {
        kept_one.notified().await;
        loop {
            tokio::time::sleep(HOLD).await;
            let released: Vec<_> = {
                let mut kept = lock(&kept);
                let (old, fresh): (Vec<_>, Vec<_>) = kept
                    .drain(..)
                    .partition(|kept| kept.since.elapsed() >= HOLD);
                *kept = fresh;
                if kept.is_empty() {
                    break;
                }
                old
            };
            drop(released);
        }
    }
}

/// The sweeper's task, aborted with its store object (its kept connections then go back
/// to the pool).
#[derive(Debug)]
struct Sweeper(JoinHandle<()>);

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Where an operation's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A statement may be under way: back to the pool (its ping on release) when dropped.
    InUse,
    /// Every statement finished and the connection works: kept when dropped.
    Settled,
    /// A statement failed in a way that may have broken it: closed when dropped.
    Broken,
}

/// An operation's connection: kept by the store object when the operation settles it
/// cleanly and [`release`](Self::release)s it; dropped otherwise, it goes back to the pool
/// (see the module docs).
#[derive(Debug)]
pub(crate) struct StoreConnection<'a> {
    conn: PoolConnection<Postgres>,
    cache: &'a KeptConnections,
    state: State,
}

impl StoreConnection<'_> {
    /// Marks the statements sent so far finished with `result`: the connection is kept
    /// unless `result` shows it may be broken.
    pub(crate) fn settle<T>(&mut self, result: &m3_types::Result<T>) {
        self.state = match result {
            Err(error) if error_may_break(error) => State::Broken,
            _ => State::Settled,
        };
    }

    /// [`settle`](Self::settle) for a sqlx result.
    pub(crate) fn settle_sqlx<T>(&mut self, result: &Result<T, sqlx::Error>) {
        self.state = match result {
            Err(error) if may_break(error) => State::Broken,
            _ => State::Settled,
        };
    }

    /// Marks a statement under way (until the next [`settle`](Self::settle)) and lends the
    /// connection for it.
    pub(crate) fn in_use(&mut self) -> &mut PgConnection {
        self.state = State::InUse;
        &mut self.conn
    }

    /// Ends the operation: a settled connection is kept for the next one, a broken one is
    /// closed, one still in use goes back to the pool (whose ping on release drains it).
    pub(crate) fn release(self) {
        let Self {
            mut conn,
            cache,
            state,
        } = self;
        match state {
            State::Settled => cache.keep(conn),
            State::Broken => conn.close_on_drop(),
            State::InUse => {}
        }
    }
}

/// Whether the connection that returned `error` may be unusable: anything but an error the
/// server reported for the statement, and those of the connection-ending classes.
pub(crate) fn may_break(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(database) => database.code().is_none_or(|code| {
            code.starts_with("08") || code.starts_with("57P") || code.starts_with("XX")
        }),
        _ => true,
    }
}

/// [`may_break`] for a store error: the sqlx error in its source chain, if any (an error
/// of the rules leaves the connection as it was).
fn error_may_break(error: &m3_types::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(sqlx_error) = cause.downcast_ref::<sqlx::Error>() {
            return may_break(sqlx_error);
        }
        source = cause.source();
    }
    false
}

#[cfg(all(test, feature = "conformance"))]
#[path = "held_connections_tests.rs"]
mod tests;
