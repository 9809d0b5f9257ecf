//! The conformance suite's hook that damages a stored round on purpose, to check that
//! reading it fails with a typed error instead of inventing a record.

use async_trait::async_trait;
use m3_store::RoundRef;
use m3_types::{Error, Result};

use super::error::db;
use super::rounds::PgManagedInputStore;

#[async_trait]
impl m3_store::conformance::CorruptRecord for PgManagedInputStore {
    async fn corrupt(
        &self,
        round: &RoundRef,
        corruption: m3_store::conformance::Corruption,
    ) -> Result<()> {
        use m3_store::conformance::Corruption;
        let statement = match corruption {
            Corruption::RedactedResponsesNotObject => {
                "UPDATE m3rs_rounds SET redacted_responses_json = '[]' \
                 WHERE execution_id = $1 AND round_id = $2 RETURNING 1"
            }
            Corruption::UnknownStatus => {
                "UPDATE m3rs_rounds SET status = 'corrupt', \
                 record_json = jsonb_set(record_json::jsonb, '{status}', '\"corrupt\"')::text \
                 WHERE execution_id = $1 AND round_id = $2 RETURNING 1"
            }
            _ => {
                "UPDATE m3rs_rounds SET record_json = '{\"damaged\": true}' \
                 WHERE execution_id = $1 AND round_id = $2 RETURNING 1"
            }
        };
        let changed: Option<i32> = sqlx::query_scalar(statement)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .fetch_optional(&self.shared().pool)
            .await
            .map_err(db("cannot corrupt the round"))?;
        changed
            .map(|_| ())
            .ok_or_else(|| Error::storage("the round to corrupt does not exist"))
    }
}
