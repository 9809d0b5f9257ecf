//! Validated row images: the one-round-trip fast path for writes to a round this store
//! object has already read.
//!
//! Every statement through sqlx is a hand-off to the connection's worker thread, and a write
//! that must decode the row *before* it commits (so a corrupt row is never changed behind an
//! error) needs two: `BEGIN IMMEDIATE; UPDATE ... RETURNING` and then `COMMIT`. An image lets
//! the write, the decode check and the commit share one script instead: it holds the exact
//! stored value of every column of a row that decoded into a valid record. The fast UPDATE
//! repeats the whole image in its `WHERE` (`column IS ?` for each), so it only changes a row
//! that is byte-for-byte one already known to decode; anything else (another writer, a
//! corrupted column, a stale image) matches no row, commits an empty transaction, and the
//! caller falls back to the read-check-write path, which decides the outcome exactly as
//! before. Correctness never depends on the image being current, only speed does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use m3_types::{ManagedInputRecord, ManagedInputStatus};
use sqlx::Row;
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteRow};

use time::OffsetDateTime;

use crate::{LeaseRef, RoundRef};

/// The `WHERE` tail that pins every stored column of the round to its image (the key columns
/// `execution_id` and `round_id` are bound by the lease guard before it). Binds with
/// [`RowImage::bind`], in this order.
macro_rules! image_guard {
    () => {
        " AND round_index IS ? AND round_limit IS ? AND pending_json IS ? AND status IS ? AND responses_json IS ? AND response_idempotency_key IS ? AND owner_id IS ? AND lease_token IS ? AND lease_expires_at IS ? AND harness_session_id IS ? AND native_resume_token IS ? AND delivery_idempotency_key IS ? AND session_id IS ? AND turn_id IS ? AND operation_parameters_json IS ? AND delivery_attempts IS ? AND created_at IS ? AND updated_at IS ? AND response_validated_at IS ? AND delivery_started_at IS ? AND delivered_at IS ? AND resolved_at IS ? AND failed_at IS ? AND failure_code IS ? AND failure_message IS ?"
    };
}
pub(crate) use image_guard;

/// The guarded columns, in [`image_guard!`] order, with their stored kind.
const COLUMNS: [(&str, Kind); 25] = [
    ("round_index", Kind::Integer),
    ("round_limit", Kind::Integer),
    ("pending_json", Kind::Text),
    ("status", Kind::Text),
    ("responses_json", Kind::Text),
    ("response_idempotency_key", Kind::Text),
    ("owner_id", Kind::Text),
    ("lease_token", Kind::Text),
    ("lease_expires_at", Kind::Text),
    ("harness_session_id", Kind::Text),
    ("native_resume_token", Kind::Text),
    ("delivery_idempotency_key", Kind::Text),
    ("session_id", Kind::Text),
    ("turn_id", Kind::Text),
    ("operation_parameters_json", Kind::Text),
    ("delivery_attempts", Kind::Integer),
    ("created_at", Kind::Text),
    ("updated_at", Kind::Text),
    ("response_validated_at", Kind::Text),
    ("delivery_started_at", Kind::Text),
    ("delivered_at", Kind::Text),
    ("resolved_at", Kind::Text),
    ("failed_at", Kind::Text),
    ("failure_code", Kind::Text),
    ("failure_message", Kind::Text),
];

#[derive(Debug, Clone, Copy)]
enum Kind {
    Integer,
    Text,
}

/// A new stored value for [`RowImage::changed`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    Integer(i64),
    Text(&'a str),
}

#[derive(Debug, Clone)]
enum Stored {
    Integer(i64),
    Text(Option<String>),
}

/// The stored values of one row, in [`image_guard!`] order.
#[derive(Debug)]
pub(crate) struct RowImage {
    values: Vec<Stored>,
}

impl RowImage {
    /// Reads the guarded columns of a row selected with `record_columns!()`; `None` if a
    /// value has another storage class than its column's (such a row does not decode
    /// anyway).
    fn capture(row: &SqliteRow) -> Option<Self> {
        let values = COLUMNS
            .iter()
            .map(|(column, kind)| match kind {
                Kind::Integer => row.try_get::<i64, _>(*column).ok().map(Stored::Integer),
                Kind::Text => row
                    .try_get::<Option<String>, _>(*column)
                    .ok()
                    .map(Stored::Text),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self { values })
    }

    /// The image after an UPDATE that matched it set `changes` (column, new integer or text).
    pub(crate) fn changed(&self, changes: &[(&str, Change<'_>)]) -> Self {
        let values = COLUMNS
            .iter()
            .zip(&self.values)
            .map(|((column, _), value)| {
                match changes.iter().find(|(changed, _)| changed == column) {
                    Some((_, Change::Integer(number))) => Stored::Integer(*number),
                    Some((_, Change::Text(text))) => Stored::Text(Some((*text).to_owned())),
                    None => value.clone(),
                }
            })
            .collect();
        Self { values }
    }

    /// Binds the image's values for an [`image_guard!`] tail.
    pub(crate) fn bind<'q>(
        &'q self,
        mut query: Query<'q, Sqlite, SqliteArguments>,
    ) -> Query<'q, Sqlite, SqliteArguments> {
        for value in &self.values {
            query = match value {
                Stored::Integer(number) => query.bind(*number),
                Stored::Text(text) => query.bind(text.as_deref()),
            };
        }
        query
    }
}

/// A row image together with the record it decoded into.
#[derive(Debug)]
pub(crate) struct Validated {
    pub(crate) image: RowImage,
    pub(crate) record: ManagedInputRecord,
}

impl Validated {
    /// Whether the image shows `status` under `lease`, unexpired at `now`: only then can the
    /// fast write match.
    pub(crate) fn allows(
        &self,
        status: ManagedInputStatus,
        lease: &LeaseRef,
        now: OffsetDateTime,
    ) -> bool {
        self.record.status == status
            && self.record.lease.owner_id == lease.owner_id
            && self.record.lease.lease_token == lease.lease_token
            && self.record.lease.expires_at > now
    }
}

/// How many rounds one store object keeps images for; past it the cache starts over (a miss
/// costs one extra round trip, never a wrong answer).
const CAPACITY: usize = 1024;

/// The images of the rounds this store object read or wrote last, by round.
#[derive(Debug, Default)]
pub(crate) struct ImageCache {
    images: Mutex<HashMap<(String, String), Arc<Validated>>>,
}

impl ImageCache {
    /// Remembers `row` (which decoded into `record`) as the round's image; a terminal round
    /// is forgotten instead, since no write can follow.
    pub(crate) fn remember(&self, row: &SqliteRow, record: &ManagedInputRecord) {
        if is_terminal(record) {
            self.forget(&RoundRef::of_pending(&record.pending));
            return;
        }
        match RowImage::capture(row) {
            Some(image) => self.keep(image, record.clone()),
            None => self.forget(&RoundRef::of_pending(&record.pending)),
        }
    }

    /// Remembers an image derived from a known one (see [`RowImage::changed`]).
    pub(crate) fn remember_image(&self, image: RowImage, record: &ManagedInputRecord) {
        if is_terminal(record) {
            self.forget(&RoundRef::of_pending(&record.pending));
        } else {
            self.keep(image, record.clone());
        }
    }

    fn keep(&self, image: RowImage, record: ManagedInputRecord) {
        let key = (
            record.pending.execution_id.clone(),
            record.pending.round_id.clone(),
        );
        let validated = Arc::new(Validated { image, record });
        let mut images = self.lock();
        if images.len() >= CAPACITY && !images.contains_key(&key) {
            images.clear();
        }
        images.insert(key, validated);
    }

    /// The round's image, if this store object holds one.
    pub(crate) fn get(&self, round: &RoundRef) -> Option<Arc<Validated>> {
        self.lock()
            .get(&(round.execution_id.clone(), round.round_id.clone()))
            .cloned()
    }

    /// Drops the round's image (it no longer matches the stored row).
    pub(crate) fn forget(&self, round: &RoundRef) {
        self.lock()
            .remove(&(round.execution_id.clone(), round.round_id.clone()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Validated>>> {
        // The map holds no invariant a panicking holder could break half-way.
        self.images.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn is_terminal(record: &ManagedInputRecord) -> bool {
    matches!(
        record.status,
        ManagedInputStatus::Resolved | ManagedInputStatus::Failed
    )
}
