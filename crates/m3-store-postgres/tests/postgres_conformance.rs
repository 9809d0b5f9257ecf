//! Both conformance suites against the PostgreSQL backend, each case in its own schema on
//! the server `M3_TEST_POSTGRES_URL` names (scripts/test.sh starts a throwaway one).

use std::sync::Arc;

use m3_store::conformance::{Backend, case_count, run_all};
use m3_store_postgres::PgManagedInputStore;
use m3_store_postgres::testing::isolated_options;

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
    use m3_store_postgres::PgExecutionStore;
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
    let message = m3_store_postgres::testing::missing_url_message();
    assert!(message.contains("M3_TEST_POSTGRES_URL"), "{message}");
    assert!(message.contains("scripts/test.sh"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_postgres_urls_open_through_m3_store_open_and_concurrent_openers_share_one_schema()
 {
    use m3_store_postgres::testing::isolated_url;
    m3_store_postgres::register();
    let url = isolated_url().unwrap();
    let openers = (0..4).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { m3_store::open(&url).await })
    });
    for opener in openers {
        let store = opener.await.unwrap().unwrap();
        assert!(store.is_persistent());
    }
    let other = url.replacen("postgres://", "postgresql://", 1);
    let store = m3_store::open(&other).await.unwrap();
    let created = store
        .create_execution(m3_store::NewExecution::new(serde_json::json!({"k": 1})))
        .await
        .unwrap();
    let peer = m3_store::open(&url).await.unwrap();
    assert_eq!(
        peer.get_execution(&created.execution_id).await.unwrap(),
        Some(created)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_newer_than_the_build_is_refused() {
    use m3_store_postgres::{PgExecutionStore, PgStoreOptions};
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    PgExecutionStore::open(&url).await.unwrap();
    let options = PgStoreOptions::from_url(&url).unwrap();
    let admin = sqlx::PgPool::connect(&m3_store_postgres::testing::test_server_url().unwrap())
        .await
        .unwrap();
    let insert = format!(
        "INSERT INTO \"{}\"._sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'future', true, '\\x00', 0)",
        options.schema()
    );
    sqlx::query(sqlx::AssertSqlSafe(insert))
        .execute(&admin)
        .await
        .unwrap();
    let refused = PgExecutionStore::open(&url).await.unwrap_err();
    assert!(refused.is_storage(), "{refused}");
    assert_eq!(refused.details()["schema_version"], 9999);
}
