//! The SQLite backend of both stores: [`SqliteManagedInputStore`], [`SqliteExecutionStore`]
//! and their [`SqliteStoreOptions`].
//!
//! The tables, columns, constraints, status strings, JSON shapes and timestamp text are the
//! Python original's (sf-m3 0.3.1), so either implementation reads and answers rounds the
//! other wrote.

mod checks;
mod codec;
mod columns;
pub(crate) mod connect;
pub(crate) mod error;
mod execution;
mod feed;
pub(crate) mod file;
mod oauth;
mod options;
mod policies;
mod recognize;
pub(crate) mod recovery;
mod reminders;
mod renew;
mod rounds;
mod row_snapshot;
mod schema;
mod store;
mod subscriptions;
mod tokens;
mod workers;
mod write;

use async_trait::async_trait;
use m3_types::{ManagedInputRecord, Result};
use serde_json::{Map, Value};

pub use execution::SqliteExecutionStore;
pub use execution::{EXECUTION_EVENTS_TABLE, EXECUTION_SCHEMA_TABLE, EXECUTIONS_TABLE};
pub use options::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, SqliteStoreOptions, SqliteSynchronous,
};
pub use store::SqliteManagedInputStore;

use crate::signal::{Announce, Change, ChangeKind};
use crate::{
    CreateRound, ManagedInputStore, PendingPage, PendingQuery, RenewRoundLeases, RoundChange,
    RoundRef, RoundScan,
};

#[async_trait]
impl ManagedInputStore for SqliteManagedInputStore {
    async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let execution_id = request.pending.execution_id.clone();
        self.create_round_impl(request)
            .await
            .announce(self.signal(), |_| {
                Change::new(execution_id, ChangeKind::Round)
            })
    }

    async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>> {
        self.get_round_impl(round).await
    }

    async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan> {
        self.scan_rounds_impl(execution_id).await
    }

    async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage> {
        self.pending_page_impl(query).await
    }

    async fn renew_leases(
        &self,
        batch: RenewRoundLeases,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        self.renew_batch(&batch.leases, batch.lease_duration).await
    }

    async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord> {
        let round = change.round();
        self.write_change(&change)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64> {
        self.fail_unresolved_rounds_impl(execution_id, message)
            .await
            .announce(self.signal(), |_| {
                Change::new(execution_id, ChangeKind::Round)
            })
    }

    async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>> {
        self.redacted_responses_impl(round).await
    }

    async fn answered_by(&self, round: &RoundRef) -> Result<Option<m3_types::Actor>> {
        self.answered_by_impl(round).await
    }
}

/// The change a committed write of `round` announces.
fn round_change(round: &RoundRef) -> Change {
    Change::new(round.execution_id.clone(), ChangeKind::Round)
}

impl SqliteManagedInputStore {
    fn signal(&self) -> &dyn crate::signal::ChangeSignal {
        self.inner().signal.as_ref()
    }
}
