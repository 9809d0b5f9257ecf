//! [`SqliteManagedInputStore`]: construction, the shared pool, lazy schema creation and the
//! write-transaction discipline every mutation follows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use m3_types::{Clock, Result};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqlitePool, SqliteRow, SqliteSynchronous};
use time::OffsetDateTime;
use tokio::sync::OnceCell;

use super::connect::{
    CommitFlush, Primary, Reader, ScriptTx, WriteTx, begin_script, begin_write, open_pool,
};
use super::error::storage;
use super::file::{WriteGate, restrict_permissions, write_gate};
use super::options::SqliteStoreOptions;
use super::row_snapshot::ImageCache;
use super::schema;
use crate::RoundRef;
use crate::signal::datagram::DatagramSignal;

/// The SQLite [`ManagedInputStore`](crate::ManagedInputStore), on-disk compatible with the
/// Python original (sf-m3 0.3.1).
///
/// One long-lived connection pool per store object (cloning the store shares it; dropping the
/// last clone closes it, so no `close()` is needed). The database runs in WAL mode. Every
/// mutation is one `BEGIN IMMEDIATE` transaction whose `UPDATE ... WHERE` repeats the
/// compare-and-set conditions (owner, token, status, lease expiry) and must change exactly
/// one row; when it does not, a read in the same transaction decides the outcome. A round
/// this store object read or wrote before is written in one round trip to SQLite, guarded by
/// the exact stored values it last decoded (a row changed by anyone else falls back to the
/// full path); a row that does not decode is never changed. No transaction is held across
/// anything but database calls.
///
/// Reopening the same path (a new store object) reads the same rounds; several store objects
/// on one file, in one process or in several, are safe together.
///
/// ```no_run
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::{ManagedInputStore, SqliteManagedInputStore};
///
/// let store = SqliteManagedInputStore::open("executions.sqlite").await?;
/// for record in store.list_rounds("exec-1").await? {
///     println!("{} {}", record.pending.round_id, record.status.as_str());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteManagedInputStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: SqlitePool,
    clock: Arc<dyn Clock>,
    gate: Arc<WriteGate>,
    schema: OnceCell<()>,
    path: PathBuf,
    /// Validated images of the rounds this store object read or wrote last (the one-trip
    /// write path, see [`super::image`]).
    pub(crate) images: ImageCache,
    /// The store object's own connection for hot writes and idle-time reads.
    primary: Primary,
    /// Where committed changes are announced (shared by every store on the file).
    pub(crate) signal: Arc<DatagramSignal>,
    /// How `start_delivery` commits: without the configured flush where it is known.
    pub(crate) delivery_flush: CommitFlush,
}

impl SqliteManagedInputStore {
    /// Opens (creating if needed) the database at `path` with default options.
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteStoreOptions::new()).await
    }

    /// Opens (creating if needed) the database at `path`.
    ///
    /// Creates missing parent directories and the file (mode 0600; an existing file and its
    /// `-wal`/`-shm` companions are restricted to 0600 too), switches the database to WAL,
    /// and creates the managed-input tables idempotently, adding any column a pre-existing
    /// partial table lacks.
    ///
    /// # Errors
    /// - `managed_input_invalid`: the path is a symlink or not a regular file. (Any
    ///   timezone-aware clock is accepted and normalized to UTC.)
    /// - `storage_error`: the file cannot be created or opened, or the schema cannot be
    ///   created (SQLite's extended result code in the details).
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteStoreOptions) -> Result<Self> {
        let (pool, path) = open_pool(path.as_ref(), &options).await?;
        let signal = DatagramSignal::for_database(&path, options.get_change_signal());
        let flush = CommitFlush::skipping(options.get_synchronous());
        let store = Self::from_parts(pool, Arc::clone(options.get_clock()), path.clone(), signal)
            .with_delivery_flush(flush);
        store.ensure_schema().await?;
        restrict_permissions(&path)?;
        tracing::debug!(path = %path.display(), "opened managed-input store");
        Ok(store)
    }

    /// A store on an existing pool (for example the execution store's), sharing its
    /// connections and file. The managed-input tables are created lazily, on the first
    /// operation, and that first operation also switches the file to WAL.
    ///
    /// Any timezone-aware clock is accepted; its time is normalized to UTC
    /// ([`crate::store_now`]).
    ///
    /// Its changes are announced on the file's change signal (cross-process unless
    /// [`M3_CHANGE_SIGNAL=off`](crate::signal::SIGNAL_ENV)).
    ///
    /// # Errors
    /// None today (the `Result` is kept for callers).
    pub fn from_pool(pool: SqlitePool, clock: Arc<dyn Clock>) -> Result<Self> {
        let path = pool_path(&pool);
        let signal = DatagramSignal::for_database(&path, crate::signal::signal_enabled_by_env());
        Ok(Self::from_parts(pool, clock, path, signal))
    }

    /// A store on an existing pool announcing its changes on `signal` (the execution
    /// store's), whose connections were opened with `synchronous`.
    pub(crate) fn from_pool_with_signal(
        pool: SqlitePool,
        clock: Arc<dyn Clock>,
        signal: Arc<DatagramSignal>,
        synchronous: SqliteSynchronous,
    ) -> Self {
        let path = pool_path(&pool);
        Self::from_parts(pool, clock, path, signal)
            .with_delivery_flush(CommitFlush::skipping(synchronous))
    }

    /// Sets how `start_delivery` commits. Only a store that knows its connections'
    /// `synchronous` skips a flush: one on a foreign pool ([`from_pool`](Self::from_pool))
    /// commits every write as configured.
    fn with_delivery_flush(mut self, flush: CommitFlush) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.delivery_flush = flush;
        }
        self
    }

    fn from_parts(
        pool: SqlitePool,
        clock: Arc<dyn Clock>,
        path: PathBuf,
        signal: Arc<DatagramSignal>,
    ) -> Self {
        let gate = write_gate(&path);
        Self {
            inner: Arc::new(Inner {
                pool,
                clock,
                gate,
                schema: OnceCell::new(),
                path,
                images: ImageCache::default(),
                primary: Primary::default(),
                signal,
                delivery_flush: CommitFlush::AsConfigured,
            }),
        }
    }

    /// The database file this store writes.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The connection pool (shareable with other stores on the same file).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Creates the managed-input tables once per store object.
    pub(crate) async fn ensure_schema(&self) -> Result<()> {
        self.inner
            .schema
            .get_or_try_init(|| self.inner.initialize())
            .await
            .map(|_| ())
    }
}

/// The canonical path of the file a pool opens.
fn pool_path(pool: &SqlitePool) -> PathBuf {
    let configured = pool.connect_options().get_filename().to_path_buf();
    std::fs::canonicalize(&configured).unwrap_or(configured)
}

impl Inner {
    async fn initialize(&self) -> Result<()> {
        // journal_mode cannot change inside a transaction; it persists in the file.
        sqlx::query("PRAGMA journal_mode=WAL")
            .execute(&self.pool)
            .await
            .map_err(|e| storage("cannot switch the database to WAL", e))?;
        let mut reader = self
            .pool
            .acquire()
            .await
            .map_err(|e| storage("cannot acquire a managed-input connection", e))?;
        if schema::is_current(&mut reader).await? {
            return Ok(());
        }
        drop(reader);
        let mut write = self.begin_write().await?;
        let result = schema::initialize(&mut write).await;
        write.finish(result).await
    }

    /// "Now" from the store's clock, by the shared rule [`crate::store_now`].
    ///
    /// # Errors
    /// None today; the `Result` keeps every call site ready for a fallible clock.
    pub(crate) fn now(&self) -> Result<OffsetDateTime> {
        Ok(crate::store_now(self.clock.as_ref()))
    }

    /// Queues behind this process's other writers on the file, then opens `BEGIN IMMEDIATE`.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx> {
        begin_write(&self.pool, &self.gate).await
    }

    /// Queues behind this process's other writers on the file and acquires a connection for a
    /// write whose first statement begins with `BEGIN IMMEDIATE;` (the hot paths).
    pub(crate) async fn begin_script(&self) -> Result<ScriptTx> {
        begin_script(&self.pool, &self.primary, &self.gate).await
    }

    /// Runs a one-trip write script (`BEGIN IMMEDIATE; <UPDATE pinned to the round's image>
    /// RETURNING ...; ...; COMMIT`, see [`super::image`]) and returns the row it changed.
    /// `None` when it matched no row: the stored round is not the image any more, which is
    /// forgotten, and nothing was written.
    ///
    /// # Errors
    /// `storage_error` (`what` says which write) if the script fails; it is rolled back.
    pub(crate) async fn write_if_unchanged<'q>(
        &self,
        round: &RoundRef,
        script: Query<'q, Sqlite, SqliteArguments>,
        flush: CommitFlush,
        what: &'static str,
    ) -> Result<Option<SqliteRow>> {
        let mut write = self.begin_script().await?;
        write.set_flush(flush);
        let rows = script
            .fetch_all(&mut *write)
            .await
            .map_err(|e| storage(what, e));
        if rows.is_ok() {
            write.mark_committed();
        }
        let mut rows = write.finish(rows).await?;
        match (rows.pop(), rows.is_empty()) {
            (Some(row), true) => Ok(Some(row)),
            _ => {
                self.images.forget(round);
                Ok(None)
            }
        }
    }

    /// A connection for reads: the store object's own one while no write uses it (its page
    /// cache is warm), else a pooled one.
    pub(crate) async fn reader(&self) -> Result<Reader> {
        self.primary.reader(&self.pool).await
    }
}

#[cfg(test)]
impl Inner {
    /// The `synchronous` setting of this store object's own connection, read on it.
    pub(crate) async fn primary_synchronous(&self) -> Result<i64> {
        let mut reader = self.primary.reader(&self.pool).await?;
        assert!(
            reader.is_primary(),
            "the store's own connection is busy or closed"
        );
        let setting = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *reader)
            .await
            .map_err(|e| storage("cannot read synchronous", e))?;
        reader.done();
        Ok(setting)
    }
}
