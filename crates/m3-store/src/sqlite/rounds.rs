//! `create_round` and the plain reads (`get_round`, `list_rounds`, `redacted_responses`).

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Reason, Result};
use serde_json::{Map, Value};
use sqlx::{Row, SqliteConnection};

use super::checks::fetch_round;
use super::codec::{decode_record, timestamp_text};
use super::columns::record_columns;
use super::connect::ScriptTx;
use super::error::{is_integrity_violation, storage};
use super::row_snapshot::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::managed_input::rules::{
    PreparedRound, lease_expiry, prepare_create, replay_create, require_round, require_text,
    round_index_taken,
};
use crate::{CreateRound, PendingPage, PendingQuery, RoundRef, RoundScan, UnreadableRound};

/// `BEGIN IMMEDIATE`, the insert and `COMMIT` in one script (one round trip).
const INSERT_ROUND: &str = concat!(
    "BEGIN IMMEDIATE;INSERT INTO m3_managed_input_rounds(execution_id,round_id,round_index,round_limit,pending_json,status,responses_json,response_idempotency_key,owner_id,lease_token,lease_expires_at,harness_session_id,native_resume_token,delivery_idempotency_key,session_id,turn_id,operation_parameters_json,delivery_attempts,created_at,updated_at) ",
    "VALUES(?,?,?,?,?,'pending',NULL,NULL,?,?,?,?,?,?,?,?,?,0,?,?) RETURNING ",
    record_columns!(),
    ";COMMIT"
);

const LIST_ROUNDS: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? ORDER BY round_index"
);

/// The pending rounds of every execution (the inbox page is selected from them).
const LIST_PENDING: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE status='pending'"
);

const SELECT_ROUND: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? AND round_id=?"
);

const SELECT_ANSWERED_BY: &str =
    "SELECT actor_json FROM m3rs_round_answers WHERE execution_id=? AND round_id=?";
const SELECT_REDACTED: &str = "SELECT responses_redacted_json FROM m3_managed_input_diagnostics WHERE execution_id=? AND round_id=?";

impl SqliteManagedInputStore {
    pub(crate) async fn create_round_impl(
        &self,
        request: CreateRound,
    ) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        self.ensure_schema().await?;
        let inner = self.inner();
        let mut write = inner.begin_script().await?;
        let now = inner.now();
        let result = match now {
            Ok(now) => insert_round(&mut write, &inner.images, &new, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }

    pub(crate) async fn get_round_impl(
        &self,
        round: &RoundRef,
    ) -> Result<Option<ManagedInputRecord>> {
        require_round(round)?;
        self.ensure_schema().await?;
        let mut reader = self.inner().reader().await?;
        let rows = sqlx::query(SELECT_ROUND)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .fetch_all(&mut *reader)
            .await
            .map_err(|e| storage("cannot read a managed-input round", e))?;
        reader.done();
        let Some(row) = rows.first() else {
            self.inner().images.forget(round);
            return Ok(None);
        };
        let record = decode_record(row)?;
        self.inner().images.remember(row, &record);
        Ok(Some(record))
    }

    pub(crate) async fn scan_rounds_impl(&self, execution_id: &str) -> Result<RoundScan> {
        require_text(execution_id, "execution_id")?;
        self.ensure_schema().await?;
        let mut reader = self.inner().reader().await?;
        let rows = sqlx::query(LIST_ROUNDS)
            .bind(execution_id)
            .fetch_all(&mut *reader)
            .await
            .map_err(|e| storage("cannot list managed-input rounds", e))?;
        reader.done();
        let images = &self.inner().images;
        let mut scan = RoundScan::default();
        for row in &rows {
            match decode_record(row) {
                Ok(record) => {
                    images.remember(row, &record);
                    scan.rounds.push(record);
                }
                Err(error) => {
                    let round_id = row.try_get::<String, _>("round_id").unwrap_or_default();
                    scan.unreadable.push(UnreadableRound::new(round_id, error));
                }
            }
        }
        Ok(scan)
    }

    /// Reads the pending rows only and keeps the page with the shared rules.
    pub(crate) async fn pending_page_impl(&self, query: &PendingQuery) -> Result<PendingPage> {
        query.validate()?;
        self.ensure_schema().await?;
        let mut reader = self.inner().reader().await?;
        let rows = sqlx::query(LIST_PENDING)
            .fetch_all(&mut *reader)
            .await
            .map_err(|e| storage("cannot list the pending managed-input rounds", e))?;
        reader.done();
        Ok(query.select(rows.iter().filter_map(|row| decode_record(row).ok())))
    }

    pub(crate) async fn redacted_responses_impl(
        &self,
        round: &RoundRef,
    ) -> Result<Option<Map<String, Value>>> {
        require_round(round)?;
        self.ensure_schema().await?;
        let stored: Option<String> = sqlx::query_scalar(SELECT_REDACTED)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .fetch_optional(&self.inner().pool)
            .await
            .map_err(|e| {
                if matches!(e, sqlx::Error::ColumnDecode { .. }) {
                    redacted_invalid(e.to_string())
                } else {
                    storage("cannot read the redacted responses", e)
                }
            })?;
        match stored {
            None => Ok(None),
            Some(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => Ok(Some(map)),
                Ok(_) => Err(redacted_invalid("not a JSON object")),
                Err(e) => Err(redacted_invalid(e.to_string())),
            },
        }
    }
}

impl SqliteManagedInputStore {
    pub(crate) async fn answered_by_impl(
        &self,
        round: &RoundRef,
    ) -> Result<Option<m3_types::Actor>> {
        require_round(round)?;
        self.ensure_schema().await?;
        let stored: Option<Option<String>> = sqlx::query_scalar(SELECT_ANSWERED_BY)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .fetch_optional(&self.inner().pool)
            .await
            .map_err(|e| storage("cannot read who answered the round", e))?;
        stored
            .flatten()
            .as_deref()
            .map(m3_types::Actor::from_json_text)
            .transpose()
    }
}

fn redacted_invalid(why: impl Into<String>) -> Error {
    Error::managed_input_validation("stored redacted response projection is invalid")
        .with_reason(Reason::StoredRecordInvalid)
        .with_detail("why", why.into())
}

/// Opens the transaction with the insert (one round trip). A uniqueness conflict falls back to
/// reading the stored round inside the same transaction: the same data is an idempotent
/// replay, other data a conflict.
async fn insert_round(
    write: &mut ScriptTx,
    images: &ImageCache,
    new: &PreparedRound,
    now: time::OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let request = &new.request;
    let round = RoundRef::of_pending(&request.pending);
    let expires = match lease_expiry(now, request.lease_duration) {
        Ok(expires) => expires,
        Err(error) => {
            // As before the fast path: an identical replay succeeds whatever the duration.
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut **write)
                .await
                .map_err(|e| storage("cannot begin a write transaction", e))?;
            return existing_round(write, new, &round).await?.ok_or(error);
        }
    };
    let now_text = timestamp_text(now);
    let inserted = sqlx::query(INSERT_ROUND)
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .bind(i64::from(request.round_index))
        .bind(i64::from(request.round_limit))
        .bind(&new.pending_json)
        .bind(&request.owner_id)
        .bind(&new.lease_token)
        .bind(timestamp_text(expires))
        .bind(&request.harness_session_id)
        .bind(&request.native_resume_token)
        .bind(&request.delivery_idempotency_key)
        .bind(&request.session_id)
        .bind(&request.turn_id)
        .bind(&new.parameters_json)
        .bind(&now_text)
        .bind(&now_text)
        .fetch_all(&mut **write)
        .await;
    if inserted.is_ok() {
        write.mark_committed();
    }
    match inserted {
        Ok(rows) => match rows.as_slice() {
            [row] => {
                let record = decode_record(row)?;
                debug_assert_eq!(record.status, ManagedInputStatus::Pending);
                images.remember(row, &record);
                Ok(record)
            }
            _ => Err(Error::storage("managed-input insert returned no row")),
        },
        Err(e) if is_integrity_violation(&e) => match existing_round(write, new, &round).await? {
            Some(current) => Ok(current),
            None => Err(round_index_taken(new).with_source(e)),
        },
        Err(e) => Err(storage("cannot insert a managed-input round", e)),
    }
}

/// The stored round with `round`'s key if it carries exactly `new`'s data; `None` if there is
/// none.
///
/// # Errors
/// `managed_input_conflict` if it exists with other data.
async fn existing_round(
    conn: &mut SqliteConnection,
    new: &PreparedRound,
    round: &RoundRef,
) -> Result<Option<ManagedInputRecord>> {
    fetch_round(conn, round)
        .await?
        .map(|current| replay_create(current, new))
        .transpose()
}
