//! Both conformance suites against the in-memory backend.

use std::sync::Arc;

use m3_store::conformance::execution::{self, ExecutionBackend};
use m3_store::conformance::{Backend, case_count, run_all};
use m3_store::memory::{MemoryExecutionStore, MemoryManagedInputStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_managed_input_store_passes_the_managed_input_suite() {
    let report = run_all(|clock| async move {
        let store = MemoryManagedInputStore::with_clock(clock);
        Ok(Backend::new(
            Arc::new(store.clone()),
            Arc::new(store.clone()),
            Arc::new(store),
        ))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), case_count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_execution_store_passes_the_execution_suite() {
    let report = execution::run_all(|clock| async move {
        let store = MemoryExecutionStore::with_clock(clock);
        Ok(ExecutionBackend::new(
            Arc::new(store.clone()),
            Arc::new(store),
        ))
    })
    .await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.passed.len(), execution::CASES.len());
}
