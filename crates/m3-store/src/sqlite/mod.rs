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
pub(crate) mod file;
mod image;
pub(crate) mod leases;
mod options;
mod responses;
mod rounds;
mod schema;
mod store;
mod transitions;

use std::time::Duration;

use async_trait::async_trait;
use m3_types::{ManagedInputRecord, Result};
use serde_json::{Map, Value};

pub use execution::SqliteExecutionStore;
pub use execution::{EXECUTION_EVENTS_TABLE, EXECUTION_SCHEMA_TABLE, EXECUTIONS_TABLE};
pub use options::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, SqliteStoreOptions, SqliteSynchronous,
};
pub use store::SqliteManagedInputStore;

use crate::managed_input::rules::Transition;
use crate::signal::{Announce, Change, ChangeKind};
use crate::{
    ClaimRound, CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundFailure,
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

    async fn claim_round(&self, round: &RoundRef, claim: ClaimRound) -> Result<ManagedInputRecord> {
        self.claim_round_impl(round, claim)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn renew(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        lease_duration: Duration,
    ) -> Result<ManagedInputRecord> {
        self.renew_impl(round, lease, lease_duration).await
    }

    async fn renew_leases(
        &self,
        leases: &[(RoundRef, LeaseRef)],
        lease_duration: Duration,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        self.renew_leases_impl(leases, lease_duration).await
    }

    async fn submit_responses(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        submission: ResponseSubmission,
    ) -> Result<ManagedInputRecord> {
        self.submit_responses_impl(round, lease, submission)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn start_delivery(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
    ) -> Result<ManagedInputRecord> {
        self.transition_impl(round, lease, Transition::StartDelivery)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn mark_delivered(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
    ) -> Result<ManagedInputRecord> {
        self.transition_impl(round, lease, Transition::MarkDelivered)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn resolve(&self, round: &RoundRef, lease: &LeaseRef) -> Result<ManagedInputRecord> {
        self.transition_impl(round, lease, Transition::Resolve)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn fail(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        failure: RoundFailure,
    ) -> Result<ManagedInputRecord> {
        self.fail_impl(round, lease, &failure)
            .await
            .announce(self.signal(), |_| round_change(round))
    }

    async fn fail_recovery(
        &self,
        round: &RoundRef,
        expected_lease_token: &str,
        message: &str,
    ) -> Result<ManagedInputRecord> {
        self.fail_recovery_impl(round, expected_lease_token, message)
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
