//! [`ExecutionStore::claim_queued`](m3_store::ExecutionStore::claim_queued) on PostgreSQL: the
//! oldest claimable row is locked with `FOR UPDATE SKIP LOCKED`, so concurrent claimers
//! each lock a different row (or none) instead of queueing on one; the lease, the
//! lifecycle and the state-change event are written in the same transaction.

use m3_types::Result;
use time::OffsetDateTime;

use super::executions::{Pending, PgExecutionStore, Store, commit, decode};
use crate::error::db;
use m3_store::execution::rules::{self, CLAIMED_LIFECYCLE, ExecutionSlot, state_changed_payload};
use m3_store::{ClaimQueued, ClaimedExecution, EVENT_EXECUTION_STATE_CHANGED};

impl PgExecutionStore {
    pub(super) async fn do_claim_queued(
        &self,
        request: ClaimQueued,
    ) -> Result<Option<ClaimedExecution>> {
        // Bad arguments are refused even when nothing is queued.
        rules::check_claim_request(&request, m3_store::store_now(self.shared().clock.as_ref()))?;
        let only = request.execution_id.as_deref();
        let mut tx = self.begin().await?;
        let row: Option<(String, OffsetDateTime)> = sqlx::query_as(
            "SELECT record_json, clock_timestamp() FROM m3rs_executions \
             WHERE lifecycle = 'queued' AND NOT finished AND lease_token IS NULL \
               AND ($1::text IS NULL OR execution_id = $1) \
             ORDER BY created_at, execution_id LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .bind(only)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("cannot look for queued executions"))?;
        // Nothing claimable: dropping `tx` rolls the empty transaction back.
        let Some((stored, server_now)) = row else {
            return Ok(None);
        };
        let record = decode(&stored)?;
        if !rules::is_claimable(&record, only) {
            return Ok(None);
        }
        let now = self.shared().now(server_now);
        let (expires_at, token) = rules::check_claim_request(&request, now)?;
        let mut pending = Pending::new(record);
        let lease = rules::apply_claim(pending.change(), &request.owner_id, token, expires_at, now);
        pending.append_event(
            EVENT_EXECUTION_STATE_CHANGED,
            state_changed_payload(CLAIMED_LIFECYCLE),
            now,
        );
        pending.store(&mut tx).await?;
        commit(tx).await?;
        Ok(Some(ClaimedExecution::new(pending.into_record(), lease)))
    }
}
