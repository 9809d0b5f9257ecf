//! The change feed's commit order on PostgreSQL: a transaction that changed state earlier
//! but commits later gets the later cursor, so a reader resuming from its last cursor never
//! skips it (a cursor taken from a sequence during the transaction would have been smaller
//! than one the reader had already passed).

use std::sync::Arc;

use m3_store::{ExecutionStore, NewExecution};
use m3_store_postgres::PgExecutionStore;
use m3_store_postgres::PgStoreOptions;
use m3_store_postgres::testing::{fresh_schema, test_server_url};
use m3_types::{Cursor, ExecutionStatus};
use sqlx::Connection;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_held_open_across_a_later_commit_is_read_after_it() -> TestResult {
    let url = test_server_url()?;
    let schema = fresh_schema();
    let options = PgStoreOptions::from_url(&url)?.schema_name(&schema)?;
    let store: Arc<dyn ExecutionStore> = Arc::new(PgExecutionStore::open_with(options).await?);
    let held_id = store
        .create_execution(NewExecution::new(serde_json::json!({"n": 1})))
        .await?
        .execution_id;
    let later_id = store
        .create_execution(NewExecution::new(serde_json::json!({"n": 2})))
        .await?
        .execution_id;
    let start = store.read_changes(Cursor::START, 100).await?.next;

    // Another session changes the first execution and keeps its transaction open.
    let mut held = sqlx::PgConnection::connect(&url).await?;
    // The schema name is a fresh `m3t_` id the test made (checked by `schema_name`).
    sqlx::query(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}")))
        .execute(&mut held)
        .await?;
    sqlx::query("BEGIN").execute(&mut held).await?;
    sqlx::query("UPDATE m3rs_executions SET lifecycle = 'queued' WHERE execution_id = $1")
        .bind(&held_id)
        .execute(&mut held)
        .await?;

    // A later change commits first: the reader sees it, and only it.
    store
        .transition(&later_id, ExecutionStatus::Queued, None)
        .await?;
    let first = store.read_changes(start, 100).await?;
    let ids: Vec<&str> = first
        .records
        .iter()
        .map(|r| r.execution_id.as_str())
        .collect();
    assert_eq!(ids, [later_id.as_str()]);

    // The held transaction commits: its record comes after the cursor the reader holds.
    sqlx::query("COMMIT").execute(&mut held).await?;
    let second = store.read_changes(first.next, 100).await?;
    let ids: Vec<&str> = second
        .records
        .iter()
        .map(|r| r.execution_id.as_str())
        .collect();
    assert_eq!(ids, [held_id.as_str()]);
    assert!(second.records[0].cursor > first.next);
    assert_eq!(second.records[0].kind.as_str(), "execution.queued");

    // A transaction that rolls back leaves no record and no hole a reader waits on.
    sqlx::query("BEGIN").execute(&mut held).await?;
    sqlx::query("UPDATE m3rs_executions SET lifecycle = 'finished' WHERE execution_id = $1")
        .bind(&held_id)
        .execute(&mut held)
        .await?;
    sqlx::query("ROLLBACK").execute(&mut held).await?;
    let none = store.read_changes(second.next, 100).await?;
    assert!(none.records.is_empty());
    Ok(())
}
