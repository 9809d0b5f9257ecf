//! The database file: path checks, creation with mode 0600, and the write gate shared by
//! every store object on one file in this process.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use m3_types::{Error, Result};

/// Checks the database path, creates its parent directories and (if missing) the file
/// itself with mode 0600, and returns the canonical path. An existing file keeps its mode:
/// only files we create are made private.
///
/// # Errors
/// `managed_input_invalid` if the path is a symlink ("database path must not be a
/// symlink"), exists but is not a regular file ("database path must name a file"), or is a
/// read-only file ("database file is read-only"); `storage_error` for I/O failures.
pub(crate) fn prepare_database_file(path: &Path) -> Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            return Err(
                Error::managed_input_validation("database path must not be a symlink")
                    .with_detail("path", path.display().to_string()),
            );
        }
        Ok(metadata) if !metadata.is_file() => {
            return Err(
                Error::managed_input_validation("database path must name a file")
                    .with_detail("path", path.display().to_string()),
            );
        }
        Ok(metadata) => refuse_read_only(path, &metadata)?,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| io_error("cannot create the database directory", path, e))?;
            }
            create_private_file(path)?;
        }
        Err(error) => return Err(io_error("cannot inspect the database path", path, error)),
    }
    std::fs::canonicalize(path).map_err(|e| io_error("cannot resolve the database path", path, e))
}

/// Refuses an existing file without write permission (by its mode, which also binds root,
/// or because opening it for writing is denied): the store writes, and changing the mode
/// of a file we did not create is not ours to do.
fn refuse_read_only(path: &Path, metadata: &std::fs::Metadata) -> Result<()> {
    let read_only = || {
        Error::managed_input_validation(
            "database file is read-only; m3 needs write access and does not change the permissions of a file it did not create",
        )
        .with_detail("path", path.display().to_string())
    };
    if metadata.permissions().readonly() {
        return Err(read_only());
    }
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == ErrorKind::PermissionDenied => Err(read_only()),
        Err(error) => Err(io_error("cannot open the database file", path, error)),
    }
}

fn io_error(context: &str, path: &Path, error: std::io::Error) -> Error {
    Error::storage(context.to_owned())
        .with_detail("path", path.display().to_string())
        .with_source(error)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        // Another opener created it between our check and our create: fine.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(io_error("cannot create the database file", path, error)),
    }
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(io_error("cannot create the database file", path, error)),
    }
}

/// Sets mode 0600 on the `-wal` and `-shm` companions of a private database file when they
/// exist and are not symlinks (SQLite creates them with the database file's mode). The
/// database file itself is never changed, and the companions of a file its owner shares
/// (group or other bits set) keep their mode too.
pub(crate) fn restrict_permissions(path: &Path) -> Result<()> {
    if !is_private(path)? {
        return Ok(());
    }
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = PathBuf::from(name);
        match std::fs::symlink_metadata(&file) {
            Ok(metadata) if metadata.is_file() => set_private(&file)?,
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(io_error("cannot inspect a database file", &file, error)),
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_private(path: &Path) -> Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path)
        .map_err(|e| io_error("cannot inspect the database file", path, e))?;
    Ok(metadata.permissions().mode() & 0o077 == 0)
}

#[cfg(not(unix))]
fn is_private(_path: &Path) -> Result<bool> {
    Ok(true)
}

#[cfg(unix)]
fn set_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io_error("cannot restrict database file permissions", path, e))
}

#[cfg(not(unix))]
fn set_private(_path: &Path) -> Result<()> {
    Ok(())
}

/// The in-process writer queue of one database file.
///
/// SQLite admits one writer at a time. Writers that meet a held lock wait in SQLite's busy
/// handler, which sleeps in growing steps (1 ms up to 100 ms); with many tasks in one process
/// that turns a queue into a lottery. Every store object on the same file in this process
/// therefore takes this FIFO async mutex before `BEGIN IMMEDIATE`, so in-process writers
/// queue fairly and only other processes meet the busy handler.
pub(crate) type WriteGate = tokio::sync::Mutex<()>;

/// The gate for `path` (shared by every store object on that file in this process).
pub(crate) fn write_gate(path: &Path) -> Arc<WriteGate> {
    static GATES: OnceLock<Mutex<HashMap<PathBuf, Weak<WriteGate>>>> = OnceLock::new();
    let gates = GATES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut gates = gates
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(gate) = gates.get(path).and_then(Weak::upgrade) {
        return gate;
    }
    gates.retain(|_, gate| gate.strong_count() > 0);
    let gate = Arc::new(WriteGate::new(()));
    gates.insert(path.to_path_buf(), Arc::downgrade(&gate));
    gate
}
