//! The process-wide scheme registry: which [`Opener`] serves which URL scheme.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use m3_types::{Clock, Error, Result};

use crate::ExecutionStore;

/// A backend that opens stores by URL, for the schemes it names: what a backend crate
/// [`register`]s so that [`open`](crate::open()) (and every `--db`/`M3_DB` above it) serves its
/// URLs without `m3-store` importing it.
#[async_trait::async_trait]
pub trait Opener: Debug + Send + Sync {
    /// The URL schemes served, without the `:` (`"postgres"`, `"postgresql"`).
    fn schemes(&self) -> &[&'static str];

    /// Opens the execution store `url` names (the whole URL, scheme included) on `clock`,
    /// or on the backend's default clock when `clock` is `None`. Its
    /// [`managed_input_store`](ExecutionStore::managed_input_store) is the same backend's.
    ///
    /// # Errors
    /// The backend's URL and open errors.
    async fn open(
        &self,
        url: &str,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<Arc<dyn ExecutionStore>>;
}

type Openers = RwLock<HashMap<String, Arc<dyn Opener>>>;

fn openers() -> &'static Openers {
    static OPENERS: OnceLock<Openers> = OnceLock::new();
    OPENERS.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers `opener` for each of its [`schemes`](Opener::schemes), in this process;
/// an opener registered later for the same scheme replaces the earlier one, so
/// registering twice is harmless. `memory:` and SQLite paths are `m3-store`'s own and
/// cannot be taken over.
pub fn register(opener: Arc<dyn Opener>) {
    let mut openers = openers().write().unwrap_or_else(PoisonError::into_inner);
    for scheme in opener.schemes() {
        let scheme = scheme.to_ascii_lowercase();
        if matches!(scheme.as_str(), "memory" | "sqlite") {
            tracing::warn!(%scheme, "a store opener cannot take over a built-in scheme");
            continue;
        }
        openers.insert(scheme, Arc::clone(&opener));
    }
}

/// The schemes registered in this process, sorted.
pub fn registered_schemes() -> Vec<String> {
    let openers = openers().read().unwrap_or_else(PoisonError::into_inner);
    let mut schemes: Vec<String> = openers.keys().cloned().collect();
    schemes.sort();
    schemes
}

/// Whether an opener serves `scheme`.
pub(super) fn serves(scheme: &str) -> bool {
    lookup(scheme).is_some()
}

fn lookup(scheme: &str) -> Option<Arc<dyn Opener>> {
    let openers = openers().read().unwrap_or_else(PoisonError::into_inner);
    openers.get(&scheme.to_ascii_lowercase()).cloned()
}

/// Opens `url` with the opener of `scheme`.
pub(super) async fn open(
    scheme: &str,
    url: &str,
    clock: Option<Arc<dyn Clock>>,
) -> Result<Arc<dyn ExecutionStore>> {
    match lookup(scheme) {
        Some(opener) => opener.open(url, clock).await,
        None => Err(Error::model_validation(unserved(scheme)).with_detail("scheme", scheme)),
    }
}

/// Why a `scheme:` URL cannot be opened in this process.
fn unserved(scheme: &str) -> String {
    if matches!(scheme, "postgres" | "postgresql") {
        "this build has no PostgreSQL backend (the m3-store-postgres crate, registered with \
         `m3_store_postgres::register()`; m3-kit and m3-cli: feature `postgres`)"
            .to_owned()
    } else {
        format!("no store backend is registered for '{scheme}:' URLs (m3_store::open::register)")
    }
}
