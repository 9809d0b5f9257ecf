//! `submit_responses`: validation first, then one atomic `pending → response_validated`
//! write (responses, idempotency key, redacted projection), or an idempotent replay.

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result, redact, validate_responses};
use time::OffsetDateTime;

use super::checks::{
    authorize, begin_and_fetch_existing, bind_lease_guard, require_lease, require_round,
    require_text,
};
use super::codec::{decode_record, json_text, record_columns, timestamp_text, to_json_value};
use super::connect::ScriptTx;
use super::error::storage;
use super::store::SqliteManagedInputStore;
use crate::{LeaseRef, ResponseSubmission, RoundRef};

/// The guarded accept plus the redacted projection upsert, one script.
const ACCEPT_RESPONSES: &str = concat!(
    "UPDATE m3_managed_input_rounds SET status='response_validated',responses_json=?,response_idempotency_key=?,response_validated_at=?,updated_at=?,failure_code=NULL,failure_message=NULL ",
    "WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='pending' AND lease_expires_at>? RETURNING ",
    record_columns!(),
    // The redacted projection, only if the UPDATE changed the row (it cannot miss: its
    // conditions were checked inside this transaction), and the commit, in the same round trip.
    ";INSERT INTO m3_managed_input_diagnostics(execution_id,round_id,responses_redacted_json) SELECT ?,?,? WHERE changes()=1 ON CONFLICT(execution_id,round_id) DO UPDATE SET responses_redacted_json=excluded.responses_redacted_json",
    ";COMMIT"
);

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
        let mut write = inner.begin_script().await?;
        let result = match inner.now() {
            Ok(now) => submit(&mut write, round, lease, &submission, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}

async fn submit(
    write: &mut ScriptTx,
    round: &RoundRef,
    lease: &LeaseRef,
    submission: &ResponseSubmission,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = begin_and_fetch_existing(write, round).await?;
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
    let rows = bind_lease_guard(
        sqlx::query(ACCEPT_RESPONSES)
            .bind(&payload_json)
            .bind(&submission.idempotency_key)
            .bind(&now_text)
            .bind(&now_text),
        round,
        lease,
        &now_text,
    )
    .bind(&round.execution_id)
    .bind(&round.round_id)
    .bind(&redacted_json)
    .fetch_all(&mut **write)
    .await
    .map_err(|e| storage("cannot store the managed-input responses", e))?;
    write.mark_committed();
    let [row] = rows.as_slice() else {
        return Err(Error::managed_input_conflict(
            "managed-input response submission raced with another owner",
        ));
    };
    decode_record(row)
}
