//! Lease and failure operations: `claim_round`, `fail`, `fail_recovery` (renewals: `renew`).

use m3_types::{ManagedInputRecord, Result};
use sqlx::SqliteConnection;
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use time::OffsetDateTime;

use super::checks::{bind_lease_guard, fetch_existing};
use super::codec::{decode_record, timestamp_text};
use super::columns::record_columns;
use super::error::storage;
use super::row_snapshot::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{
    Decision, apply_claim, check_claim, check_fail, check_fail_recovery, lease_expiry,
    new_lease_token, raced, require_text,
};
use crate::{ClaimRound, LeaseRef, RoundFailure, RoundRef};

const CLAIM: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status=?,delivered_at=?,owner_id=?,lease_token=?,lease_expires_at=?,updated_at=? ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status=? AND lease_expires_at<=? RETURNING ",
    record_columns!()
);

const FAIL: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status='failed',failed_at=?,failure_code=?,failure_message=?,updated_at=? ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status NOT IN ('resolved','failed') AND lease_expires_at>? RETURNING ",
    record_columns!()
);

const FAIL_RECOVERY: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status='failed',failed_at=?,failure_code='recovery_unavailable',failure_message=?,updated_at=? ",
    "WHERE execution_id=? AND round_id=? AND lease_token=? AND status IN ('pending','response_validated','delivery_started','delivered') AND lease_expires_at<=? RETURNING ",
    record_columns!()
);

/// The one row a guarded UPDATE changed, decoded and remembered as the round's image.
fn single(
    rows: &[sqlx::sqlite::SqliteRow],
    images: &ImageCache,
    what: &'static str,
) -> Result<ManagedInputRecord> {
    match rows {
        [row] => {
            let record = decode_record(row)?;
            images.remember(row, &record);
            Ok(record)
        }
        _ => Err(raced(what)),
    }
}

/// Runs a guarded `UPDATE ... RETURNING` and takes the one row it changed ([`single`]);
/// `failure` names the operation in a storage error.
async fn update_one(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    update: Query<'_, Sqlite, SqliteArguments>,
    failure: &'static str,
    what: &'static str,
) -> Result<ManagedInputRecord> {
    let rows = update
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage(failure, e))?;
    single(&rows, images, what)
}

const FAIL_UNRESOLVED: &str = "UPDATE m3_managed_input_rounds SET status='failed',failed_at=?,failure_code='recovery_unavailable',failure_message=?,updated_at=? WHERE execution_id=? AND status IN ('pending','response_validated','delivery_started','delivered')";

/// Fails every unresolved round of `execution_id` inside the caller's write transaction (the
/// execution store's recovery shares it); returns how many.
pub(crate) async fn fail_unresolved_in_tx(
    conn: &mut SqliteConnection,
    execution_id: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    let now_text = timestamp_text(now);
    let done = sqlx::query(FAIL_UNRESOLVED)
        .bind(&now_text)
        .bind(message)
        .bind(&now_text)
        .bind(execution_id)
        .execute(&mut *conn)
        .await
        .map_err(|e| storage("cannot fail the unresolved managed-input rounds", e))?;
    Ok(done.rows_affected())
}

impl SqliteManagedInputStore {
    pub(crate) async fn fail_unresolved_rounds_impl(
        &self,
        execution_id: &str,
        message: &str,
    ) -> Result<u64> {
        require_text(execution_id, "execution_id")?;
        require_text(message, "message")?;
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => fail_unresolved_in_tx(&mut write, execution_id, message, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    pub(crate) async fn claim_round_impl(
        &self,
        round: &RoundRef,
        claim: &ClaimRound,
    ) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => claim_in_tx(&mut write, &inner.images, round, claim, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    pub(crate) async fn fail_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        failure: &RoundFailure,
    ) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => fail_in_tx(&mut write, &inner.images, round, lease, failure, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    pub(crate) async fn fail_recovery_impl(
        &self,
        round: &RoundRef,
        expected_lease_token: &str,
        message: &str,
    ) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => {
                fail_recovery_in_tx(
                    &mut write,
                    &inner.images,
                    round,
                    expected_lease_token,
                    message,
                    now,
                )
                .await
            }
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}

async fn claim_in_tx(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    round: &RoundRef,
    claim: &ClaimRound,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    let next = check_claim(&current, claim, now)?;
    let token = new_lease_token()?;
    let expires = lease_expiry(now, claim.lease_duration)?;
    let delivered_at = apply_claim(&current, claim, next, token.clone(), expires, now).delivered_at;
    let now_text = timestamp_text(now);
    let update = sqlx::query(CLAIM)
        .bind(next.as_str())
        .bind(delivered_at.map(timestamp_text))
        .bind(&claim.owner_id)
        .bind(&token)
        .bind(timestamp_text(expires))
        .bind(&now_text)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(&current.lease.owner_id)
        .bind(&current.lease.lease_token)
        .bind(current.status.as_str())
        .bind(&now_text);
    update_one(
        conn,
        images,
        update,
        "cannot claim a managed-input round",
        "claim",
    )
    .await
}

async fn fail_in_tx(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    round: &RoundRef,
    lease: &LeaseRef,
    failure: &RoundFailure,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    if check_fail(&current, lease, failure, now)? == Decision::AlreadyDone {
        return Ok(current);
    }
    let now_text = timestamp_text(now);
    let update = sqlx::query(FAIL)
        .bind(&now_text)
        .bind(&failure.code)
        .bind(&failure.message)
        .bind(&now_text);
    let update = bind_lease_guard(update, round, lease, &now_text);
    let failed = "cannot fail a managed-input round";
    update_one(conn, images, update, failed, "failure").await
}

async fn fail_recovery_in_tx(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    round: &RoundRef,
    expected_lease_token: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    if check_fail_recovery(&current, expected_lease_token, now)? == Decision::AlreadyDone {
        return Ok(current);
    }
    let now_text = timestamp_text(now);
    let update = sqlx::query(FAIL_RECOVERY)
        .bind(&now_text)
        .bind(message)
        .bind(&now_text)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(expected_lease_token)
        .bind(&now_text);
    let failed = "cannot record a managed-input recovery failure";
    update_one(conn, images, update, failed, "recovery decision").await
}
