//! The SQLite store's one-round-trip writes (its validated row images) never change a row
//! that was changed behind the store object: a column corrupted by a foreign writer after
//! the store last wrote the round makes the write fail as "stored ... invalid", and the row
//! stays exactly as the foreign writer left it.

use std::path::Path;
use std::time::Duration;

use m3_store::{
    CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundRef, SqliteManagedInputStore,
};
use m3_tests::store_support::{address_response, address_round};
use m3_types::{Clock, SystemClock};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Row, SqliteConnection};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const OWNER: &str = "worker-a";
const TOKEN: &str = "lease-images";

/// A connection of a foreign writer (not the store's pool).
async fn foreign(path: &Path) -> Result<SqliteConnection, sqlx::Error> {
    SqliteConnectOptions::new().filename(path).connect().await
}

/// Rewrites one column of the round with CHECK constraints suspended, as a broken writer
/// would.
async fn corrupt(path: &Path, assignment: &str) -> TestResult {
    let mut conn = foreign(path).await?;
    sqlx::query("PRAGMA ignore_check_constraints=ON")
        .execute(&mut conn)
        .await?;
    let sql = format!(
        "UPDATE m3_managed_input_rounds SET {assignment} WHERE execution_id='e' AND round_id='r'"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await?;
    assert_eq!(done.rows_affected(), 1);
    Ok(())
}

/// status, delivery_attempts, responses_json of the round, as stored.
async fn stored(path: &Path) -> Result<(String, i64, Option<String>), sqlx::Error> {
    let mut conn = foreign(path).await?;
    let row = sqlx::query("SELECT status,delivery_attempts,responses_json FROM m3_managed_input_rounds WHERE execution_id='e' AND round_id='r'")
        .fetch_one(&mut conn)
        .await?;
    Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
}

async fn created(path: &Path) -> Result<SqliteManagedInputStore, Box<dyn std::error::Error>> {
    let store = SqliteManagedInputStore::open(path).await?;
    store
        .create_round(
            CreateRound::new(
                address_round("e", "r", SystemClock.now()),
                OWNER,
                Duration::from_secs(300),
            )
            .with_lease_token(TOKEN),
        )
        .await?;
    Ok(store)
}

fn round() -> RoundRef {
    RoundRef::new("e", "r")
}

fn lease() -> LeaseRef {
    LeaseRef::new(OWNER, TOKEN)
}

/// Whether the write failed as a stored row that does not decode.
fn is_stored_invalid<T>(result: &m3_types::Result<T>) -> bool {
    matches!(result, Err(error) if error.code() == "managed_input_invalid" && error.message().contains("stored"))
}

#[tokio::test]
async fn a_transition_does_not_advance_a_row_corrupted_after_the_store_wrote_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let store = created(&path).await?;
    store
        .submit_responses(
            &round(),
            &lease(),
            ResponseSubmission::new(address_response("1 Main Street"), "key-1"),
        )
        .await?;
    corrupt(&path, "created_at='not a timestamp'").await?;

    let started = store.start_delivery(&round(), &lease()).await;
    assert!(is_stored_invalid(&started), "{started:?}");
    let (status, attempts, _) = stored(&path).await?;
    assert_eq!((status.as_str(), attempts), ("response_validated", 0));
    Ok(())
}

#[tokio::test]
async fn a_submission_does_not_accept_into_a_row_corrupted_after_the_store_created_it() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let store = created(&path).await?;
    corrupt(&path, "operation_parameters_json='[]'").await?;

    let accepted = store
        .submit_responses(
            &round(),
            &lease(),
            ResponseSubmission::new(address_response("1 Main Street"), "key-1"),
        )
        .await;
    assert!(is_stored_invalid(&accepted), "{accepted:?}");
    let (status, _, responses) = stored(&path).await?;
    assert_eq!((status.as_str(), responses), ("pending", None));
    Ok(())
}

#[tokio::test]
async fn a_repaired_row_is_written_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let store = created(&path).await?;
    corrupt(&path, "operation_parameters_json='[]'").await?;
    assert!(store.get_round(&round()).await.is_err());
    corrupt(&path, "operation_parameters_json='{}'").await?;

    let accepted = store
        .submit_responses(
            &round(),
            &lease(),
            ResponseSubmission::new(address_response("1 Main Street"), "key-1"),
        )
        .await?;
    assert_eq!(accepted.status.as_str(), "response_validated");
    let started = store.start_delivery(&round(), &lease()).await?;
    assert_eq!(started.delivery_attempts, 1);
    let (status, attempts, _) = stored(&path).await?;
    assert_eq!((status.as_str(), attempts), ("delivery_started", 1));
    Ok(())
}

#[tokio::test]
async fn every_one_trip_write_returns_exactly_the_stored_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let store = created(&path).await?;
    // A second store object decodes each row afresh.
    let fresh = SqliteManagedInputStore::open(&path).await?;
    let accepted = store
        .submit_responses(
            &round(),
            &lease(),
            ResponseSubmission::new(address_response("1 Main Street"), "key-1"),
        )
        .await?;
    assert_eq!(Some(accepted), fresh.get_round(&round()).await?);
    let started = store.start_delivery(&round(), &lease()).await?;
    assert_eq!(Some(started), fresh.get_round(&round()).await?);
    let delivered = store.mark_delivered(&round(), &lease()).await?;
    assert_eq!(Some(delivered), fresh.get_round(&round()).await?);
    let resolved = store.resolve(&round(), &lease()).await?;
    assert_eq!(Some(resolved), fresh.get_round(&round()).await?);
    Ok(())
}
