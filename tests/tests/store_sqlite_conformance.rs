//! The managed-input conformance suite against the SQLite backend, with default and with
//! non-default options.

use std::sync::Arc;
use std::time::Duration;

use m3_store::conformance::execution::{self, ExecutionBackend};
use m3_store::conformance::{Backend, case_count, run_all};
use m3_store::{
    SqliteExecutionStore, SqliteManagedInputStore, SqliteStoreOptions, SqliteSynchronous,
};
use m3_types::Clock;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_conformance_suite_with_default_options() {
    let report = run_all(|clock| backend(clock, SqliteStoreOptions::new())).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), case_count());
    assert!(case_count() >= 60, "the suite must keep at least 60 cases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_conformance_suite_with_non_default_options() {
    let options = SqliteStoreOptions::new()
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_millis(1500))
        .max_connections(1);
    let report = run_all(move |clock| backend(clock, options.clone())).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_execution_store_passes_the_execution_suite_with_default_options() {
    let report =
        execution::run_all(|clock| execution_backend(clock, SqliteStoreOptions::new())).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), execution::CASES.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_execution_store_passes_the_execution_suite_with_non_default_options() {
    let options = SqliteStoreOptions::new()
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_millis(1500))
        .max_connections(1)
        .change_signal(false);
    let report = execution::run_all(move |clock| execution_backend(clock, options.clone())).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
}
