//! The delivery transitions: `start_delivery`, `mark_delivered`, `resolve`.

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::checks::{authorize, bind_lease_guard, fetch_existing, require_lease, require_round};
use super::codec::{decode_record, record_columns, timestamp_text};
use super::error::storage;
use super::store::SqliteManagedInputStore;
use crate::{LeaseRef, RoundRef};

/// One forward step of the delivery state machine.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Transition {
    StartDelivery,
    MarkDelivered,
    Resolve,
}

impl Transition {
    fn expected(self) -> ManagedInputStatus {
        match self {
            Self::StartDelivery => ManagedInputStatus::ResponseValidated,
            Self::MarkDelivered => ManagedInputStatus::DeliveryStarted,
            Self::Resolve => ManagedInputStatus::Delivered,
        }
    }

    fn target(self) -> ManagedInputStatus {
        match self {
            Self::StartDelivery => ManagedInputStatus::DeliveryStarted,
            Self::MarkDelivered => ManagedInputStatus::Delivered,
            Self::Resolve => ManagedInputStatus::Resolved,
        }
    }

    /// `BEGIN IMMEDIATE` and the guarded UPDATE in one script; parameters: timestamp,
    /// updated_at, execution_id, round_id, owner_id, lease_token, now.
    fn statement(self) -> &'static str {
        match self {
            Self::StartDelivery => concat!(
                "BEGIN IMMEDIATE;UPDATE m3_managed_input_rounds SET status='delivery_started',delivery_started_at=?,updated_at=?,delivery_attempts=delivery_attempts+1 ",
                "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='response_validated' AND lease_expires_at>? RETURNING ",
                record_columns!()
            ),
            Self::MarkDelivered => concat!(
                "BEGIN IMMEDIATE;UPDATE m3_managed_input_rounds SET status='delivered',delivered_at=?,updated_at=? ",
                "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='delivery_started' AND lease_expires_at>? RETURNING ",
                record_columns!()
            ),
            Self::Resolve => concat!(
                "BEGIN IMMEDIATE;UPDATE m3_managed_input_rounds SET status='resolved',resolved_at=?,updated_at=? ",
                "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='delivered' AND lease_expires_at>? RETURNING ",
                record_columns!()
            ),
        }
    }
}

impl SqliteManagedInputStore {
    pub(crate) async fn transition_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        transition: Transition,
    ) -> Result<ManagedInputRecord> {
        require_round(round)?;
        require_lease(lease)?;
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_script().await?;
        let result = match inner.now() {
            Ok(now) => step(&mut write, round, lease, transition, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}

/// Opens the transaction with the guarded UPDATE (one round trip): when every precondition
/// holds (owner, token, live lease, expected status) it changes the row and returns it.
/// Otherwise nothing changed and a read inside the same transaction picks the outcome: an
/// idempotent repeat returns the round, anything else the typed error.
async fn step(
    conn: &mut SqliteConnection,
    round: &RoundRef,
    lease: &LeaseRef,
    transition: Transition,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let now_text = timestamp_text(now);
    let rows = bind_lease_guard(
        sqlx::query(transition.statement())
            .bind(&now_text)
            .bind(&now_text),
        round,
        lease,
        &now_text,
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| storage("cannot update a managed-input round", e))?;
    if let [row] = rows.as_slice() {
        return decode_record(row);
    }
    let current = fetch_existing(conn, round).await?;
    authorize(&current, lease, now, false)?;
    if current.status == transition.target() {
        return Ok(current);
    }
    if current.status != transition.expected() {
        return Err(Error::managed_input_state(format!(
            "managed-input transition requires {}, got {}",
            transition.expected().as_str(),
            current.status.as_str()
        ))
        .with_detail("status", current.status.as_str()));
    }
    Err(Error::managed_input_conflict(
        "managed-input transition raced with another owner",
    ))
}
