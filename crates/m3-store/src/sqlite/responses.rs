//! `submit_responses`: validation first, then one atomic `pending → response_validated`
//! write (responses, idempotency key, redacted projection), or an idempotent replay.

use m3_types::{ManagedInputRecord, ManagedInputStatus, Result};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use time::OffsetDateTime;

use super::checks::{begin_and_fetch_existing, bind_lease_guard};
use super::codec::{decode_record, timestamp_text};
use super::columns::{image_guard, record_columns};
use super::connect::{CommitFlush, ScriptTx};
use super::error::storage;
use super::row_snapshot::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{
    EncodedSubmission, Submission, check_submission, encode_submission, raced,
};
use crate::{LeaseRef, ResponseSubmission, RoundRef};

/// The guarded accept, up to (not including) `RETURNING`; parameters: responses_json, key,
/// response_validated_at, updated_at, execution_id, round_id, owner_id, lease_token, now.
macro_rules! accept {
    () => {
        "UPDATE m3_managed_input_rounds SET status='response_validated',responses_json=?,response_idempotency_key=?,response_validated_at=?,updated_at=?,failure_code=NULL,failure_message=NULL WHERE execution_id=? AND round_id=? AND owner_id=? AND lease_token=? AND status='pending' AND lease_expires_at>?"
    };
}

/// The redacted projection, only if the UPDATE changed the row, and the commit; parameters:
/// execution_id, round_id, responses_redacted_json.
macro_rules! project_and_commit {
    () => {
        ";INSERT INTO m3_managed_input_diagnostics(execution_id,round_id,responses_redacted_json) SELECT ?,?,? WHERE changes()=1 ON CONFLICT(execution_id,round_id) DO UPDATE SET responses_redacted_json=excluded.responses_redacted_json;COMMIT"
    };
}

/// The guarded accept plus the redacted projection upsert and the commit, one script, inside
/// the transaction the read opened (the UPDATE cannot miss: its conditions were checked in
/// this transaction).
const ACCEPT_RESPONSES: &str = concat!(
    accept!(),
    " RETURNING ",
    record_columns!(),
    project_and_commit!()
);

/// The one-trip form for a round with a validated image: the transaction, the accept pinned
/// to the image (25 more parameters after `now`), the projection and the commit.
const BEGIN_ACCEPT_IMAGED: &str = concat!(
    "BEGIN IMMEDIATE;",
    accept!(),
    image_guard!(),
    " RETURNING ",
    record_columns!(),
    project_and_commit!()
);

impl SqliteManagedInputStore {
    pub(crate) async fn submit_responses_impl(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        submission: &ResponseSubmission,
    ) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        if let Some(record) = self.imaged_submit(round, lease, submission).await? {
            return Ok(record);
        }
        let mut write = inner.begin_script().await?;
        let result = match inner.now() {
            Ok(now) => submit(&mut write, &inner.images, round, lease, submission, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    /// The one-trip accept, when this store object holds a validated image of the round
    /// showing it `pending` under the caller's live lease and the responses validate against
    /// its schema. `Ok(None)`: no such image, the responses do not validate (the full path
    /// reports the authoritative error), or the stored row is not the image any more (nothing
    /// changed); the caller takes the read-validate-write path.
    async fn imaged_submit(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        submission: &ResponseSubmission,
    ) -> Result<Option<ManagedInputRecord>> {
        let inner = self.inner();
        let Some(validated) = inner.images.get(round) else {
            return Ok(None);
        };
        let now = inner.now()?;
        if !validated.allows(ManagedInputStatus::Pending, lease, now) {
            return Ok(None);
        }
        let Ok(encoded) = encode_submission(&validated.record, submission) else {
            return Ok(None);
        };
        let now_text = timestamp_text(now);
        let accept = Accept::new(round, lease, submission, &encoded, &now_text);
        let script = accept.bind_projection(validated.image.bind(accept.bind(BEGIN_ACCEPT_IMAGED)));
        let Some(row) = inner
            .write_if_unchanged(
                round,
                script,
                CommitFlush::AsConfigured,
                "cannot store the managed-input responses",
            )
            .await?
        else {
            return Ok(None);
        };
        // The row was the image, which decoded, with only the accepted columns changed.
        let record = decode_record(&row)?;
        inner.images.remember(&row, &record);
        Ok(Some(record))
    }
}

/// The values an accept script binds: the accept's own and the lease guard's first, then
/// (after an image guard, if any) the redacted projection's.
struct Accept<'q> {
    round: &'q RoundRef,
    lease: &'q LeaseRef,
    submission: &'q ResponseSubmission,
    encoded: &'q EncodedSubmission,
    now_text: &'q str,
}

impl<'q> Accept<'q> {
    fn new(
        round: &'q RoundRef,
        lease: &'q LeaseRef,
        submission: &'q ResponseSubmission,
        encoded: &'q EncodedSubmission,
        now_text: &'q str,
    ) -> Self {
        Self {
            round,
            lease,
            submission,
            encoded,
            now_text,
        }
    }

    /// `statement` with the accept's and the lease guard's parameters bound.
    fn bind(&self, statement: &'static str) -> Query<'q, Sqlite, SqliteArguments> {
        let (encoded, submission) = (self.encoded, self.submission);
        bind_lease_guard(
            sqlx::query(statement)
                .bind(&encoded.payload_json)
                .bind(&submission.idempotency_key)
                .bind(self.now_text)
                .bind(self.now_text),
            self.round,
            self.lease,
            self.now_text,
        )
    }

    /// `query` with the redacted projection's parameters bound after it.
    fn bind_projection(
        &self,
        query: Query<'q, Sqlite, SqliteArguments>,
    ) -> Query<'q, Sqlite, SqliteArguments> {
        let (round, encoded) = (self.round, self.encoded);
        query
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .bind(&encoded.redacted_json)
    }
}

async fn submit(
    write: &mut ScriptTx,
    images: &ImageCache,
    round: &RoundRef,
    lease: &LeaseRef,
    submission: &ResponseSubmission,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let current = begin_and_fetch_existing(write, round).await?;
    let encoded = match check_submission(&current, lease, submission, now)? {
        Submission::Accept(encoded) => encoded,
        _ => return Ok(current),
    };
    let now_text = timestamp_text(now);
    let accept = Accept::new(round, lease, submission, &encoded, &now_text);
    let rows = accept
        .bind_projection(accept.bind(ACCEPT_RESPONSES))
        .fetch_all(&mut **write)
        .await
        .map_err(|e| storage("cannot store the managed-input responses", e))?;
    write.mark_committed();
    let [row] = rows.as_slice() else {
        return Err(raced("response submission"));
    };
    let record = decode_record(row)?;
    images.remember(row, &record);
    Ok(record)
}
