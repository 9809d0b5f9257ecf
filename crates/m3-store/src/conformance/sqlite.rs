//! The [`CorruptRecord`] capability of the SQLite backend.

use async_trait::async_trait;
use m3_types::{Error, Result};

use super::{CorruptRecord, Corruption};
use crate::{RoundRef, SqliteManagedInputStore};

#[async_trait]
impl CorruptRecord for SqliteManagedInputStore {
    /// Rewrites one column of the round's row with raw SQL (CHECK constraints are suspended
    /// on that connection for the unknown status).
    async fn corrupt(&self, round: &RoundRef, corruption: Corruption) -> Result<()> {
        self.ensure_schema().await?;
        let statement = match corruption {
            Corruption::PendingNotObject => {
                "UPDATE m3_managed_input_rounds SET pending_json='[]' WHERE execution_id=? AND round_id=?"
            }
            Corruption::ResponsesNotObject => {
                "UPDATE m3_managed_input_rounds SET responses_json='[]' WHERE execution_id=? AND round_id=?"
            }
            Corruption::OperationParametersNotObject => {
                "UPDATE m3_managed_input_rounds SET operation_parameters_json='[]' WHERE execution_id=? AND round_id=?"
            }
            Corruption::UnknownStatus => {
                "UPDATE m3_managed_input_rounds SET status='corrupt' WHERE execution_id=? AND round_id=?"
            }
            Corruption::UnparsableTimestamp => {
                "UPDATE m3_managed_input_rounds SET created_at='not a timestamp' WHERE execution_id=? AND round_id=?"
            }
            Corruption::RedactedResponsesNotObject => {
                "UPDATE m3_managed_input_diagnostics SET responses_redacted_json='[]' WHERE execution_id=? AND round_id=?"
            }
        };
        let mut conn = self
            .pool()
            .acquire()
            .await
            .map_err(|e| Error::storage("cannot acquire a connection").with_source(e))?;
        sqlx::query("PRAGMA ignore_check_constraints=ON")
            .execute(&mut *conn)
            .await
            .map_err(|e| Error::storage("cannot suspend CHECK constraints").with_source(e))?;
        let updated = sqlx::query(statement)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .execute(&mut *conn)
            .await;
        sqlx::query("PRAGMA ignore_check_constraints=OFF")
            .execute(&mut *conn)
            .await
            .map_err(|e| Error::storage("cannot restore CHECK constraints").with_source(e))?;
        let updated =
            updated.map_err(|e| Error::storage("cannot corrupt the row").with_source(e))?;
        if updated.rows_affected() != 1 {
            return Err(Error::storage("the row to corrupt does not exist"));
        }
        Ok(())
    }
}
