//! [`StagedWrite`]: the [`ExecutionSlot`] of a backend that reads an execution inside its
//! transaction, lets the steps change it, and then writes the record and the new events.

use serde_json::Value;
use time::OffsetDateTime;

use super::ExecutionSlot;
use crate::execution::record::{ExecutionEvent, ExecutionRecord};

/// An execution read inside a transaction, the changes the steps made to it, and the events
/// they appended (numbered from the record's `sequence`, the last stored one). After the
/// steps, a backend writes [`record`](Self::record) if [`is_changed`](Self::is_changed) and
/// inserts [`events`](Self::events), in the same transaction.
#[derive(Debug, Clone)]
pub struct StagedWrite {
    /// The record: as read, then as the steps left it.
    pub record: ExecutionRecord,
    events: Vec<ExecutionEvent>,
    changed: bool,
}

impl StagedWrite {
    /// The execution `record` as read (its `sequence` is its last stored event's).
    pub fn new(record: ExecutionRecord) -> Self {
        Self {
            record,
            events: Vec::new(),
            changed: false,
        }
    }

    /// Whether a step changed the record (it must be written).
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The events appended since the read, in sequence order (each must be inserted).
    pub fn events(&self) -> &[ExecutionEvent] {
        &self.events
    }

    /// The record, to be changed (and written).
    pub fn change(&mut self) -> &mut ExecutionRecord {
        self.changed = true;
        &mut self.record
    }

    /// The record as the steps left it.
    pub fn into_record(self) -> ExecutionRecord {
        self.record
    }
}

impl ExecutionSlot for StagedWrite {
    fn record(&self) -> &ExecutionRecord {
        &self.record
    }

    fn record_mut(&mut self) -> &mut ExecutionRecord {
        self.change()
    }

    fn append_event(&mut self, kind: &str, payload: Value, now: OffsetDateTime) -> ExecutionEvent {
        let event = ExecutionEvent {
            execution_id: self.record.execution_id.clone(),
            sequence: self.record.sequence + 1,
            kind: kind.to_owned(),
            payload,
            timestamp: now,
        };
        self.change().sequence = event.sequence;
        self.events.push(event.clone());
        event
    }
}
