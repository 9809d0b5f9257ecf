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

use std::sync::Arc;

use m3_types::ManagedInputRecord;
use sqlx::Row;
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteRow};

use super::columns::{GUARDED, Kind};
use crate::RoundRef;
use crate::round_cache::RecentRounds;

/// One stored column value: what an image holds and what a write binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stored {
    /// An `INTEGER`.
    Integer(i64),
    /// A `TEXT` or NULL.
    Text(Option<String>),
}

impl Stored {
    /// `query` with this value bound next.
    pub(crate) fn bind<'q>(
        &'q self,
        query: Query<'q, Sqlite, SqliteArguments>,
    ) -> Query<'q, Sqlite, SqliteArguments> {
        match self {
            Self::Integer(number) => query.bind(*number),
            Self::Text(text) => query.bind(text.as_deref()),
        }
    }
}

/// The stored values of one row, in `image_guard!` order.
#[derive(Debug)]
pub(crate) struct RowImage {
    values: Vec<Stored>,
}

impl RowImage {
    /// Reads the guarded columns of a row selected with `record_columns!()`; `None` if a
    /// value has another storage class than its column's (such a row does not decode
    /// anyway).
    fn capture(row: &SqliteRow) -> Option<Self> {
        let values = GUARDED
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

    /// The image after an UPDATE that matched it set `changes` (column, new value).
    pub(crate) fn changed(&self, changes: &[(&str, Stored)]) -> Self {
        let values = GUARDED
            .iter()
            .zip(&self.values)
            .map(|((column, _), value)| {
                changes
                    .iter()
                    .find(|(changed, _)| changed == column)
                    .map_or_else(|| value.clone(), |(_, new)| new.clone())
            })
            .collect();
        Self { values }
    }

    /// Binds the image's values for an `image_guard!` tail.
    pub(crate) fn bind<'q>(
        &'q self,
        query: Query<'q, Sqlite, SqliteArguments>,
    ) -> Query<'q, Sqlite, SqliteArguments> {
        self.values
            .iter()
            .fold(query, |query, value| value.bind(query))
    }
}

/// A row image together with the record it decoded into.
#[derive(Debug)]
pub(crate) struct Validated {
    pub(crate) image: RowImage,
    pub(crate) record: ManagedInputRecord,
}

/// The images of the rounds this store object read or wrote last, by round.
#[derive(Debug, Default)]
pub(crate) struct ImageCache {
    images: RecentRounds<Validated>,
}

impl ImageCache {
    /// Remembers `row` (which decoded into `record`) as the round's image; a terminal round
    /// is forgotten instead, since no write can follow.
    pub(crate) fn remember(&self, row: &SqliteRow, record: &ManagedInputRecord) {
        match RowImage::capture(row) {
            Some(image) => self.remember_image(image, record),
            None => self.forget(&RoundRef::of_pending(&record.pending)),
        }
    }

    /// Remembers an image derived from a known one (see [`RowImage::changed`]).
    pub(crate) fn remember_image(&self, image: RowImage, record: &ManagedInputRecord) {
        let validated = Validated {
            image,
            record: record.clone(),
        };
        self.images.keep(record, validated);
    }

    /// The round's image, if this store object holds one.
    pub(crate) fn get(&self, round: &RoundRef) -> Option<Arc<Validated>> {
        self.images.get(round)
    }

    /// Drops the round's image (it no longer matches the stored row).
    pub(crate) fn forget(&self, round: &RoundRef) {
        self.images.forget(round);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::LeaseRef;
    use crate::conformance::sample_round;
    use crate::sqlite::SqliteManagedInputStore;
    use crate::{CreateRound, ManagedInputStore};

    async fn store(dir: &tempfile::TempDir) -> SqliteManagedInputStore {
        SqliteManagedInputStore::open(dir.path().join("images.sqlite"))
            .await
            .expect("open")
    }

    async fn create(store: &SqliteManagedInputStore, execution_id: &str) -> ManagedInputRecord {
        store
            .create_round(CreateRound::new(
                sample_round(execution_id, "round-1"),
                "worker-a",
                Duration::from_secs(60),
            ))
            .await
            .expect("create")
    }

    #[tokio::test]
    async fn a_renewed_round_keeps_no_image_until_it_is_read_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(&dir).await;
        let created = create(&store, "exec-1").await;
        let round = RoundRef::of(&created);
        assert!(store.inner().images.get(&round).is_some());

        store
            .renew(
                &round,
                &LeaseRef::of(&created.lease),
                Duration::from_secs(60),
            )
            .await
            .expect("renew");
        assert!(store.inner().images.get(&round).is_none());

        store.get_round(&round).await.expect("read").expect("round");
        assert!(store.inner().images.get(&round).is_some());
    }

    #[tokio::test]
    async fn the_cache_holds_at_most_its_capacity_and_keeps_the_newest_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(&dir).await;
        let mut last = None;
        for index in 0..=crate::round_cache::CAPACITY {
            last = Some(create(&store, &format!("exec-{index}")).await);
        }
        let images = &store.inner().images;
        assert_eq!(images.images.len(), crate::round_cache::CAPACITY);
        let newest = RoundRef::of(&last.expect("created"));
        assert!(images.get(&newest).is_some());
    }
}
