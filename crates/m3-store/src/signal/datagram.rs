//! A change signal for a store that lives in one file ([`DatagramSignal`]): a Unix datagram
//! to each waiting process, after the commit. The SQLite backend's signal, and part of the
//! backend toolkit: any backend whose processes share a file system path can use it.
//!
//! Each process that waits on a database binds one datagram socket in a directory beside the
//! database file (`<db>-signals/<pid>-<random>.sock`), on its first subscription. A
//! committer announces a change by sending the change's few bytes ([`Change::encode`]),
//! non-blocking, to every other socket in that directory; a thread per listening process
//! reads them and wakes the matching subscriptions of its [`ChangeHub`]. In the committing
//! process the hub is woken directly.
//!
//! The pitfalls are handled as the hint they are (the fallback poll covers them): a missing
//! socket file (`ENOENT`) is skipped; a dead receiver (`ECONNREFUSED`) has its stale file
//! removed; a receiver whose queue is full (`EAGAIN`) is skipped, and since a drop is only
//! possible when at least `net.unix.max_dgram_qlen` datagrams were queued, a receiver that
//! reads a burst that long wakes all of its subscriptions. A socket path too long for
//! `sun_path`, or a file system without Unix sockets, leaves the process on the fallback
//! poll (with one warning). One host only: that is what SQLite is for.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use super::change::{Change, Topic};
use super::contract::ChangeSignal;
use super::hub::{ChangeHub, ChangeSubscription};
use super::probe::ChangeProbe;

/// How long the listening thread blocks before it looks at its stop flag again (it is
/// normally stopped by a datagram; this only bounds a missed one).
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest datagram read; longer ones are truncated, decode as "anything", and wake everyone.
const MAX_DATAGRAM: usize = 1024;

/// The change signal of one database file in this process: a [`ChangeHub`] for the
/// waiters of this process plus a Unix datagram to each other waiting process.
///
/// ```
/// # fn demo() {
/// use m3_store::signal::datagram::DatagramSignal;
/// use m3_store::signal::{Change, ChangeKind, ChangeSignal, Topic};
///
/// let dir = std::env::temp_dir().join(format!("m3-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).ok();
/// let signal = DatagramSignal::for_database(&dir.join("store.db"), true);
/// let _waiter = signal.subscribe(Topic::Queue);
/// signal.notify(&Change::new("exec-1", ChangeKind::Queued)); // after the commit
/// # }
/// ```
#[derive(Debug)]
pub struct DatagramSignal {
    hub: ChangeHub,
    dir: PathBuf,
    /// `false`: in-process wake-ups only (no socket is bound, nothing is sent).
    cross_process: bool,
    sender: Option<UnixDatagram>,
    listener: OnceLock<Option<Listener>>,
}

impl DatagramSignal {
    /// The signal of the database at canonical path `database`, shared by every store object
    /// on that file in this process that has the same `cross_process` setting.
    /// `cross_process: false` wakes the waiters of this process only (no socket is bound,
    /// nothing is sent). The sockets live in [`signal_dir`]`(database)`.
    pub fn for_database(database: &Path, cross_process: bool) -> Arc<Self> {
        type Registry = Mutex<HashMap<(PathBuf, bool), Weak<DatagramSignal>>>;
        static SIGNALS: OnceLock<Registry> = OnceLock::new();
        let signals = SIGNALS.get_or_init(|| Mutex::new(HashMap::new()));
        let mut signals = signals.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (database.to_path_buf(), cross_process);
        if let Some(signal) = signals.get(&key).and_then(Weak::upgrade) {
            return signal;
        }
        signals.retain(|_, signal| signal.strong_count() > 0);
        let signal = Arc::new(Self::new(database, cross_process));
        signals.insert(key, Arc::downgrade(&signal));
        signal
    }

    fn new(database: &Path, cross_process: bool) -> Self {
        let sender = cross_process
            .then(|| {
                let socket = UnixDatagram::unbound().ok()?;
                socket.set_nonblocking(true).ok()?;
                Some(socket)
            })
            .flatten();
        // Not live until this process's socket is bound: until then only the fallback poll
        // sees other processes' commits.
        let hub = ChangeHub::new();
        hub.set_live(false);
        Self {
            hub,
            dir: signal_dir(database),
            cross_process,
            sender,
            listener: OnceLock::new(),
        }
    }

    /// Lets `probe` re-read for this file's execution waiters (see [`ChangeHub::attach_probe`]).
    pub fn attach_probe(&self, probe: &Arc<dyn ChangeProbe>) {
        self.hub.attach_probe(probe);
    }

    /// Whether a probe is attached and alive.
    #[cfg(test)]
    pub(crate) fn has_probe(&self) -> bool {
        self.hub.has_probe()
    }

    /// This process's socket, bound on first use (`None`: signals from other processes
    /// cannot reach it; its waiters poll).
    fn listener(&self) -> Option<&Listener> {
        self.listener
            .get_or_init(|| {
                if !self.cross_process {
                    return None;
                }
                Listener::bind(&self.dir, self.hub.clone())
                    .inspect_err(|error| {
                        tracing::warn!(dir = %self.dir.display(), %error,
                            "cannot listen for changes from other processes; waiters poll every second");
                    })
                    .ok()
            })
            .as_ref()
    }

    /// Sends `payload` to every other socket in the directory, without blocking.
    fn send_to_others(&self, payload: &[u8]) {
        let Some(sender) = &self.sender else {
            return;
        };
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => return,
            Err(error) => {
                tracing::debug!(dir = %self.dir.display(), %error, "cannot list the signal directory");
                return;
            }
        };
        let own = self
            .listener
            .get()
            .and_then(Option::as_ref)
            .map(|l| &l.path);
        for entry in entries.flatten() {
            let path = entry.path();
            if Some(&path) == own || path.extension().is_none_or(|ext| ext != "sock") {
                continue;
            }
            match sender.send_to(payload, &path) {
                Ok(_) => {}
                // A dead process's socket: nobody will ever read it.
                Err(error) if error.kind() == ErrorKind::ConnectionRefused => {
                    let _ = std::fs::remove_file(&path);
                }
                // Removed meanwhile, or its queue is full (it is awake and will re-read).
                Err(error)
                    if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::WouldBlock) => {}
                Err(error) => {
                    tracing::debug!(socket = %path.display(), %error, "change signal not sent");
                }
            }
        }
    }
}

impl ChangeSignal for DatagramSignal {
    fn subscribe(&self, topic: Topic) -> ChangeSubscription {
        let _ = self.listener();
        self.hub.subscribe(topic)
    }

    fn notify(&self, change: &Change) {
        self.hub.publish(change);
        self.send_to_others(&change.encode());
    }

    fn mechanism(&self) -> &'static str {
        match self.listener.get() {
            Some(Some(_)) => "unix-datagram",
            _ if self.cross_process && self.sender.is_some() => "unix-datagram",
            _ => "in-process",
        }
    }
}

/// The directory of the waiting processes' sockets: `<database>-signals`.
pub fn signal_dir(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push("-signals");
    PathBuf::from(name)
}

/// This process's bound socket and its reading thread; unbinds (removes the file) on drop.
#[derive(Debug)]
struct Listener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl Listener {
    fn bind(dir: &Path, hub: ChangeHub) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        remove_stale_sockets(dir);
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).map_err(std::io::Error::other)?;
        let name = format!(
            "{}-{:08x}.sock",
            std::process::id(),
            u32::from_le_bytes(random)
        );
        let path = dir.join(name);
        let socket = UnixDatagram::bind(&path)?;
        socket.set_read_timeout(Some(LISTEN_TIMEOUT))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        // Live from the bind on: a datagram sent from now on is queued for the thread.
        hub.set_live(true);
        let failed = hub.clone();
        let spawned = std::thread::Builder::new()
            .name("m3-change-signal".into())
            .spawn(move || {
                listen(&socket, &hub, &flag);
                // Other processes' datagrams no longer arrive: back to the short poll.
                hub.set_live(false);
            });
        if let Err(error) = spawned {
            failed.set_live(false);
            let _ = std::fs::remove_file(&path);
            return Err(error);
        }
        tracing::debug!(socket = %path.display(), "listening for changes from other processes");
        Ok(Self { path, stop })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the thread so it sees the flag (the read timeout covers a lost wake-up).
        if let Ok(socket) = UnixDatagram::unbound() {
            let _ = socket.set_nonblocking(true);
            let _ = socket.send_to(b"*", &self.path);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes the sockets in `dir` that no process listens on any more (a process killed
/// before it could unbind leaves its file behind). A socket counts as stale when connecting
/// to it is refused; connecting sends nothing, so a live listener is not woken. Anything
/// else (a socket being bound right now, an unreadable directory) is left alone.
fn remove_stale_sockets(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "sock") {
            continue;
        }
        let Ok(probe) = UnixDatagram::unbound() else {
            return;
        };
        if let Err(error) = probe.connect(&path)
            && error.kind() == ErrorKind::ConnectionRefused
        {
            tracing::debug!(socket = %path.display(), "removing a stale change-signal socket");
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The reading thread: blocks for a datagram, drains the queue without blocking, wakes the
/// hub; a burst long enough to have overflowed the queue wakes everyone.
fn listen(socket: &UnixDatagram, hub: &ChangeHub, stop: &AtomicBool) {
    let overflow_at = queue_length().max(2);
    let mut buf = [0u8; MAX_DATAGRAM];
    loop {
        if socket.set_nonblocking(false).is_err() {
            return;
        }
        match socket.recv(&mut buf) {
            Ok(n) if !stop.load(Ordering::SeqCst) => hub.publish(&Change::decode(&buf[..n])),
            Ok(_) => return,
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            Err(_) => return,
        }
        if socket.set_nonblocking(true).is_err() {
            return;
        }
        let mut burst = 1usize;
        loop {
            match socket.recv(&mut buf) {
                Ok(n) => {
                    burst += 1;
                    hub.publish(&Change::decode(&buf[..n]));
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if burst >= overflow_at {
            hub.publish(&Change::any());
        }
    }
}

/// `net.unix.max_dgram_qlen` (10 when unreadable): a receiver's queue holds about this many
/// datagrams before senders meet `EAGAIN`.
fn queue_length() -> usize {
    std::fs::read_to_string("/proc/sys/net/unix/max_dgram_qlen")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .unwrap_or(10)
        .min(64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::{ChangeKind, Wake};

    fn database(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("m3.sqlite")
    }

    #[test]
    fn binding_removes_the_sockets_of_dead_processes_and_keeps_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(&dir);
        let sockets = signal_dir(&path);
        std::fs::create_dir_all(&sockets).unwrap();
        let stale = sockets.join("1-dead.sock");
        drop(UnixDatagram::bind(&stale).unwrap());
        let live_path = sockets.join("2-live.sock");
        let live = UnixDatagram::bind(&live_path).unwrap();
        live.set_nonblocking(true).unwrap();
        let signal = DatagramSignal::new(&path, true);
        let _waiter = signal.subscribe(Topic::Queue);
        assert!(!stale.exists(), "the dead process's socket is removed");
        assert!(live_path.exists(), "a live socket stays");
        let mut buf = [0u8; 8];
        assert!(
            live.recv(&mut buf).is_err(),
            "the live listener was not woken"
        );
    }

    /// Two signals on one file stand in for two processes (two hubs, two sockets).
    fn two_processes(path: &Path) -> (DatagramSignal, DatagramSignal) {
        (
            DatagramSignal::new(path, true),
            DatagramSignal::new(path, true),
        )
    }

    #[tokio::test]
    async fn a_datagram_wakes_the_other_listener() {
        let dir = tempfile::tempdir().unwrap();
        let (waiter, committer) = two_processes(&database(&dir));
        assert!(!waiter.hub.is_live(), "not live before the socket is bound");
        let mut sub = waiter.subscribe(Topic::Execution("e1".into()));
        assert_eq!(waiter.mechanism(), "unix-datagram");
        // Bound: other processes reach it, so its waiters only re-read at the safety poll.
        assert!(waiter.hub.is_live());
        assert_eq!(sub.fallback(), crate::signal::SAFETY_POLL);
        committer.notify(&Change::new("e1", ChangeKind::Round));
        assert_eq!(sub.changed().await, Wake::Signalled);
    }

    #[tokio::test]
    async fn stale_sockets_are_removed_and_do_not_stop_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(&dir);
        let sockets = signal_dir(&path);
        std::fs::create_dir_all(&sockets).unwrap();
        // A socket file whose process is gone: bound, then closed without unbinding.
        let stale = sockets.join("999999-deadbeef.sock");
        drop(UnixDatagram::bind(&stale).unwrap());
        // Something that is not a socket at all.
        std::fs::write(sockets.join("notes.txt"), "x").unwrap();
        let (waiter, committer) = two_processes(&path);
        let mut sub = waiter.subscribe(Topic::Rounds);
        committer.notify(&Change::new("e1", ChangeKind::Round));
        assert_eq!(sub.changed().await, Wake::Signalled);
        assert!(!stale.exists(), "the stale socket file is removed");
        assert!(sockets.join("notes.txt").exists());
    }

    #[tokio::test]
    async fn a_dropped_listener_removes_its_socket_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(&dir);
        let waiter = DatagramSignal::new(&path, true);
        let _sub = waiter.subscribe(Topic::All);
        let count = || std::fs::read_dir(signal_dir(&path)).unwrap().count();
        assert_eq!(count(), 1);
        drop(waiter);
        assert_eq!(count(), 0);
    }

    #[tokio::test]
    async fn a_full_queue_wakes_every_subscription() {
        let dir = tempfile::tempdir().unwrap();
        let (waiter, committer) = two_processes(&database(&dir));
        let mut sub = waiter.subscribe(Topic::Execution("target".into()));
        // Far more datagrams than a queue holds, none of them about "target" ...
        for i in 0..200 {
            committer.notify(&Change::new(format!("other-{i}"), ChangeKind::Round));
        }
        // ... still wake it, since "target"'s own datagram could have been among the lost.
        committer.notify(&Change::new("target", ChangeKind::Round));
        assert_eq!(sub.changed().await, Wake::Signalled);
    }

    #[tokio::test]
    async fn without_cross_process_signals_nothing_is_bound_or_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(&dir);
        let waiter = DatagramSignal::new(&path, false);
        let committer = DatagramSignal::new(&path, true);
        let mut sub = waiter.subscribe(Topic::All);
        assert_eq!(waiter.mechanism(), "in-process");
        // Other processes' commits reach it only by the short fallback poll.
        assert_eq!(sub.fallback(), crate::signal::DEFAULT_FALLBACK_POLL);
        assert!(!signal_dir(&path).exists());
        committer.notify(&Change::new("e1", ChangeKind::Round));
        // Only the in-process hub and the fallback poll remain.
        waiter.notify(&Change::new("e1", ChangeKind::Round));
        assert_eq!(sub.changed().await, Wake::Signalled);
    }
}
