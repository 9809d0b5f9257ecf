//! The conformance suite's [`CorruptRecord`] capability for the memory backend: a damaged
//! slot stands for a row that no longer decodes.

use async_trait::async_trait;
use m3_types::{Error, Result};

use super::MemoryManagedInputStore;
use crate::RoundRef;
use crate::conformance::{CorruptRecord, Corruption};

#[async_trait]
impl CorruptRecord for MemoryManagedInputStore {
    async fn corrupt(&self, round: &RoundRef, corruption: Corruption) -> Result<()> {
        let mut rounds = self.lock();
        let slot = rounds
            .get_mut(&(round.execution_id.clone(), round.round_id.clone()))
            .ok_or_else(|| Error::storage("the round to corrupt does not exist"))?;
        let why = format!("damaged by the harness: {corruption:?}");
        match corruption {
            Corruption::RedactedResponsesNotObject => slot.redacted = Err(why),
            _ => slot.record = Err(why),
        }
        Ok(())
    }
}
