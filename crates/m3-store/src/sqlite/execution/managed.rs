//! Lazy resolution of the execution store's managed-input store.
//!
//! The managed-input store is built the first time
//! [`ExecutionStore::managed_input_store`](crate::ExecutionStore::managed_input_store)
//! is called, on the same database file, pool and clock, and creates its
//! tables on its own first operation — never when the execution store is
//! opened and never when an execution is created. A store that never
//! runs managed work therefore never gains the managed-input tables.

use std::sync::Arc;

use m3_types::Result;

use super::store::Inner;
use crate::{ManagedInputStore, SqliteManagedInputStore};

/// Returns the managed-input store, creating it (and its tables) on first use.
/// Concurrent first callers share one initialization.
pub(super) async fn resolve(inner: &Inner) -> Result<Arc<dyn ManagedInputStore>> {
    let store = inner
        .managed
        .get_or_try_init(|| async {
            let store = SqliteManagedInputStore::from_pool_with_signal(
                inner.pool.clone(),
                Arc::clone(&inner.clock),
                Arc::clone(&inner.signal),
                inner.synchronous,
            );
            tracing::debug!(path = %inner.path.display(), "resolved the managed-input store");
            Ok::<_, m3_types::Error>(Arc::new(store) as Arc<dyn ManagedInputStore>)
        })
        .await?;
    Ok(Arc::clone(store))
}
