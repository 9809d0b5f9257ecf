//! Both conformance suites against the PostgreSQL backend, each case in its own schema on
//! the server `M3_TEST_POSTGRES_URL` names (scripts/test.sh starts a throwaway one).

use std::sync::Arc;

use m3_store::conformance::{Backend, case_count, run_all};
use m3_store::postgres::PgManagedInputStore;
use m3_store::postgres::testing::isolated_options;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_managed_input_store_passes_the_managed_input_suite() {
    let report = run_all(|clock| async move {
        let options = isolated_options()?.clock(clock);
        let store = PgManagedInputStore::open_with(options.clone()).await?;
        let peer = PgManagedInputStore::open_with(options).await?;
        Ok(Backend::new(
            Arc::new(store.clone()),
            Arc::new(peer),
            Arc::new(store),
        ))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), case_count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_execution_store_passes_the_execution_suite() {
    use m3_store::conformance::execution::{self, ExecutionBackend};
    use m3_store::postgres::PgExecutionStore;
    let report = execution::run_all(|clock| async move {
        let options = isolated_options()?.clock(clock);
        let store = PgExecutionStore::open_with(options.clone()).await?;
        let peer = PgExecutionStore::open_with(options).await?;
        Ok(ExecutionBackend::new(Arc::new(store), Arc::new(peer)))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), execution::CASES.len());
}

#[tokio::test]
async fn a_missing_test_server_url_is_a_clear_error_not_a_skip() {
    // The helper's message names the variable and the scripts that set it.
    let message = m3_store::postgres::testing::missing_url_message();
    assert!(message.contains("M3_TEST_POSTGRES_URL"), "{message}");
    assert!(message.contains("scripts/test.sh"), "{message}");
}
