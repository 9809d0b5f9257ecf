//! Recovery of an execution's rounds: `fail_unresolved_rounds`, which the execution store's
//! recovery also runs inside its own transaction.

use m3_types::Result;
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::codec::timestamp_text;
use super::error::storage;
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::require_text;

const FAIL_UNRESOLVED: &str = "UPDATE m3_managed_input_rounds SET status='failed',failed_at=?,failure_code='recovery_unavailable',failure_message=?,updated_at=? WHERE execution_id=? AND status IN ('pending','response_validated','delivery_started','delivered')";

/// Fails every unresolved round of `execution_id` inside the caller's write transaction (the
/// execution store's recovery shares it); returns how many.
pub(crate) async fn fail_unresolved_in_tx(
    conn: &mut SqliteConnection,
    execution_id: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    let now_text = timestamp_text(now);
    let done = sqlx::query(FAIL_UNRESOLVED)
        .bind(&now_text)
        .bind(message)
        .bind(&now_text)
        .bind(execution_id)
        .execute(&mut *conn)
        .await
        .map_err(|e| storage("cannot fail the unresolved managed-input rounds", e))?;
    Ok(done.rows_affected())
}

impl SqliteManagedInputStore {
    pub(crate) async fn fail_unresolved_rounds_impl(
        &self,
        execution_id: &str,
        message: &str,
    ) -> Result<u64> {
        require_text(execution_id, "execution_id")?;
        require_text(message, "message")?;
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => fail_unresolved_in_tx(&mut write, execution_id, message, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}
