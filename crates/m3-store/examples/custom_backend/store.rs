//! [`DirectoryStore`]: the store object, shared by both traits, and the two ways its
//! operations reach the directory: [`DirectoryStore::write`] (one read-decide-write under
//! the exclusive lock, then the commit) and [`DirectoryStore::read`] (under the shared
//! lock). Both run on tokio's blocking pool, since locking and file I/O block.
//!
//! Also the [`Opener`] that serves `dir://PATH` URLs through [`m3_store::open()`].

use std::path::Path;
use std::sync::Arc;

use m3_store::ExecutionStore;
use m3_store::open::Opener;
use m3_store::signal::ChangeSignal;
use m3_store::signal::datagram::DatagramSignal;
use m3_types::{Clock, Error, Result, SystemClock};
use time::OffsetDateTime;

use crate::files::{Directory, Locked};

/// A persistent store of executions, their event logs and their managed-input rounds, as
/// JSON files in one directory. Implements both [`ExecutionStore`] and
/// [`ManagedInputStore`](m3_store::ManagedInputStore) (the execution store's
/// `managed_input_store` is the same object). Clones share everything; any number of store
/// objects, in any number of processes on one host, may open the same directory.
#[derive(Debug, Clone)]
pub(crate) struct DirectoryStore {
    /// What the clones share.
    inner: Arc<Inner>,
}

/// What the clones of one store object share.
#[derive(Debug)]
struct Inner {
    /// The store directory and its layout.
    dir: Directory,
    /// Where every "now" of the store comes from.
    clock: Arc<dyn Clock>,
    /// The change signal of the directory, shared by every store object on it in this
    /// process, and reaching the waiters of the other processes by datagram.
    signal: Arc<DatagramSignal>,
}

impl DirectoryStore {
    /// Opens (creating if needed) the store in directory `path`, on `clock`. Its change
    /// signal's sockets live in `<path>-signals`, beside the directory.
    ///
    /// # Errors
    /// `storage_error` if the directory cannot be created.
    pub(crate) fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Self> {
        let dir = Directory::open(path)?;
        let signal = DatagramSignal::for_database(dir.root(), true);
        Ok(Self {
            inner: Arc::new(Inner { dir, clock, signal }),
        })
    }

    /// The directory's canonical path.
    pub(crate) fn root(&self) -> &Path {
        self.inner.dir.root()
    }

    /// The store's clock.
    pub(crate) fn clock_arc(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// The change signal, as announcements take it.
    pub(crate) fn signal(&self) -> &dyn ChangeSignal {
        &*self.inner.signal
    }

    /// The change signal, as [`ExecutionStore::change_signal`] hands it out.
    pub(crate) fn signal_arc(&self) -> Arc<dyn ChangeSignal> {
        self.inner.signal.clone()
    }

    /// One mutation: takes the exclusive lock, reads "now" from the store's clock, runs
    /// `step` (it reads files, asks the shared rules, and stages what they return), stages
    /// the change feed's records of what it staged, and commits it all if `step`
    /// succeeded. An error commits nothing.
    ///
    /// # Errors
    /// `step`'s error; `storage_error` for the lock, the commit or a lost blocking task.
    pub(crate) async fn write<T, F>(&self, step: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Locked<'_>, OffsetDateTime) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            let mut locked = inner.dir.lock(true)?;
            let now = m3_store::store_now(inner.clock.as_ref());
            let value = step(&mut locked, now)?;
            crate::feed::stage_changes(&mut locked)?;
            locked.commit()?;
            Ok(value)
        })
        .await
    }

    /// One read: runs `step` under the shared lock (concurrent with other reads, never with
    /// a mutation), with "now" from the store's clock.
    ///
    /// # Errors
    /// `step`'s error; `storage_error` for the lock or a lost blocking task.
    pub(crate) async fn read<T, F>(&self, step: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Locked<'_>, OffsetDateTime) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            let locked = inner.dir.lock(false)?;
            step(&locked, m3_store::store_now(inner.clock.as_ref()))
        })
        .await
    }
}

/// Runs `work` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::storage(format!("the store's blocking task failed: {e}")))?
}

/// Serves `dir://PATH` (and `dir:PATH`) URLs: [`m3_store::open()`] then opens a
/// [`DirectoryStore`] once [`register`] ran in the process.
#[derive(Debug)]
pub(crate) struct DirectoryOpener;

/// The URL scheme of directory stores.
pub(crate) const SCHEME: &str = "dir";

#[async_trait::async_trait]
impl Opener for DirectoryOpener {
    fn schemes(&self) -> &[&'static str] {
        &[SCHEME]
    }

    async fn open(
        &self,
        url: &str,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<Arc<dyn ExecutionStore>> {
        let rest = url
            .strip_prefix("dir:")
            .ok_or_else(|| Error::model_validation(format!("not a dir: URL: {url}")))?;
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(Error::model_validation("a dir: URL needs a path"));
        }
        let clock = clock.unwrap_or_else(|| Arc::new(SystemClock));
        let path = path.to_owned();
        let store = blocking(move || DirectoryStore::open(Path::new(&path), clock)).await?;
        Ok(Arc::new(store))
    }
}

/// Registers [`DirectoryOpener`], so that `m3_store::open("dir://PATH")` opens a directory
/// store in this process.
pub(crate) fn register() {
    m3_store::open::register(Arc::new(DirectoryOpener));
}
