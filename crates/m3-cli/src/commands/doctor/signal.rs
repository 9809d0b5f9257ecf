//! The change-signal check: a change announced by a second `m3` process must wake a waiter
//! in this one before the fallback poll would. A store whose signal cannot cross processes
//! still works (its waiters re-read every second), so a failed probe is a warning.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use m3_kit::{Change, ChangeKind, SIGNAL_ENV, StoreUrl, Topic, Wake, signal_enabled_by_env};

use super::check::{Check, PROBE, missing_local_store};
use crate::commands::inspect::open_kit;
use crate::failure::Failure;

const NAME: &str = "change signal";

/// How long the check waits for the second process's change to arrive.
const WAKE_WITHIN: Duration = Duration::from_secs(5);

/// How often the announcing process repeats its change (it runs until the check kills it,
/// so a backend that sends asynchronously has time to).
const ANNOUNCE_EVERY: Duration = Duration::from_millis(100);

/// Probes the signal of the store at `db` (not checked while no store exists there).
pub(super) async fn check(db: &Path) -> Check {
    let label = crate::output::store_label(db);
    if missing_local_store(db) {
        return Check::ok(NAME, format!("not checked: no store at {label} yet"));
    }
    if matches!(StoreUrl::parse(&db.to_string_lossy()), Ok(StoreUrl::Memory)) {
        return Check::ok(
            NAME,
            "in-process: a memory store lives in one process, whose waiters are woken directly"
                .to_owned(),
        );
    }
    if !signal_enabled_by_env() {
        return Check::not_ok(
            NAME,
            "warn",
            format!(
                "{SIGNAL_ENV} turns it off: waiters see other processes' changes at their \
                 once-a-second re-read"
            ),
            &format!("unset {SIGNAL_ENV}; answers still arrive without it, only slower"),
        );
    }
    match probe(db).await {
        Ok(Probe::Woken { mechanism }) => Check::ok(
            NAME,
            format!("{mechanism}: a change announced by another process woke this one"),
        ),
        Ok(Probe::Polling { mechanism, every }) => Check::not_ok(
            NAME,
            "warn",
            format!(
                "{mechanism}: waiters re-read the store every {:.1} s instead of being woken",
                every.as_secs_f64()
            ),
            "this store's backend has no change signal; answers still arrive, only slower",
        ),
        Ok(Probe::Silent { mechanism }) => Check::not_ok(
            NAME,
            "warn",
            format!(
                "{mechanism}: no wake-up from another process within {} s; waiters fall back to re-reading every second",
                WAKE_WITHIN.as_secs()
            ),
            "a SQLite store needs a directory that allows Unix sockets beside it; PostgreSQL needs \
             a direct connection (LISTEN does not pass a transaction-mode pooler or a replica)",
        ),
        Err(failure) => Check::not_ok(
            NAME,
            "fail",
            format!("cannot probe {label}: {}", failure.message),
            "check the store first (see the store line)",
        ),
    }
}

/// What the probe saw.
enum Probe {
    /// The announcement of the second process woke the subscription.
    Woken { mechanism: &'static str },
    /// The store's signal only polls.
    Polling {
        mechanism: &'static str,
        every: Duration,
    },
    /// Nothing arrived before the deadline.
    Silent { mechanism: &'static str },
}

async fn probe(db: &Path) -> Result<Probe, Failure> {
    let kit = open_kit(db, false).await?;
    let signal = kit.store().change_signal();
    let mechanism = signal.mechanism();
    let id = probe_id();
    let mut changes = signal.subscribe(Topic::Execution(id.clone()));
    if !changes.is_signalled() {
        return Ok(Probe::Polling {
            mechanism,
            every: changes.fallback(),
        });
    }
    let mut announcer = spawn_announcer(db, &id)?;
    let woken = tokio::time::timeout(WAKE_WITHIN, async {
        while changes.changed().await != Wake::Signalled {}
    })
    .await;
    let _ = announcer.kill().await;
    kit.close().await?;
    Ok(match woken {
        Ok(()) => Probe::Woken { mechanism },
        Err(_) => Probe::Silent { mechanism },
    })
}

/// An execution id no store holds, unique to this probe: only this check listens for it.
fn probe_id() -> String {
    format!("m3-doctor-probe-{}-{}", std::process::id(), clock_nanos())
}

fn clock_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos())
}

/// `m3 --db DB doctor --announce-change ID`: the second process.
fn spawn_announcer(db: &Path, id: &str) -> Result<tokio::process::Child, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::other("io_error", format!("cannot find this binary: {e}")))?;
    tokio::process::Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(["doctor", "--announce-change", id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::other("io_error", format!("cannot start a second m3: {e}")))
}

/// The second process of the probe: opens the store at `db` and announces a change of
/// execution `probe` every 100 ms until it is killed (or after the probe's deadline).
pub(crate) async fn announce_change(db: &Path, probe: &str) -> Result<(), Failure> {
    let kit = open_kit(db, false).await?;
    let signal = kit.store().change_signal();
    let change = Change::new(probe, ChangeKind::Execution);
    let deadline = Instant::now() + PROBE;
    while Instant::now() < deadline {
        signal.notify(&change);
        tokio::time::sleep(ANNOUNCE_EVERY).await;
    }
    kit.close().await?;
    Ok(())
}
