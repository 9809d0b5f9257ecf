//! The managed-input conformance suite against the SQLite backend, with default and with
//! non-default options.

use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_store::conformance::execution::{self, ExecutionBackend};
use m3_store::conformance::{Backend, case_count, run_all};
use m3_store::{
    SqliteExecutionStore, SqliteManagedInputStore, SqliteStoreOptions, SqliteSynchronous,
};
use m3_types::Clock;

/// How long a suite's runtime may take to stop its leftover background tasks.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

/// Runs one suite on its own two-thread runtime and stops the runtime with a bound.
///
/// Every assertion is made inside `suite`. Once (in CI, under load) the non-default run
/// printed "108 of 108 conformance cases passed" and then did not end for ten minutes: the
/// time went into dropping the runtime, which waits without limit for its threads. It did
/// not recur in 234 runs under load. The one suspect found since (the change hub woke its
/// subscriptions while holding its non-re-entrant lock) is fixed, without proof that it was
/// the cause; bounding the shutdown keeps a straggling background task from holding the
/// test, and a slow shutdown is reported on stderr for whoever reads a failing run's output.
fn run_suite(suite: impl Future<Output = ()>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(suite);
    let stopping = Instant::now();
    runtime.shutdown_timeout(SHUTDOWN_LIMIT);
    if stopping.elapsed() >= SHUTDOWN_LIMIT {
        eprintln!("the runtime did not stop within {SHUTDOWN_LIMIT:?} after the suite passed");
    }
    Ok(())
}

/// Every option away from its default: `NORMAL` sync, a short busy timeout, one connection.
fn non_default_options() -> SqliteStoreOptions {
    SqliteStoreOptions::new()
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_millis(1500))
        .max_connections(1)
}

async fn backend(clock: Arc<dyn Clock>, options: SqliteStoreOptions) -> m3_types::Result<Backend> {
    let dir =
        tempfile::tempdir().map_err(|e| m3_types::Error::storage("tempdir").with_source(e))?;
    let path = dir.path().join("m3.sqlite");
    let options = options.clock(clock);
    let store = SqliteManagedInputStore::open_with(&path, options.clone()).await?;
    // A second store object on the same file, as a reopened database or another process.
    let peer = SqliteManagedInputStore::open_with(&path, options).await?;
    Ok(Backend::new(Arc::new(store.clone()), Arc::new(peer), Arc::new(store)).with_guard(dir))
}

#[test]
fn sqlite_store_passes_the_conformance_suite_with_default_options() {
    run_suite(async {
        let report = run_all(|clock| backend(clock, SqliteStoreOptions::new())).await;
        println!("{report}");
        assert!(report.is_success(), "{report}");
        assert_eq!(report.passed.len(), case_count());
        assert!(case_count() >= 60, "the suite must keep at least 60 cases");
    })
    .unwrap();
}

#[test]
fn sqlite_store_passes_the_conformance_suite_with_non_default_options() {
    run_suite(async {
        let options = non_default_options();
        let report = run_all(move |clock| backend(clock, options.clone())).await;
        println!("{report}");
        assert!(report.is_success(), "{report}");
    })
    .unwrap();
}

async fn execution_backend(
    clock: Arc<dyn Clock>,
    options: SqliteStoreOptions,
) -> m3_types::Result<ExecutionBackend> {
    let dir =
        tempfile::tempdir().map_err(|e| m3_types::Error::storage("tempdir").with_source(e))?;
    let path = dir.path().join("m3.sqlite");
    let options = options.clock(clock);
    let store = SqliteExecutionStore::open_with(&path, options.clone()).await?;
    let peer = SqliteExecutionStore::open_with(&path, options).await?;
    Ok(ExecutionBackend::new(Arc::new(store), Arc::new(peer)).with_guard(dir))
}

#[test]
fn sqlite_execution_store_passes_the_execution_suite_with_default_options() {
    run_suite(async {
        let report =
            execution::run_all(|clock| execution_backend(clock, SqliteStoreOptions::new())).await;
        println!("{report}");
        assert!(report.is_success(), "{report}");
        assert_eq!(report.passed.len(), execution::CASES.len());
    })
    .unwrap();
}

#[test]
fn sqlite_execution_store_passes_the_execution_suite_with_non_default_options() {
    run_suite(async {
        let options = non_default_options().change_signal(false);
        let report =
            execution::run_all(move |clock| execution_backend(clock, options.clone())).await;
        println!("{report}");
        assert!(report.is_success(), "{report}");
    })
    .unwrap();
}
