//! The values of the change feed's operations: a page read, a prune request and its result,
//! and the bounds a backend reports for the shared cursor checks.

use m3_types::{ChangeRecord, Cursor};
use time::OffsetDateTime;

/// The most records one [`read_changes`](crate::ExecutionStore::read_changes) returns.
pub const MAX_CHANGE_PAGE: usize = 10_000;

/// What [`read_changes`](crate::ExecutionStore::read_changes) returns: records after the
/// cursor asked for, in cursor order, and the cursor to resume from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChangePage {
    /// The records, oldest first.
    pub records: Vec<ChangeRecord>,
    /// The cursor of the last record returned, or the cursor asked for if none was.
    pub next: Cursor,
}

impl ChangePage {
    /// A page of `records` read after `after` (`next` is the last record's cursor).
    pub fn new(after: Cursor, records: Vec<ChangeRecord>) -> Self {
        let next = records.last().map_or(after, |record| record.cursor);
        Self { records, next }
    }
}

/// What [`prune_changes`](crate::ExecutionStore::prune_changes) removes: every record
/// older than `before` (and nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneChanges {
    /// Records whose `at` is strictly before this time go.
    pub before: OffsetDateTime,
    /// Count what would go, remove nothing.
    pub dry_run: bool,
}

impl PruneChanges {
    /// Removes the records older than `before`.
    pub fn before(before: OffsetDateTime) -> Self {
        Self {
            before,
            dry_run: false,
        }
    }

    /// Counts instead of removing.
    #[must_use]
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

/// What a prune removed (or, dry, would remove).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pruned {
    /// How many records.
    pub records: u64,
    /// The newest cursor among them (`None`: nothing); a reader behind it gets
    /// `cursor_expired`.
    pub through: Option<Cursor>,
}

impl Pruned {
    /// `records` removed, the newest at `through`.
    pub fn new(records: u64, through: Option<Cursor>) -> Self {
        Self { records, through }
    }
}

/// What a backend knows about its feed's ends, for [`rules::check_after`](super::rules::check_after).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FeedBounds {
    /// The newest cursor retention removed ([`Cursor::START`]: none).
    pub pruned_through: Cursor,
    /// The newest cursor the store ever committed ([`Cursor::START`]: none).
    pub newest: Cursor,
}

impl FeedBounds {
    /// Bounds with these ends.
    pub fn new(pruned_through: Cursor, newest: Cursor) -> Self {
        Self {
            pruned_through,
            newest,
        }
    }
}
