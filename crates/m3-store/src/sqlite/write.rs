//! `write_round` on SQLite: every lease-holding mutation of a round (claim, submit, the
//! delivery transitions, fail, fail_recovery) is decided by the shared
//! [`RoundChange::write`], exactly as on every other backend; this file only stores the record
//! it decides.
//!
//! Two ways to store it, one outcome:
//! - **From the row image** (one script, one round trip): when this store object holds a
//!   validated image of the round (see [`super::row_snapshot`]), the decision is made on the
//!   image's record and the UPDATE is pinned to the whole image, so it changes the row only
//!   if the row is still exactly what was decided on. Anything else (no image, a refusal or
//!   an idempotent repeat on the image, a row that changed) takes the other way, which
//!   decides authoritatively.
//! - **Read, decide, write** inside `BEGIN IMMEDIATE`: the decision is made on the row read
//!   under the write lock, so the UPDATE that follows cannot miss.

use std::sync::LazyLock;

use m3_types::{ManagedInputRecord, Result};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use time::OffsetDateTime;

use super::checks::begin_and_fetch_existing;
use super::codec::{decode_record, stored_invalid, timestamp_text};
use super::columns::{image_guard, record_columns};
use super::connect::{CommitFlush, ScriptTx};
use super::error::storage;
use super::row_snapshot::{ImageCache, Stored};
use super::store::{Inner, SqliteManagedInputStore};
use crate::managed_input::rules::{RoundWrite, Transition, json_text, raced, to_json_value};
use crate::{RoundChange, RoundOp, RoundRef};

/// The columns a lease-holding write may change, in the order the UPDATE sets and binds them
/// (the responses follow, after an accepted submission only: they are never rewritten
/// otherwise, so a row the Python original wrote keeps its exact text).
const WRITTEN: [&str; 14] = [
    "status",
    "owner_id",
    "lease_token",
    "lease_expires_at",
    "delivery_attempts",
    "updated_at",
    "response_idempotency_key",
    "response_validated_at",
    "delivery_started_at",
    "delivered_at",
    "resolved_at",
    "failed_at",
    "failure_code",
    "failure_message",
];

/// The redacted projection of an accepted submission, upserted only if the UPDATE before it
/// changed the row; parameters: execution_id, round_id, responses_redacted_json.
const UPSERT_PROJECTION: &str = "INSERT INTO m3_managed_input_diagnostics(execution_id,round_id,responses_redacted_json) SELECT ?,?,? WHERE changes()=1 ON CONFLICT(execution_id,round_id) DO UPDATE SET responses_redacted_json=excluded.responses_redacted_json";

/// Who answered an accepted submission (`NULL` when nobody was named), stored only if the
/// projection before it was; parameters: execution_id, round_id, actor_json.
const UPSERT_ANSWER: &str = "INSERT INTO m3rs_round_answers(execution_id,round_id,actor_json) SELECT ?,?,? WHERE changes()=1 ON CONFLICT(execution_id,round_id) DO UPDATE SET actor_json=excluded.actor_json";

/// The actor on the `round.answered` record the status trigger has just appended (the
/// newest cursor, checked to be this round's answer), only if the answer before it was
/// stored; parameters: actor_json, execution_id, round_id.
const SET_RECORD_ACTOR: &str = "UPDATE m3rs_changes SET actor=? WHERE changes()=1 AND cursor=(SELECT seq FROM sqlite_sequence WHERE name='m3rs_changes') AND execution_id=? AND round_id=? AND kind='round.answered'";

/// What an accepted submission stores beside the row: the redacted projection and the
/// actor, as JSON text.
#[derive(Debug, Clone, Copy)]
struct Accepted<'q> {
    redacted_json: &'q str,
    actor_json: Option<&'q str>,
}

/// Which statements a write runs: the shape of its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    /// An accepted submission: the responses column and the redacted projection too.
    accepts: bool,
    /// Pinned to the row image (one script that opens and commits its own transaction), or
    /// the write inside the read-decide-write transaction.
    imaged: bool,
    /// How the commit waits for the disk.
    flush: CommitFlush,
}

impl Shape {
    /// The script text. sqlx takes statements by reference, so every shape's text is built
    /// once, on first use.
    fn script(self) -> &'static str {
        static SCRIPTS: LazyLock<Vec<(Shape, String)>> = LazyLock::new(|| {
            let flushes = [
                CommitFlush::AsConfigured,
                CommitFlush::SkipFull,
                CommitFlush::SkipExtra,
            ];
            let mut scripts = Vec::new();
            for accepts in [false, true] {
                for imaged in [false, true] {
                    for flush in flushes {
                        let shape = Shape {
                            accepts,
                            imaged,
                            flush,
                        };
                        scripts.push((shape, shape.build()));
                    }
                }
            }
            scripts
        });
        SCRIPTS
            .iter()
            .find(|(shape, _)| *shape == self)
            .map_or("", |(_, script)| script.as_str())
    }

    /// This shape's script: the UPDATE of [`WRITTEN`] (and the responses) by key, pinned to
    /// the image or returning the row, the projection, the commit, and around it all the
    /// `synchronous` switch a flush skip needs.
    fn build(self) -> String {
        let mut set: Vec<String> = WRITTEN.iter().map(|column| format!("{column}=?")).collect();
        if self.accepts {
            set.push("responses_json=?".to_owned());
        }
        let restore = self.flush.restore();
        let mut script = String::new();
        if restore.is_some() {
            script.push_str("PRAGMA synchronous=NORMAL;");
        }
        if self.imaged {
            script.push_str("BEGIN IMMEDIATE;");
        }
        script.push_str("UPDATE m3_managed_input_rounds SET ");
        script.push_str(&set.join(","));
        script.push_str(" WHERE execution_id=? AND round_id=?");
        if self.imaged {
            script.push_str(image_guard!());
            script.push_str(" RETURNING status");
        } else {
            script.push_str(concat!(" RETURNING ", record_columns!()));
        }
        if self.accepts {
            for statement in [UPSERT_PROJECTION, UPSERT_ANSWER, SET_RECORD_ACTOR] {
                script.push(';');
                script.push_str(statement);
            }
        }
        script.push_str(";COMMIT");
        if let Some(restore) = restore {
            script.push(';');
            script.push_str(restore);
        }
        script
    }
}

/// The new values of a write's columns ([`WRITTEN`], then the responses if it accepts one).
fn written_values(write: &RoundWrite) -> Result<Vec<(&'static str, Stored)>> {
    let record = &write.record;
    let text = |value: Option<&str>| Stored::Text(value.map(str::to_owned));
    let time = |value: Option<OffsetDateTime>| Stored::Text(value.map(timestamp_text));
    let mut values = vec![
        ("status", text(Some(record.status.as_str()))),
        ("owner_id", text(Some(&record.lease.owner_id))),
        ("lease_token", text(Some(&record.lease.lease_token))),
        ("lease_expires_at", time(Some(record.lease.expires_at))),
        (
            "delivery_attempts",
            Stored::Integer(i64::from(record.delivery_attempts)),
        ),
        ("updated_at", time(Some(record.updated_at))),
        (
            "response_idempotency_key",
            text(record.response_idempotency_key.as_deref()),
        ),
        ("response_validated_at", time(record.response_validated_at)),
        ("delivery_started_at", time(record.delivery_started_at)),
        ("delivered_at", time(record.delivered_at)),
        ("resolved_at", time(record.resolved_at)),
        ("failed_at", time(record.failed_at)),
        ("failure_code", text(record.failure_code.as_deref())),
        ("failure_message", text(record.failure_message.as_deref())),
    ];
    if write.redacted_json.is_some() {
        let responses = record
            .responses
            .as_ref()
            .map(|responses| to_json_value(responses).and_then(|value| json_text(&value)))
            .transpose()?;
        values.push(("responses_json", Stored::Text(responses)));
    }
    Ok(values)
}

/// A write's script with every parameter bound: the new values, the key, the image (if
/// pinned to one) and the projection and actor (if it accepts a submission).
fn bind_write<'q>(
    shape: Shape,
    round: &'q RoundRef,
    values: &'q [(&'static str, Stored)],
    image: Option<&'q super::row_snapshot::RowImage>,
    accepted: Option<Accepted<'q>>,
) -> Query<'q, Sqlite, SqliteArguments> {
    let query = values
        .iter()
        .fold(sqlx::query(shape.script()), |query, (_, value)| {
            value.bind(query)
        })
        .bind(&round.execution_id)
        .bind(&round.round_id);
    let query = match image {
        Some(image) => image.bind(query),
        None => query,
    };
    match accepted {
        Some(accepted) => query
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .bind(accepted.redacted_json)
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .bind(accepted.actor_json)
            .bind(accepted.actor_json)
            .bind(&round.execution_id)
            .bind(&round.round_id),
        None => query,
    }
}

/// The actor of `write` as stored JSON text.
fn actor_json(write: &RoundWrite) -> Result<Option<String>> {
    write
        .actor
        .as_ref()
        .map(m3_types::Actor::to_json_text)
        .transpose()
}

/// What `write` stores beside the row if it accepts a submission.
fn accepted<'q>(write: &'q RoundWrite, actor_json: Option<&'q str>) -> Option<Accepted<'q>> {
    write
        .redacted_json
        .as_deref()
        .map(|redacted_json| Accepted {
            redacted_json,
            actor_json,
        })
}

impl SqliteManagedInputStore {
    /// [`ManagedInputStore::write_round`](crate::ManagedInputStore::write_round) on SQLite.
    pub(crate) async fn write_change(&self, change: &RoundChange) -> Result<ManagedInputRecord> {
        self.ensure_schema().await?;
        let inner = self.inner();
        if let Some(record) = imaged_write(inner, change).await? {
            return Ok(record);
        }
        let mut write = inner.begin_script().await?;
        let result = match inner.now() {
            Ok(now) => read_decide_write(&mut write, &inner.images, change, now).await,
            Err(error) => Err(error),
        };
        write.finish(result).await
    }
}

/// How the commit of `change` waits for the disk: `start_delivery` guards nothing durable
/// (see [`CommitFlush`]); everything else as the file is configured.
fn commit_flush(inner: &Inner, change: &RoundChange) -> CommitFlush {
    match change.op() {
        RoundOp::Transition {
            transition: Transition::StartDelivery,
            ..
        } => inner.delivery_flush,
        _ => CommitFlush::AsConfigured,
    }
}

/// The one-script write, decided on this store object's validated image of the round.
/// `Ok(None)`: no image, the image's decision is not a write (a refusal or a repeat is
/// decided again on the row), or the row is not the image any more (nothing changed).
async fn imaged_write(inner: &Inner, change: &RoundChange) -> Result<Option<ManagedInputRecord>> {
    let round = change.round();
    let Some(validated) = inner.images.get(round) else {
        return Ok(None);
    };
    let Ok(Some(write)) = change.write(&validated.record, inner.now()?) else {
        return Ok(None);
    };
    let values = written_values(&write)?;
    let actor = actor_json(&write)?;
    let shape = Shape {
        accepts: write.redacted_json.is_some(),
        imaged: true,
        flush: commit_flush(inner, change),
    };
    let script = bind_write(
        shape,
        round,
        &values,
        Some(&validated.image),
        accepted(&write, actor.as_deref()),
    );
    if inner
        .write_if_unchanged(
            round,
            script,
            shape.flush,
            "cannot update a managed-input round",
        )
        .await?
        .is_none()
    {
        return Ok(None);
    }
    // The row was the image, which decoded, and the UPDATE set only `values`: the new image
    // follows without reading the row back.
    let record = write.record;
    record
        .validate()
        .map_err(|e| stored_invalid(e.to_string()))?;
    inner
        .images
        .remember_image(validated.image.changed(&values), &record);
    Ok(Some(record))
}

/// Opens the write transaction with the read of the round (one round trip), decides on it,
/// and stores the decision with the commit (one more): an idempotent repeat writes nothing
/// and returns the round as stored.
async fn read_decide_write(
    write: &mut ScriptTx,
    images: &ImageCache,
    change: &RoundChange,
    now: OffsetDateTime,
) -> Result<ManagedInputRecord> {
    let round = change.round();
    let current = begin_and_fetch_existing(write, round).await?;
    let Some(decided) = change.write(&current, now)? else {
        return Ok(current);
    };
    let values = written_values(&decided)?;
    let actor = actor_json(&decided)?;
    let shape = Shape {
        accepts: decided.redacted_json.is_some(),
        imaged: false,
        flush: CommitFlush::AsConfigured,
    };
    let rows = bind_write(
        shape,
        round,
        &values,
        None,
        accepted(&decided, actor.as_deref()),
    )
    .fetch_all(&mut **write)
    .await
    .map_err(|e| storage("cannot update a managed-input round", e))?;
    write.mark_committed();
    let [row] = rows.as_slice() else {
        return Err(raced("write"));
    };
    let record = decode_record(row)?;
    // Remembered after the commit: the row is the image from here on.
    images.remember(row, &record);
    Ok(record)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Connection;

    use super::*;
    use crate::conformance::{sample_round, sample_submission};
    use crate::sqlite::{SqliteStoreOptions, SqliteSynchronous};
    use crate::{CreateRound, LeaseRef, ManagedInputStore};

    const FULL: i64 = 2;

    /// A store on a fresh file (configured `FULL`) with one round whose response is
    /// validated, and the round's reference and lease.
    async fn validated_round(
        dir: &tempfile::TempDir,
        busy_timeout: Duration,
    ) -> (SqliteManagedInputStore, RoundRef, LeaseRef) {
        let options = SqliteStoreOptions::new()
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(busy_timeout);
        let path = dir.path().join("rounds.sqlite");
        let store = SqliteManagedInputStore::open_with(&path, options)
            .await
            .expect("open");
        let created = store
            .create_round(CreateRound::new(
                sample_round("exec-1", "round-1"),
                "worker-a",
                Duration::from_secs(60),
            ))
            .await
            .expect("create");
        let round = RoundRef::new("exec-1", "round-1");
        let lease = LeaseRef::new("worker-a", created.lease.lease_token.clone());
        store
            .submit_responses(&round, &lease, sample_submission("key-1"))
            .await
            .expect("submit");
        // The one-trip path, the one that lowers `synchronous`, needs the round's image.
        assert!(store.inner().images.get(&round).is_some());
        (store, round, lease)
    }

    #[tokio::test]
    async fn a_write_on_a_stale_image_is_decided_on_the_stored_row() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_secs(5)).await;
        let other = SqliteManagedInputStore::open(store.path())
            .await
            .expect("open");
        other
            .fail(
                &round,
                &lease,
                crate::RoundFailure::new("cancelled", "stopped elsewhere"),
            )
            .await
            .expect("fail");
        // This object's image still shows `response_validated`: the write must not succeed.
        assert!(store.inner().images.get(&round).is_some());
        let error = store
            .start_delivery(&round, &lease)
            .await
            .expect_err("the round failed");
        assert_eq!(error.code(), "managed_input_state");
        let stored = store.get_round(&round).await.expect("read").expect("round");
        assert_eq!(stored.status.as_str(), "failed");
        assert_eq!(stored.delivery_attempts, 0);
    }

    #[tokio::test]
    async fn a_transition_leaves_the_stored_responses_text_as_it_was_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_secs(5)).await;
        // Another writer (the Python original) formats JSON its own way.
        let mut conn =
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", store.path().display()))
                .await
                .expect("connect");
        let canonical: String =
            sqlx::query_scalar("SELECT responses_json FROM m3_managed_input_rounds")
                .fetch_one(&mut conn)
                .await
                .expect("read");
        let spaced = canonical.replace(",\"", ", \"").replace("\":", "\": ");
        sqlx::query("UPDATE m3_managed_input_rounds SET responses_json=?")
            .bind(&spaced)
            .execute(&mut conn)
            .await
            .expect("store the other formatting");
        let before: String =
            sqlx::query_scalar("SELECT responses_json FROM m3_managed_input_rounds")
                .fetch_one(&mut conn)
                .await
                .expect("read");
        assert!(before.contains("\": "), "not the canonical text: {before}");
        store.get_round(&round).await.expect("read").expect("round");
        store.start_delivery(&round, &lease).await.expect("start");
        store.mark_delivered(&round, &lease).await.expect("deliver");
        let after: String =
            sqlx::query_scalar("SELECT responses_json FROM m3_managed_input_rounds")
                .fetch_one(&mut conn)
                .await
                .expect("read");
        assert_eq!(after, before);
    }

    #[tokio::test]
    async fn start_delivery_puts_the_configured_flush_back_after_its_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_secs(5)).await;
        assert_eq!(store.inner().delivery_flush, CommitFlush::SkipFull);
        let started = store.start_delivery(&round, &lease).await.expect("start");
        assert_eq!(started.status.as_str(), "delivery_started");
        assert_eq!(
            store.inner().primary_synchronous().await.expect("read"),
            FULL
        );
        let delivered = store.mark_delivered(&round, &lease).await.expect("deliver");
        assert_eq!(delivered.status.as_str(), "delivered");
    }

    #[tokio::test]
    async fn a_start_delivery_that_fails_puts_the_configured_flush_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, round, lease) = validated_round(&dir, Duration::from_millis(100)).await;
        // Another connection holds the write lock: the script fails at its BEGIN, after it
        // lowered `synchronous`.
        let mut blocker =
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", store.path().display()))
                .await
                .expect("connect");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut blocker)
            .await
            .expect("lock");
        let error = store
            .start_delivery(&round, &lease)
            .await
            .expect_err("the write lock is held");
        assert_eq!(error.code(), "storage_error");
        assert_eq!(
            store.inner().primary_synchronous().await.expect("read"),
            FULL
        );
        sqlx::query("ROLLBACK")
            .execute(&mut blocker)
            .await
            .expect("unlock");
        let started = store.start_delivery(&round, &lease).await.expect("start");
        assert_eq!(started.delivery_attempts, 1);
    }
}
