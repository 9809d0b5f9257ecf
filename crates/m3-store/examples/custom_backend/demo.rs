//! The wake-up demonstration: a waiter subscribed through one store object's change signal
//! is woken by a round that another store object on the same directory creates, in the
//! same process and from another process, long before its fallback poll would have re-read.
//!
//! The other process is this example's own binary, started with [`CHILD_FLAG`]: it opens
//! the directory, creates the round, prints the time at which it began, and exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use m3_store::conformance::sample_round;
use m3_store::signal::{ChangeSubscription, DEFAULT_FALLBACK_POLL, Topic, Wake};
use m3_store::{CreateRound, ExecutionStore, ManagedInputStore, NewExecution, RoundRef};
use m3_types::{HumanInput, SystemClock};

use crate::store::{self, DirectoryStore};

/// The error type of the demonstration (and of `main`).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The argument that makes this binary the committing child process:
/// `custom_backend --create-round <dir> <execution id>`.
pub(crate) const CHILD_FLAG: &str = "--create-round";

/// The round both demonstrations create.
const ROUND_ID: &str = "demo-round";

/// How long the waiter waits at most (far above any real latency: a failure, not a timing).
const GIVE_UP: Duration = Duration::from_secs(20);

/// The request creating the demonstration's round of `execution_id`.
fn round_request(execution_id: &str) -> CreateRound {
    CreateRound::new(
        sample_round(execution_id, ROUND_ID),
        "demo-worker",
        Duration::from_secs(30),
    )
}

/// A managed execution in `store`, and a subscription to its changes through the store's
/// change signal (subscribed before anything else happens to it).
async fn execution_and_waiter(
    store: &DirectoryStore,
) -> Result<(String, ChangeSubscription), BoxError> {
    let spec = serde_json::json!({"demo": "wake-up"});
    let new = NewExecution::new(spec).with_human_input(HumanInput::Managed);
    let execution_id = store.create_execution(new).await?.execution_id;
    let subscription = store
        .change_signal()
        .subscribe(Topic::Execution(execution_id.clone()));
    Ok((execution_id, subscription))
}

/// Checks that the waiter was woken by the signal before the fallback poll, and that a
/// re-read through the waiter's own store object sees the round (the row is the truth).
async fn check_woken(
    waiter: &DirectoryStore,
    execution_id: &str,
    wake: Wake,
    latency: Duration,
) -> Result<(), BoxError> {
    if wake != Wake::Signalled || latency >= DEFAULT_FALLBACK_POLL {
        return Err(format!(
            "the waiter was not woken by the signal before the {DEFAULT_FALLBACK_POLL:?} \
             fallback poll: {wake:?} after {latency:?}"
        )
        .into());
    }
    let round = RoundRef::new(execution_id, ROUND_ID);
    if waiter.get_round(&round).await?.is_none() {
        return Err("woken, but the waiter's store object does not see the round".into());
    }
    Ok(())
}

/// In one process: the waiter subscribes through store object A; store object B, opened
/// by URL (`dir://...`) on the same directory, creates a round. Returns the latency from
/// the start of B's `create_round` (its commit included) to the waiter's wake-up.
///
/// # Errors
/// If the store fails, or the waiter is not woken by the signal before the fallback poll.
pub(crate) async fn wake_in_process(dir: &Path) -> Result<Duration, BoxError> {
    let waiter = DirectoryStore::open(dir, Arc::new(SystemClock))?;
    store::register();
    let url = format!("{}://{}", store::SCHEME, waiter.root().display());
    let committer = m3_store::open(&url).await?.managed_input_store().await?;
    let (execution_id, mut subscription) = execution_and_waiter(&waiter).await?;
    let fallback = subscription.fallback();
    let woken = tokio::spawn(async move {
        let wake = tokio::time::timeout(GIVE_UP, subscription.changed()).await;
        (wake, Instant::now())
    });
    let began = Instant::now();
    committer.create_round(round_request(&execution_id)).await?;
    let committed = began.elapsed();
    let (wake, woken_at) = woken.await?;
    let latency = woken_at.saturating_duration_since(began);
    check_woken(&waiter, &execution_id, wake?, latency).await?;
    println!(
        "in-process wake-up: woken {latency:?} after the second store object began \
         create_round (its commit took {committed:?}; the subscription's own re-read \
         comes every {fallback:?})"
    );
    Ok(latency)
}

/// Across processes: the waiter subscribes through a store object of this process (which
/// binds its datagram socket); a child process opens the same directory and creates a
/// round. Returns the latency from the child's start of `create_round` to the wake-up.
///
/// # Errors
/// If the store or the child fails, or the waiter is not woken by the signal before the
/// fallback poll.
pub(crate) async fn wake_across_processes(dir: &Path) -> Result<Duration, BoxError> {
    let waiter = DirectoryStore::open(dir, Arc::new(SystemClock))?;
    let (execution_id, mut subscription) = execution_and_waiter(&waiter).await?;
    let child = tokio::process::Command::new(std::env::current_exe()?)
        .arg(CHILD_FLAG)
        .arg(waiter.root())
        .arg(&execution_id)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let wake = tokio::time::timeout(GIVE_UP, subscription.changed()).await?;
    let woken_at = SystemTime::now();
    let output = child.wait_with_output().await?;
    if !output.status.success() {
        return Err(format!("the committing child process failed: {}", output.status).into());
    }
    let began_micros: u64 = String::from_utf8(output.stdout)?.trim().parse()?;
    let began = UNIX_EPOCH + Duration::from_micros(began_micros);
    let latency = woken_at.duration_since(began).unwrap_or_default();
    check_woken(&waiter, &execution_id, wake, latency).await?;
    println!(
        "cross-process wake-up ({}): woken {latency:?} after the child process began \
         create_round (its commit included)",
        waiter.change_signal().mechanism()
    );
    Ok(latency)
}

/// The child process: opens the directory `args[0]`, creates the demonstration's round of
/// execution `args[1]`, and prints the Unix time in microseconds at which it began.
///
/// # Errors
/// Missing arguments, or a store error.
pub(crate) async fn run_child(args: &[String]) -> Result<(), BoxError> {
    let [dir, execution_id] = args else {
        return Err(format!("usage: custom_backend {CHILD_FLAG} <dir> <execution id>").into());
    };
    let store = DirectoryStore::open(&PathBuf::from(dir), Arc::new(SystemClock))?;
    let began = SystemTime::now().duration_since(UNIX_EPOCH)?;
    store.create_round(round_request(execution_id)).await?;
    println!("{}", began.as_micros());
    Ok(())
}
