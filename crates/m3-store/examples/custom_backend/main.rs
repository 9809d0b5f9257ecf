//! A complete, persistent store backend written outside `m3-store`, with its public API
//! only: the *directory store*, which keeps executions, their event logs and their
//! managed-input rounds as JSON files in one directory (see `docs/custom-backend.md`).
//!
//! - `store`: the store object, its lock-protected read-decide-write, and a `dir://` URL
//!   opener;
//! - `files`: the directory layout, the lock file (`std::fs::File::lock`) and the atomic
//!   commit (temp file + rename, a journal for several files);
//! - `rounds` and `executions`: `ManagedInputStore` and `ExecutionStore`, made of
//!   storage code and calls of the shared rules only;
//! - `feed`: the change feed, one file the commit of every mutation rewrites with the
//!   records the shared rules derive from what the mutation staged;
//! - `corrupt`: the conformance suite's `CorruptRecord` (it damages a stored file);
//! - `feed_check`: the feed's cursors surviving a prune of every record and a reopening;
//! - `demo`: the change signal waking a waiter across store objects and processes.
//!
//! `main` runs both conformance suites against the directory store (a fresh temporary
//! directory per case; the peer is a second store object on the same directory), exits
//! non-zero unless every case passed, then checks the feed across a reopening and
//! demonstrates the wake-ups.
//!
//! ```text
//! cargo run -p m3-store --example custom_backend --features conformance
//! ```

#[cfg(unix)]
mod corrupt;
#[cfg(unix)]
mod demo;
#[cfg(unix)]
mod executions;
#[cfg(unix)]
mod feed;
#[cfg(unix)]
mod feed_check;
#[cfg(unix)]
mod files;
#[cfg(unix)]
mod policies;
#[cfg(unix)]
mod rounds;
#[cfg(unix)]
mod store;
#[cfg(unix)]
mod subscriptions;
#[cfg(unix)]
mod tables;
mod tokens;
mod workers;

#[cfg(unix)]
use std::sync::Arc;

#[cfg(unix)]
use m3_store::conformance::execution::{self, ExecutionBackend};
#[cfg(unix)]
use m3_store::conformance::{Backend, ConformanceReport, case_count, run_all};
#[cfg(unix)]
use m3_types::{Clock, Error, Result};

#[cfg(unix)]
use crate::demo::BoxError;
#[cfg(unix)]
use crate::store::DirectoryStore;

/// A fresh temporary directory holding a store directory (`store/`; the change signal's
/// sockets go beside it, in `store-signals/`, inside the temporary directory too), and two
/// store objects on it reading `clock`.
#[cfg(unix)]
fn fresh_stores(
    clock: Arc<dyn Clock>,
) -> Result<(tempfile::TempDir, DirectoryStore, DirectoryStore)> {
    let temp = tempfile::tempdir()
        .map_err(|e| Error::storage(format!("cannot create a temporary directory: {e}")))?;
    let path = temp.path().join("store");
    let store = DirectoryStore::open(&path, Arc::clone(&clock))?;
    let peer = DirectoryStore::open(&path, clock)?;
    Ok((temp, store, peer))
}

/// Runs the managed-input suite: the store, its peer, and the store as the corruptor.
#[cfg(unix)]
async fn round_suite() -> ConformanceReport {
    run_all(|clock| async move {
        let (temp, store, peer) = fresh_stores(clock)?;
        let store = Arc::new(store);
        Ok(Backend::new(store.clone(), Arc::new(peer), store).with_guard(temp))
    })
    .await
}

/// Runs the execution suite: the store and its peer.
#[cfg(unix)]
async fn execution_suite() -> ConformanceReport {
    execution::run_all(|clock| async move {
        let (temp, store, peer) = fresh_stores(clock)?;
        Ok(ExecutionBackend::new(Arc::new(store), Arc::new(peer)).with_guard(temp))
    })
    .await
}

/// Prints `report` and fails unless all `expected` cases of `suite` passed.
#[cfg(unix)]
fn check(suite: &str, report: &ConformanceReport, expected: usize) -> Result<(), BoxError> {
    println!("{suite} suite: {report}");
    if report.is_success() && report.passed.len() == expected {
        Ok(())
    } else {
        Err(format!(
            "the {suite} suite failed: {} of {expected} cases passed",
            report.passed.len()
        )
        .into())
    }
}

/// Runs both conformance suites against the directory store (or, in the child process of
/// the cross-process demonstration, creates its round), then the feed check and the wake-up
/// demonstrations.
#[cfg(unix)]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some((flag, rest)) = args.split_first()
        && flag == demo::CHILD_FLAG
    {
        return demo::run_child(rest).await;
    }

    let rounds = round_suite().await;
    let executions = execution_suite().await;
    let rounds_ok = check("managed-input", &rounds, case_count());
    let executions_ok = check("execution", &executions, execution::CASES.len());
    rounds_ok?;
    executions_ok?;

    let temp = tempfile::tempdir()?;
    feed_check::cursors_survive_pruning_and_reopening(&temp.path().join("feed")).await?;
    demo::wake_in_process(&temp.path().join("in-process")).await?;
    demo::wake_across_processes(&temp.path().join("cross-process")).await?;
    Ok(())
}

/// The directory store's change signal is a Unix datagram; elsewhere there is nothing to run.
#[cfg(not(unix))]
fn main() {
    eprintln!("the custom_backend example needs Unix (its change signal is a Unix datagram)");
}
