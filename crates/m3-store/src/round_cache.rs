//! A bounded cache of the rounds a store object read or wrote last ([`RecentRounds`]): part
//! of the backend toolkit. The SQL backends (SQLite here, PostgreSQL in
//! `m3-store-postgres`) keep the stored form of such a round so its next write can skip
//! reading it again; a custom backend can do the same. The write still
//! compares that stored form with the row (a stale entry changes nothing and the write falls
//! back to reading the row), so correctness never depends on an entry being current, only
//! speed does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use m3_types::{ManagedInputRecord, ManagedInputStatus};

use crate::RoundRef;

/// How many rounds one store object keeps; past it one entry makes room for the next (a miss
/// costs one extra round trip, never a wrong answer). An entry is worth keeping between a
/// read and the write that follows it, not for the life of a waiting round.
pub const CAPACITY: usize = 256;

/// What a store object keeps of its recent rounds, by round (execution id and round id),
/// bounded by [`CAPACITY`]; `V` is what the backend keeps of one round (its stored row, a
/// version, ...). Thread-safe; values are shared as `Arc<V>`.
///
/// ```
/// use m3_store::round_cache::RecentRounds;
/// # fn demo(record: &m3_types::ManagedInputRecord) {
/// let cache = RecentRounds::default();
/// cache.keep(record, record.clone());
/// let round = m3_store::RoundRef::of(record);
/// // A terminal round is never kept: no write can follow.
/// if let Some(kept) = cache.get(&round) {
///     assert_eq!(kept.pending.round_id, record.pending.round_id);
/// }
/// cache.forget(&round);
/// assert!(cache.get(&round).is_none());
/// # }
/// ```
#[derive(Debug)]
pub struct RecentRounds<V> {
    entries: Mutex<HashMap<(String, String), Arc<V>>>,
}

impl<V> Default for RecentRounds<V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<V> RecentRounds<V> {
    /// Keeps `value` for `record`'s round; a terminal round is forgotten instead, since no
    /// write can follow.
    pub fn keep(&self, record: &ManagedInputRecord, value: V) {
        let key = (
            record.pending.execution_id.clone(),
            record.pending.round_id.clone(),
        );
        let mut entries = self.lock();
        if is_terminal(record) {
            entries.remove(&key);
            return;
        }
        if entries.len() >= CAPACITY
            && !entries.contains_key(&key)
            && let Some(evicted) = entries.keys().next().cloned()
        {
            entries.remove(&evicted);
        }
        entries.insert(key, Arc::new(value));
    }

    /// What is kept of the round, if anything.
    pub fn get(&self, round: &RoundRef) -> Option<Arc<V>> {
        self.lock()
            .get(&(round.execution_id.clone(), round.round_id.clone()))
            .cloned()
    }

    /// Drops the round's entry (it no longer matches the stored row).
    pub fn forget(&self, round: &RoundRef) {
        self.lock()
            .remove(&(round.execution_id.clone(), round.round_id.clone()));
    }

    /// How many rounds are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no round is kept.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Arc<V>>> {
        // The map holds no invariant a panicking holder could break half-way.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn is_terminal(record: &ManagedInputRecord) -> bool {
    matches!(
        record.status,
        ManagedInputStatus::Resolved | ManagedInputStatus::Failed
    )
}
