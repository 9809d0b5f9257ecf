//! Opening the execution store's SQLite database file and pool.
//!
//! The rules are the managed-input store's (`sqlite::file`, which is private to
//! that module, hence this small twin; merge them when `sqlite::file` becomes
//! `pub(crate)`):
//!
//! - the path must not be a symlink and, when it exists, must be a regular file;
//! - missing parent directories are created;
//! - the database file (and its `-wal`/`-shm` companions) get mode `0600`;
//! - every pooled connection gets the same PRAGMAs from
//!   [`SqliteConnectOptions`] (`journal_mode=WAL`, `synchronous`,
//!   `busy_timeout`, `foreign_keys=ON`), never a PRAGMA query on the pool.
//!
//! The tunables come from [`SqliteStoreOptions`], shared with the managed-input
//! store.

use std::path::Path;

use m3_types::{Error, Result};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use crate::sqlite::SqliteStoreOptions;

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
        .synchronous(options.get_synchronous())
        .busy_timeout(options.get_busy_timeout())
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(options.get_max_connections())
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
        Ok(meta) if meta.file_type().is_symlink() => Err(Error::managed_input_validation(
            "database path must not be a symlink",
        )
        .with_detail("path", path.display().to_string())),
        Ok(meta) if !meta.is_file() => Err(Error::managed_input_validation(
            "database path must name a file",
        )
        .with_detail("path", path.display().to_string())),
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
