//! Telling an m3 store from another application's SQLite file, before anything is written.
//!
//! Opening a store switches its file to WAL and creates the tables it lacks. Done to a file
//! that belongs to another application, that silently changes it (its journal mode, new
//! `m3rs_*` tables), even for a command that only reads. So an existing, non-empty file is
//! first read on a read-only connection that sets no PRAGMA, and accepted only if it is
//! empty of schema objects (a fresh database) or holds a table of m3's: an `m3rs_*` table
//! (m3-rs), an `m3_managed_input_*` table (m3-rs and the Python original, sf-m3 0.3.1) or
//! the Python original's `v2_schema_state` (its main store, whose managed-input tables are
//! created lazily). A table of m3's name that lacks a column m3 reads (a clashing schema)
//! is refused too. The refusal is `invalid_argument` with reason
//! [`Reason::InvalidStore`], and the file is left exactly as it was.

use std::path::Path;

use m3_types::{Error, Reason, Result};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

use super::error::storage;

/// The prefixes of m3's own tables.
const M3_PREFIXES: [&str; 2] = ["m3rs_", "m3_managed_input_"];

/// The Python original's main-store marker table (`m3.storage.sqlite`, sf-m3 0.3.1).
const PYTHON_MARKER: &str = "v2_schema_state";

/// The tables m3 reads, with the columns it reads from each (the DDL in `schema.rs` and
/// `execution/schema.rs`, `subscriptions.rs`; a unit test keeps them in step). The rounds table is absent on
/// purpose: like the original, the store adds every column a partial rounds table lacks.
const KNOWN_TABLES: [(&str, &[&str]); 13] = [
    (
        "m3rs_executions",
        &[
            "id",
            "spec_json",
            "human_input",
            "lifecycle",
            "outcome",
            "error_json",
            "result_json",
            "created_at",
            "updated_at",
            "finished_at",
            "lease_owner_id",
            "lease_token",
            "lease_expires_at",
            "cancel_requested_at",
            "cancel_reason",
        ],
    ),
    (
        "m3rs_execution_events",
        &[
            "execution_id",
            "sequence",
            "kind",
            "payload_json",
            "created_at",
        ],
    ),
    ("m3rs_execution_schema", &["version"]),
    (
        "m3_managed_input_diagnostics",
        &["execution_id", "round_id", "responses_redacted_json"],
    ),
    ("m3_managed_input_schema", &["version"]),
    (
        "m3rs_changes",
        &[
            "cursor",
            "kind",
            "execution_id",
            "round_id",
            "at",
            "actor",
            "state_json",
        ],
    ),
    ("m3rs_change_horizon", &["id", "pruned_through"]),
    (
        "m3rs_round_answers",
        &["execution_id", "round_id", "actor_json"],
    ),
    ("m3rs_subscriptions", &["id", "record_json"]),
    ("m3rs_link_key", &["id", "key", "created_at"]),
    ("m3rs_tokens", &["id", "name", "digest", "record_json"]),
    ("m3rs_policies", &["seq", "name", "record_json"]),
    (
        "m3rs_round_reminders",
        &["execution_id", "round_id", "fraction"],
    ),
];

/// How many foreign table names a refusal names (enough to recognize the application).
const NAMED: usize = 5;

/// Refuses an existing file at `path` that is not an m3 store (see the module docs); a
/// missing or empty file passes.
///
/// # Errors
/// `invalid_argument` with reason `invalid_store` for a file that is not a SQLite database,
/// holds only other applications' tables, or holds a table of m3's name with another
/// layout; `storage_error` if the file cannot be read.
pub(crate) async fn refuse_foreign_database(path: &Path) -> Result<()> {
    let metadata = std::fs::metadata(path).map_err(|e| {
        Error::storage("cannot inspect the database file")
            .with_detail("path", path.display().to_string())
            .with_source(e)
    })?;
    if metadata.len() == 0 {
        return Ok(());
    }
    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = options.connect().await.map_err(|e| unreadable(path, e))?;
    let verdict = inspect(&mut conn, path).await;
    if let Err(error) = conn.close().await {
        tracing::debug!(%error, "closing the store-recognition connection");
    }
    verdict
}

/// Reads the schema of the open file and applies the rules of the module docs.
async fn inspect(conn: &mut SqliteConnection, path: &Path) -> Result<()> {
    let objects: Vec<(String, String)> = sqlx::query_as(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| unreadable(path, e))?;
    let tables: Vec<&str> = objects
        .iter()
        .filter(|(kind, _)| kind == "table")
        .map(|(_, name)| name.as_str())
        .collect();
    if objects.is_empty() {
        return Ok(());
    }
    let ours = |name: &str| {
        M3_PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || name == PYTHON_MARKER
    };
    if !tables.iter().any(|name| ours(name)) {
        let named: Vec<&str> = tables.iter().copied().take(NAMED).collect();
        return Err(invalid_store(
            path,
            "is not an m3 store: it holds another application's tables",
        )
        .with_detail("tables", named));
    }
    for (kind, name) in &objects {
        if kind != "table" && KNOWN_TABLES.iter().any(|(table, _)| table == name) {
            return Err(
                invalid_store(path, "has an m3 table name used by another object")
                    .with_detail("object", name.as_str()),
            );
        }
    }
    for (table, expected) in KNOWN_TABLES {
        if !tables.contains(&table) {
            continue;
        }
        let present: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
            .bind(table)
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| unreadable(path, e))?;
        let missing: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|column| !present.iter().any(|p| p == column))
            .collect();
        if !missing.is_empty() {
            return Err(invalid_store(path, "has an m3 table with another layout")
                .with_detail("table", table)
                .with_detail("missing_columns", missing));
        }
    }
    Ok(())
}

/// The refusal: `invalid_argument`, reason `invalid_store`, naming the file.
fn invalid_store(path: &Path, what: &str) -> Error {
    Error::model_validation(format!(
        "{} {what}; m3 leaves it untouched (give the path of an m3 store or a new file)",
        path.display()
    ))
    .with_reason(Reason::InvalidStore)
    .with_detail("path", path.display().to_string())
}

/// A file SQLite cannot read as a database is not a store; other failures are storage
/// errors.
fn unreadable(path: &Path, error: sqlx::Error) -> Error {
    // SQLITE_NOTADB (26): the file is not a SQLite database at all.
    let not_a_database = error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "26");
    if not_a_database {
        return invalid_store(path, "is not a SQLite database");
    }
    storage("cannot read the database schema", error)
        .with_detail("path", path.display().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{ExecutionStore as _, SqliteExecutionStore};

    #[tokio::test]
    async fn the_known_columns_are_the_ones_the_stores_create() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m3.sqlite");
        let executions = SqliteExecutionStore::open(&path).await.unwrap();
        // The subscription, token and managed-input tables are created on first use, not on
        // open.
        executions.subscription_store().await.unwrap();
        executions.token_store().await.unwrap();
        executions.policy_store().await.unwrap();
        let mut writer = SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        crate::sqlite::reminders::create_table(&mut writer)
            .await
            .unwrap();
        let rounds = crate::SqliteManagedInputStore::open(&path).await.unwrap();
        rounds.ensure_schema().await.unwrap();
        let mut conn = SqliteConnectOptions::new()
            .filename(&path)
            .read_only(true)
            .connect()
            .await
            .unwrap();
        for (table, expected) in KNOWN_TABLES {
            let mut present: Vec<String> =
                sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
                    .bind(table)
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            let mut expected: Vec<&str> = expected.to_vec();
            present.sort();
            expected.sort_unstable();
            assert_eq!(present, expected, "{table}");
        }
        inspect(&mut conn, &path).await.unwrap();
    }
}
