//! Opening the connection pool on a database file and the write-transaction discipline,
//! shared by the managed-input store and the execution store.
//!
//! Both stores open their file the same way ([`open_pool`]: the path checks and 0600 mode of
//! [`prepare_database_file`], WAL, `synchronous`, busy timeout and `foreign_keys` on every
//! pooled connection) and write the same way ([`begin_write`]: queue on the file's in-process
//! [`WriteGate`], then `BEGIN IMMEDIATE`), so writers of both stores on one file in one process
//! take turns fairly.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use m3_types::Result;
use sqlx::pool::{PoolConnection, PoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqliteSynchronous};
use sqlx::{ConnectOptions, Sqlite, SqliteConnection};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::error::storage;
use super::file::{WriteGate, prepare_database_file, restrict_permissions};
use super::options::SqliteStoreOptions;
use super::recognize::refuse_foreign_database;

/// Checks and creates the database file (see [`prepare_database_file`]), opens a pool on it
/// with the PRAGMAs of `options` set on every connection, restricts the `-wal`/`-shm`
/// companions to 0600, and returns the pool with the canonical path.
///
/// # Errors
/// `managed_input_invalid` if the path is a symlink or not a regular file; `invalid_argument`
/// (reason `invalid_store`) if an existing file is not an m3 store (see
/// [`refuse_foreign_database`]); `storage_error` if the file cannot be created or SQLite
/// cannot open it.
pub(crate) async fn open_pool(
    path: &Path,
    options: &SqliteStoreOptions,
) -> Result<(SqlitePool, PathBuf)> {
    let path = prepare_database_file(path)?;
    // Before the first PRAGMA: another application's file is refused untouched.
    refuse_foreign_database(&path).await?;
    let connect = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(options.get_synchronous())
        .busy_timeout(options.get_busy_timeout())
        .foreign_keys(true);
    let pool = PoolOptions::<Sqlite>::new()
        .max_connections(options.get_max_connections())
        .min_connections(0)
        .test_before_acquire(false)
        .acquire_timeout(options.get_busy_timeout().max(Duration::from_secs(30)))
        .connect_with(connect)
        .await
        .map_err(|e| {
            storage("cannot open the database", e).with_detail("path", path.display().to_string())
        })?;
    restrict_permissions(&path)?;
    Ok((pool, path))
}

/// A write transaction plus the in-process writer queue slot it holds. Dereferences to the
/// connection, so statements run on `&mut *write`.
///
/// The transaction is opened and closed with plain `BEGIN IMMEDIATE`/`COMMIT`/`ROLLBACK`
/// statements rather than sqlx's `Transaction`: sqlx counts the transactions it opened, and
/// a `COMMIT` that fails after SQLite already rolled the transaction back (a full disk,
/// `SQLITE_FULL`) leaves that count at one forever, so every later `begin` on the connection
/// was refused. Here a failed write always ends with [`end_failed_transaction`], and a
/// connection that cannot be shown clean is closed, never returned to the pool.
///
/// Dropping a `WriteTx` without [`finish`](Self::finish) (a cancelled operation) rolls the
/// transaction back at once, in a task that keeps the writer queue slot until it is done:
/// the file's write lock must not outlive the operation that took it. This holds from before
/// `BEGIN IMMEDIATE` is sent: a caller cancelled while it waits for the lock leaves nothing.
pub(crate) struct WriteTx {
    /// `None` only once [`finish`](Self::finish) or `drop` took it.
    held: Option<HeldWrite>,
}

/// What a [`WriteTx`] holds: the connection inside its transaction, and the queue slot.
struct HeldWrite {
    conn: PoolConnection<Sqlite>,
    slot: OwnedMutexGuard<()>,
}

/// Queues behind this process's other writers on the file (`gate`), then opens
/// `BEGIN IMMEDIATE` on a pooled connection.
///
/// # Errors
/// `storage_error` if no connection is available or the write lock is not granted within the
/// busy timeout.
pub(crate) async fn begin_write(pool: &SqlitePool, gate: &Arc<WriteGate>) -> Result<WriteTx> {
    let slot = Arc::clone(gate).lock_owned().await;
    let conn = pool
        .acquire()
        .await
        .map_err(|e| storage("cannot begin a write transaction", e))?;
    // Held before `BEGIN` is sent: a caller dropped while it waits for the write lock must not
    // return a connection to the pool that then enters the transaction (it would hold the
    // file's write lock with nobody to end it).
    let mut write = WriteTx {
        held: Some(HeldWrite { conn, slot }),
    };
    if let Err(error) = sqlx::query("BEGIN IMMEDIATE").execute(&mut *write).await {
        return write
            .finish(Err(storage("cannot begin a write transaction", error)))
            .await;
    }
    Ok(write)
}

impl WriteTx {
    /// Commits on success, rolls back on failure (or if the commit fails), and returns
    /// `result`.
    pub(crate) async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let Some(HeldWrite { mut conn, slot }) = self.held.take() else {
            return result;
        };
        let result = match result {
            Ok(value) => match sqlx::query("COMMIT").execute(&mut *conn).await {
                Ok(_) => return Ok(value),
                Err(e) => Err(storage("cannot commit a write transaction", e)),
            },
            Err(error) => Err(error),
        };
        if !end_failed_transaction(&mut conn).await {
            conn.close_on_drop();
        }
        drop(slot);
        result
    }

    fn conn(&self) -> &PoolConnection<Sqlite> {
        match &self.held {
            Some(held) => &held.conn,
            // Taken only by `finish` (which consumes the value) and `drop`.
            None => unreachable!("a WriteTx is used after finish"),
        }
    }

    fn conn_mut(&mut self) -> &mut PoolConnection<Sqlite> {
        match &mut self.held {
            Some(held) => &mut held.conn,
            None => unreachable!("a WriteTx is used after finish"),
        }
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        let Some(HeldWrite { mut conn, slot }) = self.held.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if !end_failed_transaction(&mut conn).await {
                        conn.close_on_drop();
                    }
                    drop(slot);
                });
            }
            // No runtime to roll back on: closing the connection rolls back.
            Err(_) => conn.close_on_drop(),
        }
    }
}

/// Ends the transaction a failed write may have left open and says whether the connection is
/// now outside any transaction (and may be used again). `false`: the caller closes it.
///
/// `ROLLBACK` is issued whatever state SQLite is in: after some failures (a `COMMIT` on a full
/// disk) SQLite has already rolled back and the statement fails harmlessly; after others the
/// transaction is still open. Which case it was is then proven, not guessed from an error
/// message: a connection inside a transaction cannot begin another one.
async fn end_failed_transaction(conn: &mut SqliteConnection) -> bool {
    if let Err(error) = sqlx::query("ROLLBACK").execute(&mut *conn).await {
        tracing::debug!(%error, "rollback after a failed write");
    }
    match sqlx::raw_sql("BEGIN; ROLLBACK").execute(&mut *conn).await {
        Ok(_) => true,
        Err(error) => {
            tracing::warn!(%error, "a failed write left its transaction open; closing the connection");
            false
        }
    }
}

impl Deref for WriteTx {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        self.conn()
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.conn_mut()
    }
}

/// The store object's own connection, outside the pool: every hot write runs on it, and
/// reads use it while no write does. Two reasons. sqlx pings a pooled connection on every
/// return to the pool, which is one more hand-off to the connection's worker thread per
/// operation; and a connection that did the last write keeps its page cache, while another
/// one must drop its cache after every commit it did not make. `None` until first used, and
/// again after an operation was cancelled half-way (its connection was closed, see
/// [`ScriptTx`]).
#[derive(Debug, Default)]
pub(crate) struct Primary {
    home: Arc<Mutex<Option<SqliteConnection>>>,
}

impl Primary {
    /// Takes the connection (opening it with the pool's options if there is none), holding
    /// the slot until it is put back.
    async fn take(
        &self,
        pool: &SqlitePool,
    ) -> Result<(SqliteConnection, OwnedMutexGuard<Option<SqliteConnection>>)> {
        let mut home = Arc::clone(&self.home).lock_owned().await;
        let conn = match home.take() {
            Some(conn) => conn,
            None => pool
                .connect_options()
                .connect()
                .await
                .map_err(|e| storage("cannot open the store's connection", e))?,
        };
        Ok((conn, home))
    }

    /// The connection for a read: the primary one if it is idle and open, else a pooled one.
    pub(crate) async fn reader(&self, pool: &SqlitePool) -> Result<Reader> {
        if let Ok(mut home) = Arc::clone(&self.home).try_lock_owned()
            && let Some(conn) = home.take()
        {
            return Ok(Reader::Primary { conn, home });
        }
        let conn = pool
            .acquire()
            .await
            .map_err(|e| storage("cannot acquire a managed-input connection", e))?;
        Ok(Reader::Pooled(conn))
    }
}

/// A connection lent for reads (see [`Primary::reader`]). [`done`](Self::done) returns it;
/// dropped instead (an error or a cancelled read), a primary connection is closed and
/// reopened on next use.
pub(crate) enum Reader {
    Primary {
        conn: SqliteConnection,
        home: OwnedMutexGuard<Option<SqliteConnection>>,
    },
    Pooled(PoolConnection<Sqlite>),
}

impl Reader {
    /// Whether this is the store object's own connection.
    #[cfg(test)]
    pub(crate) fn is_primary(&self) -> bool {
        matches!(self, Self::Primary { .. })
    }

    /// Returns the connection.
    pub(crate) fn done(self) {
        if let Self::Primary { conn, mut home } = self {
            *home = Some(conn);
        }
    }
}

impl Deref for Reader {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        match self {
            Self::Primary { conn, .. } => conn,
            Self::Pooled(conn) => conn,
        }
    }
}

impl DerefMut for Reader {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            Self::Primary { conn, .. } => conn,
            Self::Pooled(conn) => conn,
        }
    }
}

/// How a write script's commit waits for the disk. A write that guards nothing durable (a
/// round's `start_delivery`: should the row be lost with the operating system, it reads
/// `response_validated`, which recovery fails exactly as `delivery_started`) skips the flush
/// the file is configured for, by lowering `synchronous` around its own commit; the next
/// flushed commit makes its frames durable too, since the WAL is flushed in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitFlush {
    /// The connection's setting as configured (also where it does not flush anyway).
    AsConfigured,
    /// Configured `FULL`: the script runs at `NORMAL` and puts `FULL` back.
    SkipFull,
    /// Configured `EXTRA`: the script runs at `NORMAL` and puts `EXTRA` back.
    SkipExtra,
}

impl CommitFlush {
    /// The skip for a file configured with `synchronous`.
    pub(crate) fn skipping(synchronous: SqliteSynchronous) -> Self {
        match synchronous {
            SqliteSynchronous::Full => Self::SkipFull,
            SqliteSynchronous::Extra => Self::SkipExtra,
            SqliteSynchronous::Normal | SqliteSynchronous::Off => Self::AsConfigured,
        }
    }

    /// The statement that puts the configured setting back, if the script changed it.
    pub(crate) fn restore(self) -> Option<&'static str> {
        match self {
            Self::AsConfigured => None,
            Self::SkipFull => Some("PRAGMA synchronous=FULL"),
            Self::SkipExtra => Some("PRAGMA synchronous=EXTRA"),
        }
    }
}

/// A write transaction that the caller's first statement opens itself (a script starting
/// with `BEGIN IMMEDIATE;`), so opening the transaction and the first read or guarded write
/// cost one round trip to the connection's worker thread instead of two. It runs on the
/// store object's [`Primary`] connection, held exclusively with the writer queue slot;
/// [`finish`](Self::finish) commits or rolls back and puts the connection back. A `ScriptTx`
/// dropped before `finish` (a cancelled operation) drops its connection, which closes it:
/// SQLite rolls the transaction back, and no connection is ever reused inside a transaction.
pub(crate) struct ScriptTx {
    conn: SqliteConnection,
    committed: bool,
    /// Set by a script that lowers `synchronous`: what a failed script must put back.
    flush: CommitFlush,
    home: OwnedMutexGuard<Option<SqliteConnection>>,
    _slot: OwnedMutexGuard<()>,
}

/// Queues behind this process's other writers on the file (`gate`) and takes the store
/// object's primary connection for a [`ScriptTx`]. The caller's first statement must begin
/// with `BEGIN IMMEDIATE;`.
///
/// # Errors
/// `storage_error` if the connection cannot be opened.
pub(crate) async fn begin_script(
    pool: &SqlitePool,
    primary: &Primary,
    gate: &Arc<WriteGate>,
) -> Result<ScriptTx> {
    let slot = Arc::clone(gate).lock_owned().await;
    let (conn, home) = primary.take(pool).await?;
    Ok(ScriptTx {
        conn,
        committed: false,
        flush: CommitFlush::AsConfigured,
        home,
        _slot: slot,
    })
}

impl ScriptTx {
    /// Records that a script ending in `COMMIT` ran to its end: the transaction is closed.
    pub(crate) fn mark_committed(&mut self) {
        self.committed = true;
    }

    /// Records that the script runs with `flush` (see [`CommitFlush`]): if it fails before
    /// its end, [`finish`](Self::finish) puts the configured `synchronous` back.
    pub(crate) fn set_flush(&mut self, flush: CommitFlush) {
        self.flush = flush;
    }

    /// Commits on success, rolls back on failure (or if the commit fails), and returns
    /// `result`. Nothing is left to do after [`mark_committed`](Self::mark_committed). The
    /// connection goes back to the store object unless its transaction could not be closed.
    pub(crate) async fn finish<T>(self, result: Result<T>) -> Result<T> {
        let Self {
            mut conn,
            committed,
            flush,
            mut home,
            _slot,
        } = self;
        if committed {
            *home = Some(conn);
            return result;
        }
        let result = match result {
            Ok(value) => match sqlx::query("COMMIT").execute(&mut conn).await {
                Ok(_) => {
                    *home = Some(conn);
                    return Ok(value);
                }
                Err(e) => Err(storage("cannot commit a write transaction", e)),
            },
            Err(error) => Err(error),
        };
        // A connection left inside a transaction is dropped: closing it ends the transaction.
        let closed = end_failed_transaction(&mut conn).await;
        if closed && restore_flush(&mut conn, flush).await {
            *home = Some(conn);
        }
        result
    }
}

/// Puts the configured `synchronous` back after a script that lowered it failed; `false`
/// (the connection must be closed) if that fails too.
async fn restore_flush(conn: &mut SqliteConnection, flush: CommitFlush) -> bool {
    let Some(statement) = flush.restore() else {
        return true;
    };
    match sqlx::query(statement).execute(conn).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cannot restore synchronous; closing the connection");
            false
        }
    }
}

impl Deref for ScriptTx {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for ScriptTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}
