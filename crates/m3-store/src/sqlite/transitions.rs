//! The delivery transitions: `start_delivery`, `mark_delivered`, `resolve`.

use m3_types::{ManagedInputRecord, Result};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::checks::{bind_lease_guard, fetch_existing};
use super::codec::{decode_record, stored_invalid, timestamp_text};
use super::columns::{image_guard, record_columns};
use super::connect::CommitFlush;
use super::error::storage;
use super::row_snapshot::{Change, ImageCache};
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
    ///
    /// `start_delivery` commits without waiting for the disk where the file is configured to
    /// wait ([`CommitFlush`]): the script lowers `synchronous` around its own commit.
    fn imaged_statement(self, flush: CommitFlush) -> &'static str {
        match (self, flush) {
            (Self::StartDelivery, CommitFlush::AsConfigured) => concat!(
                "BEGIN IMMEDIATE;",
                start_delivery!(),
                image_guard!(),
                " RETURNING status;COMMIT"
            ),
            (Self::StartDelivery, CommitFlush::SkipFull) => concat!(
                "PRAGMA synchronous=NORMAL;BEGIN IMMEDIATE;",
                start_delivery!(),
                image_guard!(),
                " RETURNING status;COMMIT;PRAGMA synchronous=FULL"
            ),
            (Self::StartDelivery, CommitFlush::SkipExtra) => concat!(
                "PRAGMA synchronous=NORMAL;BEGIN IMMEDIATE;",
                start_delivery!(),
                image_guard!(),
                " RETURNING status;COMMIT;PRAGMA synchronous=EXTRA"
            ),
            (Self::MarkDelivered, _) => concat!(
                "BEGIN IMMEDIATE;",
                mark_delivered!(),
                image_guard!(),
                " RETURNING status;COMMIT"
            ),
            (Self::Resolve, _) => concat!(
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
        let flush = match transition {
            Transition::StartDelivery => inner.delivery_flush,
            Transition::MarkDelivered | Transition::Resolve => CommitFlush::AsConfigured,
        };
        let script = validated.image.bind(bind_lease_guard(
            sqlx::query(transition.imaged_statement(flush))
                .bind(&now_text)
                .bind(&now_text),
            round,
            lease,
            &now_text,
        ));
        if inner
            .write_if_unchanged(round, script, flush, "cannot update a managed-input round")
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Connection;

    use super::*;
    use crate::conformance::{sample_round, sample_submission};
    use crate::sqlite::{SqliteStoreOptions, SqliteSynchronous};
    use crate::{CreateRound, ManagedInputStore};

    const FULL: i64 = 2;

    /// A store on a fresh file (configured `FULL`) with one round whose response is
    /// validated, and the round's reference and lease.
    async fn validated_round(
        dir: &tempfile::TempDir,
        busy_timeout: Duration,
    ) -> (SqliteManagedInputStore, RoundRef, LeaseRef) {
        let options = SqliteStoreOptions::new()
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(busy_timeout);
        let path = dir.path().join("rounds.sqlite");
        let store = SqliteManagedInputStore::open_with(&path, options)
            .await
            .expect("open");
        let created = store
            .create_round(CreateRound::new(
                sample_round("exec-1", "round-1"),
                "worker-a",
                Duration::from_secs(60),
            ))
            .await
            .expect("create");
        let round = RoundRef::new("exec-1", "round-1");
        let lease = LeaseRef::new("worker-a", created.lease.lease_token.clone());
        store
            .submit_responses(&round, &lease, sample_submission("key-1"))
            .await
            .expect("submit");
        // The one-trip path, the one that lowers `synchronous`, needs the round's image.
        assert!(store.inner().images.get(&round).is_some());
        (store, round, lease)
    }

    #[tokio::test]
    async fn start_delivery_puts_the_configured_flush_back_after_its_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_secs(5)).await;
        assert_eq!(store.inner().delivery_flush, CommitFlush::SkipFull);
        let started = store.start_delivery(&round, &lease).await.expect("start");
        assert_eq!(started.status.as_str(), "delivery_started");
        assert_eq!(
            store.inner().primary_synchronous().await.expect("read"),
            FULL
        );
        let delivered = store.mark_delivered(&round, &lease).await.expect("deliver");
        assert_eq!(delivered.status.as_str(), "delivered");
    }

    #[tokio::test]
    async fn a_start_delivery_that_fails_puts_the_configured_flush_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_millis(100)).await;
        // Another connection holds the write lock: the script fails at its BEGIN, after it
        // lowered `synchronous`.
        let mut blocker =
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", store.path().display()))
                .await
                .expect("connect");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut blocker)
            .await
            .expect("lock");
        let error = store
            .start_delivery(&round, &lease)
            .await
            .expect_err("the write lock is held");
        assert_eq!(error.code(), "storage_error");
        assert_eq!(
            store.inner().primary_synchronous().await.expect("read"),
            FULL
        );
        sqlx::query("ROLLBACK")
            .execute(&mut blocker)
            .await
            .expect("unlock");
        let started = store.start_delivery(&round, &lease).await.expect("start");
        assert_eq!(started.delivery_attempts, 1);
    }
}
