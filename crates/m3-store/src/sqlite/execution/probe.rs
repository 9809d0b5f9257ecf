//! The SQLite backend's [`ChangeProbe`]: the marks of many executions in two reads.
//!
//! An execution's mark hashes what its waiters wait for: its lifecycle, outcome, cancel
//! flag and lease token (`m3rs_executions`), and the id and status of each of its rounds
//! (`m3_managed_input_rounds`). Lease expiries and `updated_at` are left out, so the
//! worker's renewals wake nobody. A table that does not exist (yet) has no rows to mark.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use m3_types::Result;
use sqlx::{Row, SqliteConnection, SqlitePool};

use super::schema::{EXECUTIONS_TABLE, MANAGED_ROUNDS_TABLE};
use crate::signal::{ChangeProbe, ProbeFuture};
use crate::sqlite::error::storage;

const EXECUTION_MARKS: &str = "SELECT id, lifecycle, outcome, cancel_requested_at, lease_token \
     FROM m3rs_executions WHERE id IN (SELECT value FROM json_each(?))";

const ROUND_MARKS: &str = "SELECT execution_id, round_id, status FROM m3_managed_input_rounds \
     WHERE execution_id IN (SELECT value FROM json_each(?)) \
     ORDER BY execution_id, round_index, round_id";

/// Reads marks through the execution store's pool (see the module docs).
#[derive(Debug)]
pub(super) struct SqliteProbe {
    pub(super) pool: SqlitePool,
}

impl ChangeProbe for SqliteProbe {
    fn marks<'a>(&'a self, executions: &'a [String]) -> ProbeFuture<'a> {
        Box::pin(self.read(executions))
    }
}

impl SqliteProbe {
    async fn read(&self, executions: &[String]) -> Result<HashMap<String, u64>> {
        let mut conn = self.pool.acquire().await.map_err(unreadable)?;
        let ids = serde_json::Value::from(executions).to_string();
        let tables = existing_tables(&mut conn).await?;
        let mut hashers: HashMap<String, DefaultHasher> = HashMap::new();
        for (table, marks) in [
            (EXECUTIONS_TABLE, EXECUTION_MARKS),
            (MANAGED_ROUNDS_TABLE, ROUND_MARKS),
        ] {
            if tables.iter().any(|t| t == table) {
                hash_rows(&mut conn, marks, &ids, &mut hashers).await?;
            }
        }
        Ok(hashers
            .into_iter()
            .map(|(id, hasher)| (id, hasher.finish()))
            .collect())
    }
}

fn unreadable(error: sqlx::Error) -> m3_types::Error {
    storage("could not read the marks of the waiting executions", error)
}

/// Runs `marks` (the execution id first, then the marked columns) for `ids` (a JSON array)
/// and hashes each row's columns into its execution's hasher, in row order.
async fn hash_rows(
    conn: &mut SqliteConnection,
    marks: &'static str,
    ids: &str,
    hashers: &mut HashMap<String, DefaultHasher>,
) -> Result<()> {
    let rows = sqlx::query(marks)
        .bind(ids)
        .fetch_all(&mut *conn)
        .await
        .map_err(unreadable)?;
    for row in rows {
        let id: String = row.try_get(0).map_err(unreadable)?;
        let hasher = hashers.entry(id).or_default();
        for column in 1..row.len() {
            row.try_get::<Option<String>, _>(column)
                .map_err(unreadable)?
                .hash(hasher);
        }
    }
    Ok(())
}

/// Which of the two marked tables exist.
async fn existing_tables(conn: &mut SqliteConnection) -> Result<Vec<String>> {
    sqlx::query_scalar::<_, String>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)",
    )
    .bind(EXECUTIONS_TABLE)
    .bind(MANAGED_ROUNDS_TABLE)
    .fetch_all(conn)
    .await
    .map_err(unreadable)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::signal::{ChangeHub, ChangeSignal, ChangeSubscription, Topic, Wake};
    use crate::sqlite::columns::CREATE_ROUNDS;
    use crate::{ExecutionStore, NewExecution, SqliteExecutionStore};

    const SWEEP: Duration = Duration::from_millis(25);
    const LONG: Duration = Duration::from_secs(10);

    async fn wakes(sub: &mut ChangeSubscription, within: Duration) -> Option<Wake> {
        tokio::time::timeout(within, sub.changed()).await.ok()
    }

    /// Runs `sql` on the file behind the store's back: nothing is announced.
    async fn unannounced(pool: &SqlitePool, sql: &'static str, binds: &[&str]) {
        let mut query = sqlx::query(sql);
        for bind in binds {
            query = query.bind(*bind);
        }
        query.execute(pool).await.unwrap();
    }

    #[tokio::test]
    async fn an_unannounced_commit_wakes_its_waiter_and_a_renewal_wakes_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteExecutionStore::open(dir.path().join("m3.sqlite"))
            .await
            .unwrap();
        assert!(
            store.inner().signal.has_probe(),
            "the store attaches its probe"
        );
        let id = store
            .create_execution(NewExecution::new(serde_json::json!({})))
            .await
            .unwrap()
            .execution_id;
        let pool = store.pool().clone();
        unannounced(&pool, CREATE_ROUNDS, &[]).await;
        // A hub of its own: only the probe can wake its subscriptions.
        let hub = ChangeHub::with_intervals(Duration::from_secs(3600), SWEEP);
        let probe: Arc<dyn ChangeProbe> = Arc::new(SqliteProbe { pool: pool.clone() });
        hub.attach_probe(&probe);
        let mut waiter = hub.subscribe(Topic::Execution(id.clone()));
        assert_eq!(wakes(&mut waiter, LONG).await, Some(Wake::Signalled));
        unannounced(
            &pool,
            "INSERT INTO m3_managed_input_rounds (execution_id, round_id, round_index, \
             round_limit, pending_json, status, owner_id, lease_token, lease_expires_at, \
             operation_parameters_json, created_at, updated_at) VALUES (?, 'r1', 0, 1, '{}', \
             'pending', 'o', 't', '2026-01-01T00:00:00Z', '{}', '2026-01-01T00:00:00Z', \
             '2026-01-01T00:00:00Z')",
            &[&id],
        )
        .await;
        assert_eq!(wakes(&mut waiter, LONG).await, Some(Wake::Signalled));
        // Renewals move expiries only: several sweeps, no wake-up.
        unannounced(
            &pool,
            "UPDATE m3_managed_input_rounds SET lease_expires_at = '2027-01-01T00:00:00Z', \
             updated_at = '2026-06-01T00:00:00Z'",
            &[],
        )
        .await;
        unannounced(
            &pool,
            "UPDATE m3rs_executions SET updated_at = '2026-06-01T00:00:00Z' WHERE id = ?",
            &[&id],
        )
        .await;
        assert_eq!(wakes(&mut waiter, SWEEP * 8).await, None);
        // A response committed behind the signal's back ...
        unannounced(
            &pool,
            "UPDATE m3_managed_input_rounds SET status = 'response_validated'",
            &[],
        )
        .await;
        assert_eq!(wakes(&mut waiter, LONG).await, Some(Wake::Signalled));
        // ... and a cancel request likewise.
        unannounced(
            &pool,
            "UPDATE m3rs_executions SET cancel_requested_at = '2026-06-01T00:00:00Z' WHERE id = ?",
            &[&id],
        )
        .await;
        assert_eq!(wakes(&mut waiter, LONG).await, Some(Wake::Signalled));
        assert_eq!(hub.mechanism(), "in-process");
    }
}
