//! Opening a SQLite database file for the m3-rs stores.
//!
//! Both SQLite backends (the managed-input store and the execution store) open
//! their database through [`open_pool`], so they share one set of rules:
//!
//! - the path must not be a symlink and, when it exists, must be a regular file;
//! - missing parent directories are created;
//! - the database file (and its `-wal`/`-shm` companions) get mode `0600`;
//! - every pooled connection gets the same PRAGMAs from
//!   [`SqliteConnectOptions`] (`journal_mode=WAL`, `synchronous`,
//!   `busy_timeout`, `foreign_keys=ON`), never a PRAGMA query on the pool.
//!
//! [`SqliteStoreOptions`] carries the tunables and the injectable [`Clock`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{Clock, Error, Result, SystemClock};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

pub use sqlx::sqlite::SqliteSynchronous;

/// Default SQLite busy timeout: how long a writer waits for the write lock.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default number of pooled connections per store object.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;

/// Options shared by the SQLite stores of m3-rs.
///
/// Build with [`SqliteStoreOptions::new`] and the consuming setters; every
/// setter documents its default.
///
/// ```
/// use std::time::Duration;
/// use m3_store::{SqliteStoreOptions, SqliteSynchronous};
///
/// let options = SqliteStoreOptions::new()
///     .busy_timeout(Duration::from_secs(10))
///     .synchronous(SqliteSynchronous::Normal);
/// assert_eq!(options.get_busy_timeout(), Duration::from_secs(10));
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct SqliteStoreOptions {
    busy_timeout: Duration,
    synchronous: SqliteSynchronous,
    max_connections: u32,
    clock: Arc<dyn Clock>,
}

impl SqliteStoreOptions {
    /// Options with every default: busy timeout 5 s, `synchronous=FULL`,
    /// 4 pooled connections, the [`SystemClock`].
    pub fn new() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            synchronous: SqliteSynchronous::Full,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            clock: Arc::new(SystemClock),
        }
    }

    /// How long a connection waits for a lock held by another connection or
    /// process before failing with `storage_error` (default 5 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The `synchronous` PRAGMA of every connection (default `FULL`: a
    /// committed lease, response or event survives power loss).
    pub fn synchronous(mut self, synchronous: SqliteSynchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Maximum number of pooled connections (default 4, minimum 1).
    pub fn max_connections(mut self, max_connections: u32) -> Self {
        self.max_connections = max_connections.max(1);
        self
    }

    /// The clock used for every timestamp and lease expiry (default
    /// [`SystemClock`]; tests inject a `ManualClock`).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The configured busy timeout.
    pub fn get_busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// The configured `synchronous` mode.
    pub fn get_synchronous(&self) -> SqliteSynchronous {
        self.synchronous
    }

    /// The configured maximum number of pooled connections.
    pub fn get_max_connections(&self) -> u32 {
        self.max_connections
    }

    /// The configured clock.
    pub fn get_clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl Default for SqliteStoreOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// Opens (creating if needed) the database file at `path` and returns a pool.
///
/// # Errors
/// - `invalid_argument` if `path` is empty; `managed_input_invalid` if it is a
///   symlink or not a regular file (the same codes as the managed-input store);
/// - `storage_error` if directories or the file cannot be created or SQLite
///   cannot open it.
pub(crate) async fn open_pool(path: &Path, options: &SqliteStoreOptions) -> Result<SqlitePool> {
    if path.as_os_str().is_empty() {
        return Err(Error::model_validation("database path must not be empty"));
    }
    refuse_non_file(path)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::storage("could not create the database directory")
                .with_detail("path", parent.display().to_string())
                .with_source(e)
        })?;
    }
    create_private_file(path)?;

    let connect = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(options.synchronous)
        .busy_timeout(options.busy_timeout)
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(options.max_connections)
        .min_connections(0)
        .connect_with(connect)
        .await
        .map_err(|e| sqlx_error("could not open the database", e))?;
    for suffix in ["-wal", "-shm"] {
        let mut companion = path.as_os_str().to_owned();
        companion.push(suffix);
        restrict_permissions(Path::new(&companion))?;
    }
    Ok(pool)
}

fn refuse_non_file(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(Error::managed_input_validation("database path must not be a symlink")
                .with_detail("path", path.display().to_string()))
        }
        Ok(meta) if !meta.is_file() => {
            Err(Error::managed_input_validation("database path must name a file")
                .with_detail("path", path.display().to_string()))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::storage("could not inspect the database path")
            .with_detail("path", path.display().to_string())
            .with_source(e)),
    }
}

fn create_private_file(path: &Path) -> Result<()> {
    let mut open = std::fs::OpenOptions::new();
    open.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(0o600);
    }
    open.open(path).map_err(|e| {
        Error::storage("could not create the database file")
            .with_detail("path", path.display().to_string())
            .with_source(e)
    })?;
    restrict_permissions(path)
}

/// Sets mode `0600` on `path` if it exists and is not a symlink.
fn restrict_permissions(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o777 != 0o600 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                        .map_err(|e| {
                            Error::storage("could not restrict database file permissions")
                                .with_detail("path", path.display().to_string())
                                .with_source(e)
                        })?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Maps a sqlx error to `storage_error`, keeping SQLite's extended result code
/// in the `sqlite_code` detail.
pub(crate) fn sqlx_error(context: &'static str, error: sqlx::Error) -> Error {
    let code = error
        .as_database_error()
        .and_then(|db| db.code().map(|c| c.into_owned()));
    let err = Error::storage(context);
    let err = match code {
        Some(code) => err.with_detail("sqlite_code", code),
        None => err,
    };
    err.with_source(error)
}
