//! `create_round` and the plain reads (`get_round`, `list_rounds`, `redacted_responses`).

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};
use serde_json::{Map, Value};
use sqlx::SqliteConnection;

use super::checks::{fetch_round, lease_expiry, optional_text, require_round, require_text};
use super::codec::{
    decode_record, json_text, new_lease_token, record_columns, timestamp_text, to_json_value,
};
use super::connect::ScriptTx;
use super::error::{is_integrity_violation, storage};
use super::image::ImageCache;
use super::store::SqliteManagedInputStore;
use crate::{CreateRound, RoundRef};

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

const SELECT_ROUND: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM m3_managed_input_rounds WHERE execution_id=? AND round_id=?"
);

const SELECT_REDACTED: &str = "SELECT responses_redacted_json FROM m3_managed_input_diagnostics WHERE execution_id=? AND round_id=?";

/// The validated, encoded form of a [`CreateRound`].
struct NewRound {
    request: CreateRound,
    lease_token: String,
    pending_json: String,
    parameters_json: String,
}

fn validate_create(request: CreateRound) -> Result<NewRound> {
    if request.pending.requests.is_empty() {
        return Err(Error::managed_input_validation(
            "managed input requires a non-empty elicitation round",
        ));
    }
    require_text(&request.pending.execution_id, "execution_id")?;
    require_text(&request.pending.round_id, "round_id")?;
    if request.round_limit == 0 {
        return Err(Error::managed_input_validation(
            "round_limit must be positive",
        ));
    }
    if request.round_index >= request.round_limit {
        return Err(
            Error::managed_input_validation("round_index exceeds round limit")
                .with_detail("round_index", request.round_index)
                .with_detail("round_limit", request.round_limit),
        );
    }
    require_text(&request.owner_id, "owner_id")?;
    if request.lease_duration.is_zero() {
        return Err(Error::managed_input_validation(
            "lease_seconds must be positive",
        ));
    }
    optional_text(request.lease_token.as_deref(), "lease_token")?;
    optional_text(request.harness_session_id.as_deref(), "harness_session_id")?;
    optional_text(
        request.native_resume_token.as_deref(),
        "native_resume_token",
    )?;
    optional_text(
        request.delivery_idempotency_key.as_deref(),
        "delivery_idempotency_key",
    )?;
    optional_text(request.session_id.as_deref(), "session_id")?;
    optional_text(request.turn_id.as_deref(), "turn_id")?;
    let pending_json = json_text(&to_json_value(&request.pending)?)?;
    let parameters_json = json_text(&Value::Object(request.operation_parameters.clone()))?;
    let lease_token = match &request.lease_token {
        Some(token) => token.clone(),
        None => new_lease_token()?,
    };
    Ok(NewRound {
        request,
        lease_token,
        pending_json,
        parameters_json,
    })
}

/// Whether a stored round carries exactly the data of a replayed `create_round`.
fn same_round(current: &ManagedInputRecord, new: &NewRound) -> Result<bool> {
    let request = &new.request;
    let current_pending = json_text(&to_json_value(&current.pending)?)?;
    let current_parameters = json_text(&Value::Object(current.operation_parameters.clone()))?;
    Ok(current_pending == new.pending_json
        && current.round_index == request.round_index
        && current.round_limit == request.round_limit
        && current.lease.owner_id == request.owner_id
        && current.lease.lease_token == new.lease_token
        && current.harness_session_id == request.harness_session_id
        && current.native_resume_token == request.native_resume_token
        && current.delivery_idempotency_key == request.delivery_idempotency_key
        && current.session_id == request.session_id
        && current.turn_id == request.turn_id
        && current_parameters == new.parameters_json)
}

impl SqliteManagedInputStore {
    pub(crate) async fn create_round_impl(
        &self,
        request: CreateRound,
    ) -> Result<ManagedInputRecord> {
        let new = validate_create(request)?;
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

    pub(crate) async fn list_rounds_impl(
        &self,
        execution_id: &str,
    ) -> Result<Vec<ManagedInputRecord>> {
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
        rows.iter()
            .map(|row| {
                let record = decode_record(row)?;
                images.remember(row, &record);
                Ok(record)
            })
            .collect()
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

fn redacted_invalid(reason: impl Into<String>) -> Error {
    Error::managed_input_validation("stored redacted response projection is invalid")
        .with_detail("reason", reason.into())
}

/// Opens the transaction with the insert (one round trip). A uniqueness conflict falls back to
/// reading the stored round inside the same transaction: the same data is an idempotent
/// replay, other data a conflict.
async fn insert_round(
    write: &mut ScriptTx,
    images: &ImageCache,
    new: &NewRound,
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
            None => Err(Error::managed_input_conflict(
                "managed-input round conflicts with an existing round",
            )
            .with_detail("execution_id", round.execution_id.as_str())
            .with_detail("round_index", request.round_index)
            .with_source(e)),
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
    new: &NewRound,
    round: &RoundRef,
) -> Result<Option<ManagedInputRecord>> {
    match fetch_round(conn, round).await? {
        Some(current) if same_round(&current, new)? => Ok(Some(current)),
        Some(_) => Err(Error::managed_input_conflict(
            "managed-input round already exists with different data",
        )
        .with_detail("execution_id", round.execution_id.as_str())
        .with_detail("round_id", round.round_id.as_str())),
        None => Ok(None),
    }
}
