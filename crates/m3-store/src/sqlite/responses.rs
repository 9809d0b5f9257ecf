//! `submit_responses`: validation first, then one atomic `pending → response_validated`
//! write (responses, idempotency key, redacted projection), or an idempotent replay.

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result, redact, validate_responses};
use sqlx::SqliteConnection;
use time::OffsetDateTime;

use super::checks::{authorize, fetch_existing, require_lease, require_round, require_text};
use super::codec::{decode_record, json_text, record_columns, timestamp_text, to_json_value};
use super::error::storage;
use super::store::SqliteManagedInputStore;
use crate::{LeaseRef, ResponseSubmission, RoundRef};

const ACCEPT_RESPONSES: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status='response_validated',responses_json=?,response_idempotency_key=?,response_validated_at=?,updated_at=?,failure_code=NULL,failure_message=NULL ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='pending' AND lease_expires_at>? RETURNING ",
    record_columns!()
);

const UPSERT_DIAGNOSTICS: &str = "INSERT INTO m3_managed_input_diagnostics(execution_id,round_id,responses_redacted_json) VALUES(?,?,?) ON CONFLICT(execution_id,round_id) DO UPDATE SET responses_redacted_json=excluded.responses_redacted_json";

impl SqliteManagedInputStore {
    pub(crate) async fn submit_responses_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        submission: ResponseSubmission,
    ) -> Result<ManagedInputRecord> {
        require_round(round)?;
        require_text(&submission.idempotency_key, "response_idempotency_key")?;
        require_lease(lease)?;
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_write().await?;
        let result = match inner.now() {
            Ok(now) => submit(&mut write.tx, round, lease, &submission, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}

async fn submit(
    conn: &mut SqliteConnection,
    round: &RoundRef,
    lease: &LeaseRef,
    submission: &ResponseSubmission,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = fetch_existing(conn, round).await?;
    if current.status == ManagedInputStatus::Failed {
        return Err(Error::managed_input_state(
            "failed managed-input round cannot accept responses",
        ));
    }
    authorize(
        &current,
        lease,
        now,
        current.status != ManagedInputStatus::Pending,
    )?;
    validate_responses(&current.pending, &submission.responses)?;
    let payload = to_json_value(&submission.responses)?;
    let payload_json = json_text(&payload)?;

    if current.status != ManagedInputStatus::Pending {
        let stored = match &current.responses {
            Some(responses) => json_text(&to_json_value(responses)?)?,
            None => String::new(),
        };
        if current.response_idempotency_key.as_deref() == Some(submission.idempotency_key.as_str())
            && stored == payload_json
        {
            return Ok(current);
        }
        return Err(Error::managed_input_conflict(
            "response idempotency key conflicts with an accepted response",
        )
        .with_detail("status", current.status.as_str()));
    }

    let redacted_json = json_text(&redact(&payload))?;
    let now_text = timestamp_text(now);
    let rows = sqlx::query(ACCEPT_RESPONSES)
        .bind(&payload_json)
        .bind(&submission.idempotency_key)
        .bind(&now_text)
        .bind(&now_text)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(&current.lease.owner_id)
        .bind(&current.lease.lease_token)
        .bind(&now_text)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| storage("cannot store the managed-input responses", e))?;
    let [row] = rows.as_slice() else {
        return Err(Error::managed_input_conflict(
            "managed-input response submission raced with another owner",
        ));
    };
    let record = decode_record(row)?;
    sqlx::query(UPSERT_DIAGNOSTICS)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(&redacted_json)
        .execute(&mut *conn)
        .await
        .map_err(|e| storage("cannot store the redacted responses", e))?;
    Ok(record)
}
