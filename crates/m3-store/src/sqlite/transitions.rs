//! The delivery transitions: `start_delivery`, `mark_delivered`, `resolve`.

use m3_types::{ManagedInputRecord, Result};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::checks::{bind_lease_guard, fetch_existing};
use super::codec::{decode_record, stored_invalid, timestamp_text};
use super::columns::{image_guard, record_columns};
use super::error::storage;
use super::image::{Change, ImageCache};
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{Decision, Transition, check_transition, raced};
use crate::{LeaseRef, RoundRef};

/// The SQL of each shared [`Transition`].
impl Transition {
    /// The stored columns this transition's UPDATE sets, with their new values.
    fn changes<'a>(
        self,
        next: &ManagedInputRecord,
        now_text: &'a str,
    ) -> Vec<(&'static str, Change<'a>)> {
        let mut changes = vec![
            ("status", Change::Text(self.target().as_str())),
            ("updated_at", Change::Text(now_text)),
        ];
        match self {
            Self::StartDelivery => {
                changes.push(("delivery_started_at", Change::Text(now_text)));
                changes.push((
                    "delivery_attempts",
                    Change::Integer(i64::from(next.delivery_attempts)),
                ));
            }
            Self::MarkDelivered => changes.push(("delivered_at", Change::Text(now_text))),
            Self::Resolve => changes.push(("resolved_at", Change::Text(now_text))),
        }
        changes
    }

    /// `BEGIN IMMEDIATE` and the guarded UPDATE in one script; parameters: timestamp,
    /// updated_at, execution_id, round_id, owner_id, lease_token, now.
    fn statement(self) -> &'static str {
        match self {
            Self::StartDelivery => concat!(
                "BEGIN IMMEDIATE;",
                start_delivery!(),
                " RETURNING ",
                record_columns!()
            ),
            Self::MarkDelivered => concat!(
                "BEGIN IMMEDIATE;",
                mark_delivered!(),
                " RETURNING ",
                record_columns!()
            ),
            Self::Resolve => concat!(
                "BEGIN IMMEDIATE;",
                resolve!(),
                " RETURNING ",
                record_columns!()
            ),
        }
    }

    /// The one-trip form for a round with a validated image: as [`statement`](Self::statement)
    /// with the image guard (its 25 parameters after `now`) and the `COMMIT` in the same
    /// script. It returns one row if it changed the round, none otherwise; the new record is
    /// [`apply`](Self::apply)'d to the image's, so no row needs decoding.
    fn imaged_statement(self) -> &'static str {
        match self {
            Self::StartDelivery => concat!(
                "BEGIN IMMEDIATE;",
                start_delivery!(),
                image_guard!(),
                " RETURNING status;COMMIT"
            ),
            Self::MarkDelivered => concat!(
                "BEGIN IMMEDIATE;",
                mark_delivered!(),
                image_guard!(),
                " RETURNING status;COMMIT"
            ),
            Self::Resolve => concat!(
                "BEGIN IMMEDIATE;",
                resolve!(),
                image_guard!(),
                " RETURNING status;COMMIT"
            ),
        }
    }
}

/// The guarded UPDATE of each transition, up to (not including) `RETURNING`.
macro_rules! start_delivery {
    () => {
        "UPDATE m3_managed_input_rounds SET status='delivery_started',delivery_started_at=?,updated_at=?,delivery_attempts=delivery_attempts+1 WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='response_validated' AND lease_expires_at>?"
    };
}
macro_rules! mark_delivered {
    () => {
        "UPDATE m3_managed_input_rounds SET status='delivered',delivered_at=?,updated_at=? WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='delivery_started' AND lease_expires_at>?"
    };
}
macro_rules! resolve {
    () => {
        "UPDATE m3_managed_input_rounds SET status='resolved',resolved_at=?,updated_at=? WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='delivered' AND lease_expires_at>?"
    };
}
use {mark_delivered, resolve, start_delivery};

impl SqliteManagedInputStore {
    pub(crate) async fn transition_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        transition: Transition,
    ) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        if let Some(record) = self.imaged_transition(round, lease, transition).await? {
            return Ok(record);
        }
        let mut write = inner.begin_script().await?;
        let result = match inner.now() {
            Ok(now) => step(&mut write, &inner.images, round, lease, transition, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    /// The one-trip transition, when this store object holds a validated image of the round
    /// that shows the expected status under the caller's live lease. `Ok(None)`: no image, or
    /// the stored row is not the image any more (nothing changed); the caller takes the
    /// read-check-write path, which decides the outcome.
    async fn imaged_transition(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        transition: Transition,
    ) -> Result<Option<ManagedInputRecord>> {
        let inner = self.inner();
        let Some(validated) = inner.images.get(round) else {
            return Ok(None);
        };
        let now = inner.now()?;
        if !validated.allows(transition.expected(), lease, now) {
            return Ok(None);
        }
        let now_text = timestamp_text(now);
        let script = validated.image.bind(bind_lease_guard(
            sqlx::query(transition.imaged_statement())
                .bind(&now_text)
                .bind(&now_text),
            round,
            lease,
            &now_text,
        ));
        if inner
            .write_if_unchanged(round, script, "cannot update a managed-input round")
            .await?
            .is_none()
        {
            return Ok(None);
        }
        // The row was the image, which decoded, and the UPDATE set only this transition's
        // columns: the new record and image follow without reading the row back.
        let record = transition.apply(&validated.record, now);
        record
            .validate()
            .map_err(|e| stored_invalid(e.to_string()))?;
        let image = validated
            .image
            .changed(&transition.changes(&record, &now_text));
        inner.images.remember_image(image, &record);
        Ok(Some(record))
    }
}

/// Opens the transaction with the guarded UPDATE (one round trip): when every precondition
/// holds (owner, token, live lease, expected status) it changes the row and returns it.
/// Otherwise nothing changed and a read inside the same transaction picks the outcome: an
/// idempotent repeat returns the round, anything else the typed error.
async fn step(
    conn: &mut SqliteConnection,
    images: &ImageCache,
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
        let record = decode_record(row)?;
        // Remembered before the commit: should the commit fail, the image just stops matching.
        images.remember(row, &record);
        return Ok(record);
    }
    let current = fetch_existing(conn, round).await?;
    match check_transition(&current, lease, now, transition)? {
        Decision::AlreadyDone => Ok(current),
        _ => Err(raced("transition")),
    }
}
