//! The directory store's files: where each execution and round lives in the directory, the
//! lock every operation takes, and the atomic commit of what an operation decided to write.
//!
//! Layout of a store directory:
//!
//! ```text
//! <dir>/lock                              the lock file (never written, only locked)
//! <dir>/journal.json                      a commit of several files, while it is applied
//! <dir>/executions/<hex id>.json          one execution: record, canonical spec, event log
//! <dir>/rounds/<hex execution id>/<hex round id>.json
//!                                         one round: record and redacted projection
//! <dir>/changes.json                      the change feed (`feed.rs`)
//! ```
//!
//! Ids are hex-encoded into file names (any id, any file system, case-insensitive ones too),
//! which limits them to [`MAX_ID_BYTES`] bytes.
//!
//! Every operation holds the lock file's lock for its whole read-decide-write:
//! [`File::lock`] (exclusive) for a mutation, [`File::lock_shared`] for a read. It is an
//! advisory lock on the file (`flock` on Unix), so it serializes the store objects of one
//! process and the processes on one host alike. A mutation stages the files it changes and
//! [`Locked::commit`] writes them: one file by temp file + `fsync` + rename, several through
//! a journal written the same way first, so a crash leaves either all of them or none (the
//! next locker finishes an interrupted journal).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Component, Path, PathBuf};

use m3_types::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The longest id (in UTF-8 bytes) a file name can hold here: twice that in hex, plus
/// `.json.tmp`, stays under the usual 255-byte limit of a file name.
const MAX_ID_BYTES: usize = 120;

/// The lock file, relative to the directory.
const LOCK_FILE: &str = "lock";
/// The journal of a commit that writes several files, relative to the directory.
const JOURNAL_FILE: &str = "journal.json";
/// The subdirectory of the execution files.
const EXECUTIONS: &str = "executions";
/// The subdirectory of the round directories (one per execution).
const ROUNDS: &str = "rounds";
/// The change feed, relative to the directory.
const CHANGES_FILE: &str = "changes.json";

/// What a file of the store holds, by where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// An execution file.
    Execution,
    /// A round file.
    Round,
    /// Anything else (the feed).
    Other,
}

/// A `storage_error` for a failed file operation: what was being done, and why it failed.
pub(crate) fn io_error(what: &str, path: &Path, error: std::io::Error) -> Error {
    Error::storage(format!("{what} {}: {error}", path.display()))
        .with_detail("path", path.display().to_string())
}

/// The `storage_error` of an id too long to be stored here (see [`MAX_ID_BYTES`]).
pub(crate) fn id_too_long() -> Error {
    Error::storage(format!(
        "ids longer than {MAX_ID_BYTES} bytes cannot be stored in a directory store"
    ))
}

/// The file name stem of an id: its UTF-8 bytes in lowercase hex; `None` when the id is
/// too long for a file name (such an id cannot be stored here, so it never exists).
fn encode_id(id: &str) -> Option<String> {
    if id.len() > MAX_ID_BYTES {
        return None;
    }
    Some(id.bytes().map(|byte| format!("{byte:02x}")).collect())
}

/// The id a file name stem encodes (`None`: not a stem this store wrote).
fn decode_id(stem: &str) -> Option<String> {
    if !stem.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..stem.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(stem.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// A store directory: its canonical path and its layout.
#[derive(Debug)]
pub(crate) struct Directory {
    /// The directory's canonical path.
    root: PathBuf,
}

impl Directory {
    /// Opens (creating if needed) the store directory at `path`.
    ///
    /// # Errors
    /// `storage_error` if the directory cannot be created or resolved.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        for sub in [EXECUTIONS, ROUNDS] {
            let dir = path.join(sub);
            fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, e))?;
        }
        let root = path
            .canonicalize()
            .map_err(|e| io_error("cannot resolve", path, e))?;
        Ok(Self { root })
    }

    /// The directory's canonical path.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The file of execution `id` (`None`: an id too long to be stored).
    pub(crate) fn execution_path(&self, id: &str) -> Option<PathBuf> {
        let name = encode_id(id)?;
        Some(self.root.join(EXECUTIONS).join(format!("{name}.json")))
    }

    /// The directory of the rounds of execution `execution_id`.
    fn rounds_dir(&self, execution_id: &str) -> Option<PathBuf> {
        Some(self.root.join(ROUNDS).join(encode_id(execution_id)?))
    }

    /// The file of round `round_id` of `execution_id` (`None`: an id too long to be stored).
    pub(crate) fn round_path(&self, execution_id: &str, round_id: &str) -> Option<PathBuf> {
        let name = encode_id(round_id)?;
        Some(self.rounds_dir(execution_id)?.join(format!("{name}.json")))
    }

    /// The change feed's file.
    pub(crate) fn changes_path(&self) -> PathBuf {
        self.root.join(CHANGES_FILE)
    }

    /// What the file at `path` holds, by its directory.
    pub(crate) fn kind_of(&self, path: &Path) -> FileKind {
        match path
            .strip_prefix(&self.root)
            .ok()
            .and_then(|p| p.components().next())
        {
            Some(Component::Normal(top)) if top == EXECUTIONS => FileKind::Execution,
            Some(Component::Normal(top)) if top == ROUNDS => FileKind::Round,
            _ => FileKind::Other,
        }
    }

    /// Every execution file.
    ///
    /// # Errors
    /// `storage_error` if the directory cannot be listed.
    pub(crate) fn execution_files(&self) -> Result<Vec<PathBuf>> {
        Ok(json_files(&self.root.join(EXECUTIONS))?
            .into_iter()
            .map(|(_, path)| path)
            .collect())
    }

    /// Every round file of `execution_id`, with the round id its name encodes.
    ///
    /// # Errors
    /// `storage_error` if the directory cannot be listed.
    pub(crate) fn round_files(&self, execution_id: &str) -> Result<Vec<(String, PathBuf)>> {
        match self.rounds_dir(execution_id) {
            Some(dir) => json_files(&dir),
            None => Ok(Vec::new()),
        }
    }

    /// The id of every execution that has a rounds directory (the pending-round listing
    /// reads them all).
    ///
    /// # Errors
    /// `storage_error` if the directory cannot be listed.
    pub(crate) fn round_executions(&self) -> Result<Vec<String>> {
        let dir = self.root.join(ROUNDS);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io_error("cannot list", &dir, error)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| io_error("cannot list", &dir, e))?.path();
            let id = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(decode_id);
            if let Some(id) = id.filter(|_| path.is_dir()) {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Takes the directory's lock (exclusive for a mutation, shared for a read), waiting
    /// for it. Blocks the thread: call it from `spawn_blocking`. An exclusive locker first
    /// finishes a commit that a crashed process left in the journal; a shared one that
    /// finds such a journal takes the exclusive lock instead, to do the same.
    ///
    /// # Errors
    /// `storage_error` if the lock file cannot be opened or locked, or the journal applied.
    pub(crate) fn lock(&self, exclusive: bool) -> Result<Locked<'_>> {
        let path = self.root.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_error("cannot open the lock file", &path, e))?;
        if exclusive {
            file.lock().map_err(|e| io_error("cannot lock", &path, e))?;
            self.recover()?;
        } else {
            file.lock_shared()
                .map_err(|e| io_error("cannot lock", &path, e))?;
            if self.root.join(JOURNAL_FILE).exists() {
                drop(file);
                return self.lock(true);
            }
        }
        Ok(Locked {
            dir: self,
            _lock: file,
            exclusive,
            staged: BTreeMap::new(),
        })
    }

    /// Applies and removes the journal of an interrupted commit, if there is one. Called
    /// under the exclusive lock.
    fn recover(&self) -> Result<()> {
        let path = self.root.join(JOURNAL_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_error("cannot read the journal", &path, error)),
        };
        let entries: Vec<JournalEntry> = serde_json::from_str(&text).map_err(|e| {
            Error::storage(format!("the journal {} is damaged: {e}", path.display()))
        })?;
        self.apply(&entries)?;
        fs::remove_file(&path).map_err(|e| io_error("cannot remove the journal", &path, e))?;
        sync_dir(&self.root)
    }

    /// Writes every journal entry to its file.
    fn apply(&self, entries: &[JournalEntry]) -> Result<()> {
        for entry in entries {
            let relative = Path::new(&entry.path);
            let safe = relative
                .components()
                .all(|part| matches!(part, Component::Normal(_)));
            if !safe {
                return Err(Error::storage(format!(
                    "the journal names a path outside the store: {}",
                    entry.path
                )));
            }
            write_atomic(&self.root.join(relative), entry.contents.as_bytes())?;
        }
        Ok(())
    }
}

/// One file of a multi-file commit: its path relative to the directory and its contents.
#[derive(Debug, Serialize, Deserialize)]
struct JournalEntry {
    /// The file's path relative to the store directory.
    path: String,
    /// Its new contents (JSON text).
    contents: String,
}

/// The directory under its lock, and the files an operation staged for its commit. Dropping
/// it without [`commit`](Self::commit) writes nothing and releases the lock.
#[derive(Debug)]
pub(crate) struct Locked<'d> {
    /// The locked directory.
    dir: &'d Directory,
    /// Holds the lock until dropped (closing the file releases it).
    _lock: File,
    /// Whether the lock is exclusive (only then may files be staged).
    exclusive: bool,
    /// The files to write at the commit: path and new contents.
    staged: BTreeMap<PathBuf, String>,
}

impl Locked<'_> {
    /// The directory's layout.
    pub(crate) fn dir(&self) -> &Directory {
        self.dir
    }

    /// The text of the file at `path` as this operation sees it (staged, else stored);
    /// `None` if there is no such file.
    ///
    /// # Errors
    /// `storage_error` if the file exists but cannot be read.
    pub(crate) fn read_text(&self, path: &Path) -> Result<Option<String>> {
        if let Some(text) = self.staged.get(path) {
            return Ok(Some(text.clone()));
        }
        match fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error("cannot read", path, error)),
        }
    }

    /// Every file staged so far, in path order: its path and new contents.
    pub(crate) fn staged(&self) -> Vec<(PathBuf, String)> {
        self.staged
            .iter()
            .map(|(path, text)| (path.clone(), text.clone()))
            .collect()
    }

    /// The text of the file at `path` as committed (what was staged since is ignored).
    ///
    /// # Errors
    /// `storage_error` if the file exists but cannot be read.
    pub(crate) fn committed_text(&self, path: &Path) -> Result<Option<String>> {
        match fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error("cannot read", path, error)),
        }
    }

    /// The file at `path` decoded as `T`; `None` if there is no such file.
    ///
    /// # Errors
    /// `storage_error` if it cannot be read; `corrupt(why)` if it does not decode.
    pub(crate) fn read_json<T: DeserializeOwned>(
        &self,
        path: &Path,
        corrupt: impl FnOnce(String) -> Error,
    ) -> Result<Option<T>> {
        let Some(text) = self.read_text(path)? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| corrupt(e.to_string()))
    }

    /// Stages `value` as the new contents of the file at `path` (written at the commit).
    ///
    /// # Errors
    /// `storage_error` under a shared lock, or if `value` does not serialize.
    pub(crate) fn stage<T: Serialize>(&mut self, path: &Path, value: &T) -> Result<()> {
        if !self.exclusive {
            return Err(Error::storage("a write was staged under the shared lock"));
        }
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Error::storage(format!("cannot encode {}: {e}", path.display())))?;
        self.staged.insert(path.to_path_buf(), text);
        Ok(())
    }

    /// Writes every staged file, atomically, then releases the lock: one file by temp file
    /// and rename; several through the journal (all of them or, after a crash, none until
    /// the next locker finishes the journal).
    ///
    /// # Errors
    /// `storage_error` if a file cannot be written.
    pub(crate) fn commit(self) -> Result<()> {
        let mut staged = self.staged.iter();
        match (staged.next(), staged.next()) {
            (None, _) => Ok(()),
            (Some((path, text)), None) => write_atomic(path, text.as_bytes()),
            _ => self.commit_journal(),
        }
    }

    /// The commit of several files: the journal first (the commit point), then each file,
    /// then the journal is removed.
    fn commit_journal(&self) -> Result<()> {
        let root = self.dir.root();
        let entries = self
            .staged
            .iter()
            .map(|(path, text)| {
                let relative = path.strip_prefix(root).map_err(|_| {
                    Error::storage(format!("{} is outside the store", path.display()))
                })?;
                Ok(JournalEntry {
                    path: relative.to_string_lossy().into_owned(),
                    contents: text.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let journal = root.join(JOURNAL_FILE);
        let text = serde_json::to_string(&entries)
            .map_err(|e| Error::storage(format!("cannot encode the journal: {e}")))?;
        write_atomic(&journal, text.as_bytes())?;
        self.dir.apply(&entries)?;
        fs::remove_file(&journal)
            .map_err(|e| io_error("cannot remove the journal", &journal, e))?;
        sync_dir(root)
    }
}

/// Writes `bytes` to `path` atomically: a temp file beside it (fixed name: only the holder
/// of the exclusive lock writes), flushed to disk, renamed over `path`, and the directory
/// entry flushed. Creates the parent directory if needed.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path
        .parent()
        .ok_or_else(|| Error::storage(format!("{} has no directory", path.display())))?;
    if !parent.exists() {
        fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
        if let Some(grandparent) = parent.parent() {
            sync_dir(grandparent)?;
        }
    }
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(".tmp");
    let temp = PathBuf::from(temp_name);
    let mut file = File::create(&temp).map_err(|e| io_error("cannot create", &temp, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error("cannot write", &temp, e))?;
    drop(file);
    fs::rename(&temp, path).map_err(|e| io_error("cannot rename into", path, e))?;
    sync_dir(parent)
}

/// Flushes a directory's entries (a rename or a new file in it) to disk.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|e| io_error("cannot flush the directory", dir, e))
}

/// The `.json` files of `dir` with the ids their names encode (a missing directory has
/// none; names this store did not write are skipped).
fn json_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error("cannot list", dir, error)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| io_error("cannot list", dir, e))?.path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let id = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(decode_id);
        if let Some(id) = id {
            files.push((id, path));
        }
    }
    files.sort();
    Ok(files)
}
