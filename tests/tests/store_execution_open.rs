//! Execution store: opening the database file (permissions, symlinks, parent
//! directories, PRAGMAs, options).

mod store_execution_support;

use std::sync::Arc;
use std::time::Duration;

use m3_store::{
    DEFAULT_BUSY_TIMEOUT, ExecutionStore, SqliteExecutionStore, SqliteStoreOptions,
    SqliteSynchronous,
};
use store_execution_support::*;

#[test]
fn options_default_to_five_seconds_and_full_sync() {
    let options = SqliteStoreOptions::new();
    assert_eq!(options.get_busy_timeout(), Duration::from_secs(5));
    assert_eq!(DEFAULT_BUSY_TIMEOUT, Duration::from_secs(5));
    assert_eq!(options.get_synchronous(), SqliteSynchronous::Full);
    assert!(options.get_max_connections() >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_creates_parent_directories_and_a_private_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("a").join("b").join("m3.sqlite");
    let store = SqliteExecutionStore::open(&path).await?;
    create(&store).await?;
    assert!(path.is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            let file = std::path::PathBuf::from(file);
            if file.exists() {
                let mode = std::fs::metadata(&file)?.permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", file.display());
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn open_refuses_a_symlink_and_a_directory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let real = dir.path().join("real.sqlite");
    std::fs::write(&real, b"")?;
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&real, &link)?;
    let err = assert_code(
        SqliteExecutionStore::open(&link).await,
        "managed_input_invalid",
    );
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_code(
        SqliteExecutionStore::open(dir.path()).await,
        "managed_input_invalid",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_use_wal_full_sync_and_the_busy_timeout() -> TestResult {
    let fx = Fixture::new()?;
    let store = SqliteExecutionStore::open_with(
        &fx.path,
        SqliteStoreOptions::new()
            .busy_timeout(Duration::from_millis(1234))
            .clock(Arc::new(fx.clock.clone())),
    )
    .await?;
    let mut conn = store.pool().acquire().await?;
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await?;
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut *conn)
        .await?;
    assert_eq!(journal.to_lowercase(), "wal");
    assert_eq!(synchronous, 2, "FULL");
    assert_eq!(busy, 1234);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn store_is_object_safe_send_and_sync() -> TestResult {
    fn assert_send_sync<T: Send + Sync + 'static>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let fx = Fixture::new()?;
    let store: Arc<dyn ExecutionStore> = Arc::new(fx.open().await?);
    assert_send_sync(&store);
    let record = create(store.as_ref()).await?;
    let future = store.get_execution(&record.execution_id);
    assert_send(&future);
    assert!(future.await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_append_only_in_the_database() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let updated = sqlx::query("UPDATE m3rs_execution_events SET kind = 'x' WHERE execution_id = ?")
        .bind(&record.execution_id)
        .execute(store.pool())
        .await;
    let err = updated.err().ok_or("update of an event succeeded")?;
    assert!(err.to_string().contains("append-only"), "{err}");
    Ok(())
}
