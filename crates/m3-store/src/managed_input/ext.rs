//! [`ManagedInputStoreExt`]: conveniences built only from the contract's operations.

use async_trait::async_trait;
use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};

use super::request::RoundRef;
use super::store::ManagedInputStore;

/// Conveniences for every [`ManagedInputStore`] (blanket implementation, including
/// `dyn ManagedInputStore`). They add no guarantees of their own.
#[async_trait]
pub trait ManagedInputStoreExt: ManagedInputStore {
    /// Reads a round that must exist.
    ///
    /// # Errors
    /// `not_found` when it is missing;
    /// otherwise as [`ManagedInputStore::get_round`].
    async fn require_round(&self, round: &RoundRef) -> Result<ManagedInputRecord> {
        match self.get_round(round).await? {
            Some(record) => Ok(record),
            None => Err(super::rules::missing_round(round)),
        }
    }

    /// Every `pending` round of an execution, ordered by `round_index`.
    ///
    /// # Errors
    /// As [`ManagedInputStore::list_rounds`].
    async fn pending_rounds(&self, execution_id: &str) -> Result<Vec<ManagedInputRecord>> {
        let mut rounds = self.list_rounds(execution_id).await?;
        rounds.retain(|record| record.status == ManagedInputStatus::Pending);
        Ok(rounds)
    }

    /// The single `pending` round of an execution, or `None`.
    ///
    /// # Errors
    /// `managed_input_state` ("multiple pending managed-input rounds") when storage holds
    /// more than one; otherwise as [`ManagedInputStore::list_rounds`].
    async fn single_pending_round(&self, execution_id: &str) -> Result<Option<ManagedInputRecord>> {
        let mut rounds = self.pending_rounds(execution_id).await?;
        if rounds.len() > 1 {
            return Err(
                Error::managed_input_state("multiple pending managed-input rounds")
                    .with_reason(m3_types::Reason::MultiplePending)
                    .with_detail("execution_id", execution_id)
                    .with_detail("pending_rounds", rounds.len()),
            );
        }
        Ok(rounds.pop())
    }
}

impl<T: ManagedInputStore + ?Sized> ManagedInputStoreExt for T {}
