//! [`ExecutionStore::claim_queued`](crate::ExecutionStore::claim_queued) on SQLite: a cheap
//! read finds a candidate without the write lock (idle workers never queue on it), then one
//! `BEGIN IMMEDIATE` transaction picks the oldest claimable row again and lets the shared
//! [`claim_step`] lease it and append the state change.

use m3_types::Result;
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::store::SqliteExecutionStore;
use super::writes::{fetch_existing, store};
use crate::execution::record::{ClaimQueued, ClaimedExecution};
use crate::execution::rules::{self, StagedWrite, claim_step};
use crate::sqlite::error::storage;

/// The oldest claimable execution id (`?1`: only this id, or NULL for any).
const OLDEST_QUEUED: &str = "SELECT id FROM m3rs_executions
     WHERE lifecycle = 'queued' AND lease_token IS NULL AND finished_at IS NULL
       AND (?1 IS NULL OR id = ?1)
     ORDER BY created_at, id LIMIT 1";

impl SqliteExecutionStore {
    pub(super) async fn do_claim_queued(
        &self,
        request: ClaimQueued,
    ) -> Result<Option<ClaimedExecution>> {
        let now = self.now();
        let (expires_at, token) = rules::check_claim_request(&request, now)?;
        let only = request.execution_id.as_deref();
        if self.oldest_queued(only).await?.is_none() {
            return Ok(None);
        }
        let mut tx = self.begin_write().await?;
        let result = claim_in_tx(&mut tx, &request, token, expires_at, now).await;
        tx.finish(result).await
    }

    /// The read-only pre-check, outside any transaction.
    async fn oldest_queued(&self, only: Option<&str>) -> Result<Option<String>> {
        sqlx::query_scalar(OLDEST_QUEUED)
            .bind(only)
            .fetch_optional(self.pool())
            .await
            .map_err(|e| storage("could not look for queued executions", e))
    }
}

async fn claim_in_tx(
    tx: &mut SqliteConnection,
    request: &ClaimQueued,
    token: String,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<Option<ClaimedExecution>> {
    let candidate: Option<String> = sqlx::query_scalar(OLDEST_QUEUED)
        .bind(request.execution_id.as_deref())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| storage("could not look for queued executions", e))?;
    let Some(id) = candidate else {
        return Ok(None);
    };
    let mut staged = StagedWrite::new(fetch_existing(tx, &id).await?);
    if !rules::is_claimable(&staged.record, request.execution_id.as_deref()) {
        return Ok(None);
    }
    let lease = claim_step(&mut staged, &request.owner_id, token, expires_at, now);
    store(tx, &staged).await?;
    Ok(Some(ClaimedExecution {
        record: staged.into_record(),
        lease,
    }))
}
