//! Worker lease renewal of the SQLite execution store: the whole batch in one write
//! transaction, each lease decided by the shared [`renew_step`].

use m3_types::Result;
use std::time::Duration;

use super::SqliteExecutionStore;
use super::writes::{fetch, store};
use crate::execution::record::{ExecutionLease, ExecutionLeaseRef};
use crate::execution::rules::{StagedWrite, lease_expiry, renew_step};
use crate::sqlite::error::batch_item;

impl SqliteExecutionStore {
    /// `renew_leases` (and `renew_lease`, a batch of one): every lease of the batch in one
    /// write transaction.
    pub(super) async fn renew_batch(
        &self,
        leases: &[ExecutionLeaseRef],
        ttl: Duration,
    ) -> Result<Vec<Result<ExecutionLease>>> {
        let now = self.now();
        let expires_at = lease_expiry(now, ttl)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_write().await?;
        let result = async {
            let mut outcomes = Vec::with_capacity(leases.len());
            for lease in leases {
                let mut staged = fetch(&mut tx, &lease.execution_id)
                    .await?
                    .map(StagedWrite::new);
                let renewed = renew_step(staged.as_mut(), lease, expires_at, now);
                if let (Ok(_), Some(staged)) = (&renewed, &staged) {
                    store(&mut tx, staged).await?;
                }
                outcomes.push(batch_item(renewed)?);
            }
            Ok(outcomes)
        }
        .await;
        tx.finish(result).await
    }
}
