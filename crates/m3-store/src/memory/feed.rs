//! [`MemoryFeed`]: the memory backend's change feed, one ordered log shared by both stores.
//!
//! Stores append while they still hold their own lock (the feed's lock is always taken
//! last), so a change and its record are one atomic step, and the log's order is the order
//! of the changes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use m3_types::{ChangeRecord, Cursor, Result};

use crate::changes::rules::{check_after, check_limit};
use crate::changes::{ChangePage, FeedBounds, PruneChanges, Pruned};

/// The log of change records of one memory store (both halves).
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryFeed {
    log: Arc<Mutex<Log>>,
}

#[derive(Debug, Default)]
struct Log {
    records: VecDeque<ChangeRecord>,
    bounds: FeedBounds,
}

impl MemoryFeed {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Numbers and appends `records` (call it while holding the lock of the change).
    pub(crate) fn append(&self, records: impl IntoIterator<Item = ChangeRecord>) {
        let mut log = self.lock();
        for mut record in records {
            let cursor = Cursor::new(log.bounds.newest.get() + 1);
            record.cursor = cursor;
            log.bounds.newest = cursor;
            log.records.push_back(record);
        }
    }

    /// The newest cursor ever appended.
    pub(crate) fn newest(&self) -> Cursor {
        self.lock().bounds.newest
    }

    /// Up to `limit` records after `after`.
    pub(crate) fn read(&self, after: Cursor, limit: usize) -> Result<ChangePage> {
        check_limit(limit)?;
        let log = self.lock();
        check_after(after, log.bounds)?;
        let start = log.records.partition_point(|record| record.cursor <= after);
        let records = log
            .records
            .iter()
            .skip(start)
            .take(limit)
            .cloned()
            .collect();
        Ok(ChangePage::new(after, records))
    }

    /// Removes (or counts) the records older than `request.before`.
    pub(crate) fn prune(&self, request: PruneChanges) -> Pruned {
        let mut log = self.lock();
        let old = log
            .records
            .iter()
            .take_while(|record| record.at < request.before)
            .count();
        let through = old
            .checked_sub(1)
            .and_then(|last| log.records.get(last))
            .map(|record| record.cursor);
        if !request.dry_run {
            log.records.drain(..old);
            if let Some(through) = through {
                log.bounds.pruned_through = through;
            }
        }
        Pruned::new(old as u64, through)
    }
}
