//! Opening the SQLite managed-input store: files, permissions, paths, reopening, lazy schema
//! on a shared pool, migration of a partial legacy table, and the exact schema of sf-m3 0.3.1.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use m3_store::{
    CreateRound, ManagedInputStore, RoundRef, SqliteManagedInputStore, SqliteStoreOptions,
};
use m3_tests::store_support::{address_round, python};
use m3_types::{Clock, ManagedInputRecord, ManualClock, SystemClock};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Stores round `r` of execution `e` with a 30-second lease.
async fn create_a_round(store: &SqliteManagedInputStore) -> m3_types::Result<ManagedInputRecord> {
    let round = address_round("e", "r", SystemClock.now());
    let request = CreateRound::new(round, "w", Duration::from_secs(30));
    store.create_round(request).await
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

#[tokio::test]
async fn database_and_wal_files_are_private_and_parents_are_created() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("a/b/m3.sqlite");
    let store = SqliteManagedInputStore::open(&path).await?;
    create_a_round(&store).await?;
    assert_eq!(mode(&path), 0o600);
    let wal = dir.path().join("a/b/m3.sqlite-wal");
    assert!(wal.exists(), "the database runs in WAL mode");
    assert_eq!(mode(&wal), 0o600);
    assert_eq!(mode(&dir.path().join("a/b/m3.sqlite-shm")), 0o600);

    // An existing file keeps the mode its owner gave it (only files we create are made
    // private), and so do the companions of a shared file.
    let shared = dir.path().join("shared.sqlite");
    std::fs::write(&shared, b"")?;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644))?;
    let store = SqliteManagedInputStore::open(&shared).await?;
    create_a_round(&store).await?;
    assert_eq!(mode(&shared), 0o644);
    assert_eq!(mode(&dir.path().join("shared.sqlite-wal")), 0o644);
    Ok(())
}

/// A read-only database file is refused with a clear error and keeps its mode (the store
/// never makes a file it did not create writable), for both stores on the file.
#[tokio::test]
async fn a_read_only_database_file_is_refused_and_left_unchanged() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("theirs.sqlite");
    drop(SqliteManagedInputStore::open(&path).await?);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400))?;
    let error = SqliteManagedInputStore::open(&path)
        .await
        .expect_err("a read-only file must be refused");
    assert_eq!(error.code(), "managed_input_invalid", "{error}");
    assert!(error.message().contains("read-only"), "{error}");
    assert_eq!(mode(&path), 0o400);
    let error = m3_store::SqliteExecutionStore::open(&path)
        .await
        .expect_err("a read-only file must be refused");
    assert!(error.message().contains("read-only"), "{error}");
    assert_eq!(mode(&path), 0o400);
    Ok(())
}

#[tokio::test]
async fn symlinked_and_non_file_paths_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let target = dir.path().join("real.sqlite");
    SqliteManagedInputStore::open(&target).await?;
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&target, &link)?;
    let error = SqliteManagedInputStore::open(&link)
        .await
        .expect_err("symlink must be refused");
    assert_eq!(error.code(), "managed_input_invalid");
    assert!(error.message().contains("symlink"), "{error}");
    let error = SqliteManagedInputStore::open(dir.path())
        .await
        .expect_err("a directory must be refused");
    assert_eq!(error.code(), "managed_input_invalid");
    assert!(error.message().contains("file"), "{error}");
    Ok(())
}

#[tokio::test]
async fn a_reopened_store_reads_the_same_rounds() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let created = {
        let store = SqliteManagedInputStore::open(&path).await?;
        create_a_round(&store).await?
    };
    let reopened = SqliteManagedInputStore::open(&path).await?;
    assert_eq!(
        reopened.get_round(&RoundRef::new("e", "r")).await?,
        Some(created)
    );
    Ok(())
}

#[tokio::test]
async fn a_store_on_a_shared_pool_creates_its_tables_on_first_use() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.sqlite");
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true),
        )
        .await?;
    let count_tables = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'm3_managed_input%'",
        )
        .fetch_one(&pool)
        .await
    };
    let store = SqliteManagedInputStore::from_pool(pool.clone(), Arc::new(SystemClock))?;
    assert_eq!(
        count_tables().await?,
        0,
        "no tables before the first operation"
    );
    assert!(store.list_rounds("e").await?.is_empty());
    assert_eq!(
        count_tables().await?,
        4,
        "three tables and the pending index"
    );
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await?;
    assert_eq!(journal.to_lowercase(), "wal");
    let clock = ManualClock::new(SystemClock.now());
    let second = SqliteManagedInputStore::from_pool(pool, Arc::new(clock))?;
    create_a_round(&second).await?;
    assert_eq!(store.list_rounds("e").await?.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_legacy_table_gains_its_missing_columns_under_concurrent_openers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("legacy.sqlite");
    {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true),
            )
            .await?;
        sqlx::query("CREATE TABLE m3_managed_input_rounds (execution_id TEXT NOT NULL, round_id TEXT NOT NULL, round_index INTEGER NOT NULL, pending_json TEXT NOT NULL, PRIMARY KEY(execution_id, round_id))")
            .execute(&pool)
            .await?;
        sqlx::query("CREATE TABLE unrelated_legacy (id INTEGER PRIMARY KEY, note TEXT)")
            .execute(&pool)
            .await?;
        sqlx::query("INSERT INTO unrelated_legacy(note) VALUES ('kept')")
            .execute(&pool)
            .await?;
        pool.close().await;
    }
    let mut openers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let path = path.clone();
        openers.spawn(async move { SqliteManagedInputStore::open(&path).await.map(|_| ()) });
    }
    while let Some(opened) = openers.join_next().await {
        opened??;
    }
    let store = SqliteManagedInputStore::open(&path).await?;
    let columns: Vec<String> = sqlx::query("PRAGMA table_info(m3_managed_input_rounds)")
        .fetch_all(store.pool())
        .await?
        .iter()
        .map(|row| row.get::<String, _>("name"))
        .collect();
    assert_eq!(columns.len(), 27, "{columns:?}");
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM m3_managed_input_schema")
        .fetch_all(store.pool())
        .await?;
    assert_eq!(versions, vec![1]);
    let note: String = sqlx::query_scalar("SELECT note FROM unrelated_legacy")
        .fetch_one(store.pool())
        .await?;
    assert_eq!(note, "kept");
    // The migrated table works.
    create_a_round(&store).await?;
    assert_eq!(store.list_rounds("e").await?.len(), 1);
    Ok(())
}

async fn schema_of(
    path: &std::path::Path,
) -> Result<Vec<(String, String, String)>, Box<dyn std::error::Error>> {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteConnectOptions::new().filename(path))
        .await?;
    let rows = sqlx::query("SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'm3_managed_input%' AND sql IS NOT NULL ORDER BY name")
        .fetch_all(&pool)
        .await?;
    let normalized = rows
        .iter()
        .map(|row| {
            let sql: String = row.get("sql");
            (
                row.get("type"),
                row.get("name"),
                sql.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    pool.close().await;
    Ok(normalized)
}

#[tokio::test]
async fn the_schema_is_the_python_originals() -> TestResult {
    let dir = tempfile::tempdir()?;
    let ours = dir.path().join("ours.sqlite");
    let theirs = dir.path().join("theirs.sqlite");
    SqliteManagedInputStore::open_with(&ours, SqliteStoreOptions::new()).await?;
    let status = std::process::Command::new(python())
        .arg("-c")
        .arg("import sys; from m3.storage import SQLiteManagedInputStore; SQLiteManagedInputStore(sys.argv[1])")
        .arg(&theirs)
        .status()?;
    assert!(status.success(), "sf-m3 could not create its schema");
    let ours = schema_of(&ours).await?;
    assert_eq!(ours.len(), 4, "{ours:?}");
    assert_eq!(ours, schema_of(&theirs).await?);
    Ok(())
}
