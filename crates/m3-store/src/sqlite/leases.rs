//! Lease and failure operations: `claim_round`, `renew`, `fail`, `fail_recovery`.

use std::time::Duration;

use m3_types::{DeliveryState, Error, ManagedInputRecord, ManagedInputStatus, Result};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::checks::{
    authorize, bind_lease_guard, fetch_existing, lease_expiry, optional_text, require_lease,
    require_round, require_text,
};
use super::codec::{decode_record, new_lease_token, record_columns, timestamp_text};
use super::error::storage;
use super::image::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::{ClaimRound, LeaseRef, RoundFailure, RoundRef};

/// The failure code of a terminal recovery decision.
pub(crate) const RECOVERY_UNAVAILABLE: &str = "recovery_unavailable";

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

/// The one row a guarded UPDATE changed, decoded and remembered as the round's image.
fn single(
    rows: &[sqlx::sqlite::SqliteRow],
    images: &ImageCache,
    race: &'static str,
) -> Result<ManagedInputRecord> {
    match rows {
        [row] => {
            let record = decode_record(row)?;
            images.remember(row, &record);
            Ok(record)
        }
        _ => Err(Error::managed_input_conflict(race)),
    }
}

impl SqliteManagedInputStore {
    pub(crate) async fn claim_round_impl(
        &self,
        round: &RoundRef,
        claim: ClaimRound,
    ) -> Result<ManagedInputRecord> {
        require_round(round)?;
        require_text(&claim.owner_id, "owner_id")?;
        optional_text(
            claim.expected_lease_token.as_deref(),
            "expected_lease_token",
        )?;
        if claim.lease_duration.is_zero() {
            return Err(Error::managed_input_validation(
                "lease_seconds must be positive",
            ));
        }
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => claim_in_tx(&mut write, &inner.images, round, &claim, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    pub(crate) async fn renew_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        lease_duration: Duration,
    ) -> Result<ManagedInputRecord> {
        require_round(round)?;
        require_lease(lease)?;
        if lease_duration.is_zero() {
            return Err(Error::managed_input_validation(
                "lease_seconds must be positive",
            ));
        }
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => {
                renew_in_tx(&mut write, &inner.images, round, lease, lease_duration, now).await
            }
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
        require_text(&failure.code, "code")?;
        require_text(&failure.message, "message")?;
        require_round(round)?;
        require_lease(lease)?;
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
        require_round(round)?;
        require_text(expected_lease_token, "expected_lease_token")?;
        require_text(message, "message")?;
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

/// The status a claim leaves behind, given the stored status and the evidence, or the
/// reason the evidence is not enough.
fn claimed_status(current: &ManagedInputRecord, claim: &ClaimRound) -> Result<ManagedInputStatus> {
    use ManagedInputStatus as S;
    match current.status {
        S::Failed => {
            if current.failure_code.as_deref() == Some(RECOVERY_UNAVAILABLE) {
                let message = current
                    .failure_message
                    .clone()
                    .unwrap_or_else(|| "managed input cannot be recovered".to_owned());
                return Err(Error::managed_input_recovery(message));
            }
            return Err(Error::managed_input_state(
                "failed managed-input round cannot be claimed",
            ));
        }
        S::Resolved => {
            return Err(Error::managed_input_state(
                "resolved managed-input round cannot be claimed",
            ));
        }
        _ => {}
    }
    let Some(evidence) = claim.delivery_state else {
        return Err(Error::managed_input_recovery(
            "replacement claims require adapter delivery-state evidence",
        ));
    };
    let next = if current.status == S::DeliveryStarted {
        match evidence {
            DeliveryState::NotDelivered if !claim.idempotent_delivery => {
                return Err(Error::managed_input_recovery(
                    "not_delivered recovery requires idempotent delivery proof",
                ));
            }
            DeliveryState::NotDelivered => S::ResponseValidated,
            DeliveryState::Delivered => S::Delivered,
            DeliveryState::NotStarted => {
                return Err(Error::managed_input_recovery(
                    "delivery_started round has ambiguous delivery state",
                ));
            }
        }
    } else {
        let required = match current.status {
            S::Pending => Some(DeliveryState::NotStarted),
            S::ResponseValidated => Some(DeliveryState::NotDelivered),
            S::Delivered => Some(DeliveryState::Delivered),
            _ => None,
        };
        if required != Some(evidence) {
            return Err(Error::managed_input_recovery(
                "adapter delivery-state evidence does not match the persisted round",
            )
            .with_detail("status", current.status.as_str()));
        }
        current.status
    };
    if current.status == S::ResponseValidated && !claim.idempotent_delivery {
        return Err(Error::managed_input_recovery(
            "validated responses require idempotent delivery proof",
        ));
    }
    Ok(next)
}

async fn claim_in_tx(
    conn: &mut SqliteConnection,
    images: &ImageCache,
    round: &RoundRef,
    claim: &ClaimRound,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    let next = claimed_status(&current, claim)?;
    if current.lease.expires_at > now {
        return Err(Error::managed_input_conflict(
            "managed-input round lease is still held",
        ));
    }
    if claim.expected_lease_token.as_deref() != Some(current.lease.lease_token.as_str()) {
        return Err(Error::managed_input_conflict(
            "expected lease token does not match",
        ));
    }
    let token = new_lease_token()?;
    let expires = lease_expiry(now, claim.lease_duration)?;
    let delivered_at = if current.status == ManagedInputStatus::DeliveryStarted
        && next == ManagedInputStatus::Delivered
    {
        Some(now)
    } else {
        current.delivered_at
    };
    let now_text = timestamp_text(now);
    let rows = sqlx::query(CLAIM)
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
        .bind(&now_text)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot claim a managed-input round", e))?;
    single(
        &rows,
        images,
        "managed-input lease was changed concurrently",
    )
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
    authorize(&current, lease, now, false)?;
    if !matches!(
        current.status,
        ManagedInputStatus::Pending
            | ManagedInputStatus::ResponseValidated
            | ManagedInputStatus::DeliveryStarted
    ) {
        return Err(
            Error::managed_input_state("terminal managed-input round cannot renew")
                .with_detail("status", current.status.as_str()),
        );
    }
    let expires = lease_expiry(now, lease_duration)?;
    let now_text = timestamp_text(now);
    let rows = bind_lease_guard(
        sqlx::query(RENEW)
            .bind(timestamp_text(expires))
            .bind(&now_text),
        round,
        lease,
        &now_text,
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| storage("cannot renew a managed-input lease", e))?;
    single(
        &rows,
        images,
        "managed-input lease renewal raced with another owner",
    )
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
    authorize(&current, lease, now, false)?;
    match current.status {
        ManagedInputStatus::Resolved => {
            return Err(Error::managed_input_state(
                "resolved managed-input round cannot fail",
            ));
        }
        ManagedInputStatus::Failed => {
            if current.failure_code.as_deref() == Some(failure.code.as_str())
                && current.failure_message.as_deref() == Some(failure.message.as_str())
            {
                return Ok(current);
            }
            return Err(Error::managed_input_conflict(
                "managed-input failure is already recorded",
            ));
        }
        _ => {}
    }
    let now_text = timestamp_text(now);
    let rows = bind_lease_guard(
        sqlx::query(FAIL)
            .bind(&now_text)
            .bind(&failure.code)
            .bind(&failure.message)
            .bind(&now_text),
        round,
        lease,
        &now_text,
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| storage("cannot fail a managed-input round", e))?;
    single(
        &rows,
        images,
        "managed-input failure raced with another owner",
    )
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
    if current.lease.lease_token != expected_lease_token {
        return Err(Error::managed_input_conflict(
            "expected lease token does not match",
        ));
    }
    match current.status {
        ManagedInputStatus::Failed => {
            if current.failure_code.as_deref() == Some(RECOVERY_UNAVAILABLE) {
                return Ok(current);
            }
            return Err(Error::managed_input_state(
                "managed-input round has another terminal failure",
            ));
        }
        ManagedInputStatus::Resolved => {
            return Err(Error::managed_input_state(
                "only unresolved rounds require recovery failure",
            ));
        }
        _ => {}
    }
    if current.lease.expires_at > now {
        return Err(Error::managed_input_conflict(
            "managed-input lease is still held",
        ));
    }
    let now_text = timestamp_text(now);
    let rows = sqlx::query(FAIL_RECOVERY)
        .bind(&now_text)
        .bind(message)
        .bind(&now_text)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(expected_lease_token)
        .bind(&now_text)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot record a managed-input recovery failure", e))?;
    single(
        &rows,
        images,
        "managed-input recovery decision raced with another owner",
    )
}
