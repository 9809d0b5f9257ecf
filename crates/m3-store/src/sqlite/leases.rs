//! Lease and failure operations: `claim_round`, `renew`, `fail`, `fail_recovery`.

use std::time::Duration;

use m3_types::{ManagedInputRecord, Result};
use sqlx::SqliteConnection;
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use time::OffsetDateTime;

use super::checks::{bind_lease_guard, fetch_existing};
use super::codec::{decode_record, timestamp_text};
use super::columns::record_columns;
use super::error::{batch_item, storage};
use super::image::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{
    Decision, apply_claim, check_claim, check_fail, check_fail_recovery, check_renew,
    check_renew_args, lease_expiry, new_lease_token, raced, require_lease_duration, require_text,
};
use crate::{ClaimRound, LeaseRef, RoundFailure, RoundRef};

const CLAIM: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status=?,delivered_at=?,owner_id=?,lease_token=?,lease_expires_at=?,updated_at=? ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status=? AND lease_expires_at<=? RETURNING ",
    record_columns!()
);

const RENEW: &str = concat!(
    "UPDATE m3_managed_input_rounds SET lease_expires_at=?,updated_at=? ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status IN ('pending','response_validated','delivery_started') AND lease_expires_at>? RETURNING ",
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

/// Whether a write keeps the row it left as the round's image (see [`ImageCache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Image {
    Remember,
    Forget,
}

/// The one row a guarded UPDATE changed, decoded, and remembered as the round's image or
/// forgotten as `image` says.
fn single(
    rows: &[sqlx::sqlite::SqliteRow],
    images: &ImageCache,
    image: Image,
    what: &'static str,
) -> Result<ManagedInputRecord> {
    match rows {
        [row] => {
            let record = decode_record(row)?;
            match image {
                Image::Remember => images.remember(row, &record),
                Image::Forget => images.forget(&RoundRef::of(&record)),
            }
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
    image: Image,
    update: Query<'_, Sqlite, SqliteArguments>,
    failure: &'static str,
    what: &'static str,
) -> Result<ManagedInputRecord> {
    let rows = update
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage(failure, e))?;
    single(&rows, images, image, what)
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

    /// `renew_leases` (and `renew`, a batch of one): every lease of the batch in one write
    /// transaction.
    pub(super) async fn renew_batch(
        &self,
        leases: &[(RoundRef, LeaseRef)],
        lease_duration: Duration,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        require_lease_duration(lease_duration)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = async {
            let now = inner.now()?;
            let mut outcomes = Vec::with_capacity(leases.len());
            for (round, lease) in leases {
                let renewed = match check_renew_args(round, lease, lease_duration) {
                    Ok(()) => {
                        renew_in_tx(&mut write, &inner.images, round, lease, lease_duration, now)
                            .await
                    }
                    Err(error) => Err(error),
                };
                outcomes.push(batch_item(renewed)?);
            }
            Ok(outcomes)
        }
        .await;
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
        Image::Remember,
        update,
        "cannot claim a managed-input round",
        "claim",
    )
    .await
}

async fn renew_in_tx(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    round: &RoundRef,
    lease: &LeaseRef,
    lease_duration: Duration,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    check_renew(&current, lease, now)?;
    let expires = lease_expiry(now, lease_duration)?;
    let now_text = timestamp_text(now);
    let expires_text = timestamp_text(expires);
    let update = bind_lease_guard(
        sqlx::query(RENEW).bind(&expires_text).bind(&now_text),
        round,
        lease,
        &now_text,
    );
    let failure = "cannot renew a managed-input lease";
    // No image: a renewed round waits, and whoever writes it next (the waiter woken by its
    // response) reads it first; 1,000 waiting rounds would otherwise hold 1,000 images.
    update_one(
        conn,
        images,
        Image::Forget,
        update,
        failure,
        "lease renewal",
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
    update_one(conn, images, Image::Remember, update, failed, "failure").await
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
    update_one(
        conn,
        images,
        Image::Remember,
        update,
        failed,
        "recovery decision",
    )
    .await
}
