//! What a store object keeps of a round it read or wrote ([`KnownRound`], in its
//! [`RecentRounds`](m3_store::round_cache::RecentRounds)), so its next write can
//! compare-and-set without reading the row first.

use m3_types::ManagedInputRecord;

/// A round's record as stored (the exact text a compare-and-set compares) and decoded.
#[derive(Debug, Clone)]
pub(crate) struct KnownRound {
    pub(crate) stored: String,
    pub(crate) record: ManagedInputRecord,
}

impl KnownRound {
    pub(crate) fn new(stored: String, record: &ManagedInputRecord) -> Self {
        Self {
            stored,
            record: record.clone(),
        }
    }

    #[cfg(test)]
    pub(crate) fn record(&self) -> &ManagedInputRecord {
        &self.record
    }
}
