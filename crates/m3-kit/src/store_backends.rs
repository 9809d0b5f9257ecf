//! The store backends this build serves by URL: `m3_store::open` knows `memory:` and SQLite
//! itself; the others (PostgreSQL, feature `postgres`) are registered here, the one place
//! above the store crates that names a backend.

use std::sync::Arc;

use m3_store::ExecutionStore;
use m3_types::Result;

/// Registers every store backend compiled into this build with `m3_store::open` (with
/// feature `postgres`: `postgres://` and `postgresql://`). Idempotent; the kit's builder
/// calls it before it opens a store by URL.
pub fn register_store_backends() {
    #[cfg(feature = "postgres")]
    m3_store_postgres::register();
}

/// Opens the store `url` names ([`m3_store::open()`]) after [`register_store_backends`].
///
/// ```
/// # async fn demo() -> m3_types::Result<()> {
/// let store = m3_kit::open_store("memory:").await?;
/// assert!(!store.is_persistent());
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`m3_store::open()`].
pub async fn open_store(url: &str) -> Result<Arc<dyn ExecutionStore>> {
    register_store_backends();
    m3_store::open(url).await
}
