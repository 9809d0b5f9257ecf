//! Worker lease renewal of the SQLite execution store: one lease, or a batch in one write
//! transaction.

use m3_types::{Result, timestamp};
use sqlx::SqliteConnection;
use std::time::Duration;
use time::OffsetDateTime;

use super::SqliteExecutionStore;
use super::writes::fetch;
use crate::execution::record::{ExecutionLease, ExecutionLeaseRef};
use crate::execution::rules::errors as error;
use crate::execution::rules::{check_lease_write, lease_expiry, renewed_lease};
use crate::sqlite::error::{batch_item, storage};

impl SqliteExecutionStore {
    /// `renew_lease` in its own write transaction.
    pub(super) async fn do_renew_lease(
        &self,
        lease: &ExecutionLeaseRef,
        ttl: Duration,
    ) -> Result<ExecutionLease> {
        let now = self.now();
        let expires_at = lease_expiry(now, ttl)?;
        let mut tx = self.begin_write().await?;
        let result = renew_in_tx(&mut tx, lease, expires_at, now).await;
        tx.finish(result).await
    }

    /// `renew_leases`: every lease of the batch in one write transaction.
    pub(super) async fn do_renew_leases(
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
                outcomes.push(batch_item(
                    renew_in_tx(&mut tx, lease, expires_at, now).await,
                )?);
            }
            Ok(outcomes)
        }
        .await;
        tx.finish(result).await
    }
}

/// Extends `lease` to `expires_at` with a guarded `UPDATE`; when it matches no row,
/// [`check_lease_write`] names why.
async fn renew_in_tx(
    conn: &mut SqliteConnection,
    lease: &ExecutionLeaseRef,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<ExecutionLease> {
    let id = lease.execution_id.as_str();
    let done = sqlx::query(
        "UPDATE m3rs_executions SET lease_expires_at = ?, updated_at = ?
         WHERE id = ? AND lease_owner_id = ? AND lease_token = ? AND lease_expires_at > ?
           AND finished_at IS NULL",
    )
    .bind(timestamp::format(expires_at))
    .bind(timestamp::format(now))
    .bind(id)
    .bind(&lease.owner_id)
    .bind(&lease.lease_token)
    .bind(timestamp::format(now))
    .execute(&mut *conn)
    .await
    .map_err(|e| storage("could not renew the lease", e))?;
    if done.rows_affected() != 1 {
        let fresh = fetch(conn, id).await?;
        check_lease_write(fresh.as_ref(), lease, now)?;
        return Err(error::concurrent_change(id));
    }
    Ok(renewed_lease(lease, expires_at))
}
