//! Opening PostgreSQL stores by URL through `m3_store::open`: the [`Opener`] of the
//! `postgres` and `postgresql` schemes, and [`register`].

use std::sync::Arc;

use m3_store::ExecutionStore;
use m3_store::open::Opener;
use m3_types::{Clock, Result};

use crate::{PgExecutionStore, PgStoreOptions};

/// Opens `postgres://` and `postgresql://` URLs (see [`PgStoreOptions::from_url`] for the
/// parameters) as a [`PgExecutionStore`]: on the database server's clock unless a clock
/// is given.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct PgOpener;

#[async_trait::async_trait]
impl Opener for PgOpener {
    fn schemes(&self) -> &[&'static str] {
        &["postgres", "postgresql"]
    }

    async fn open(
        &self,
        url: &str,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<Arc<dyn ExecutionStore>> {
        let store = match clock {
            Some(clock) => {
                PgExecutionStore::open_with(PgStoreOptions::from_url(url)?.clock(clock)).await?
            }
            None => PgExecutionStore::open(url).await?,
        };
        Ok(Arc::new(store))
    }
}

/// Registers [`PgOpener`] with `m3_store::open` for this process (harmless to repeat):
/// afterwards `m3_store::open("postgres://...")` opens a [`PgExecutionStore`].
pub fn register() {
    m3_store::open::register(Arc::new(PgOpener));
}
