//! A SQLite store on a real full disk (a 2 MB tmpfs, filled and freed): every write that
//! cannot be committed fails with `storage_error` and leaves nothing behind, and once the
//! space is back the same store object (the same connections) writes again: a failed commit
//! rolls back and leaves its connection usable.
//!
//! Needs root to mount the tmpfs (scripts/test.sh runs as root in CI); it fails, never
//! skips, where mounting is impossible.

use std::time::Duration;

use m3_store::{
    AcquireLease, CreateRound, ExecutionStore, NewExecution, RenewLeases, SqliteExecutionStore,
    SqliteStoreOptions,
};
use m3_tests::disk_support::SmallDisk;
use m3_tests::store_support::address_round;
use m3_types::{Clock, SystemClock};
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const LEASE: Duration = Duration::from_secs(300);

/// A spec too big for whatever room the write-ahead log has left.
fn big_spec() -> serde_json::Value {
    json!({"prompt": "x".repeat(300 * 1024)})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_fails_on_a_full_disk_leaves_the_store_writable_once_space_is_back()
-> TestResult {
    let disk = SmallDisk::mount("2m");
    // One pooled connection: every write below runs on the connection the failed commits used.
    let options = SqliteStoreOptions::new().max_connections(1);
    let store = SqliteExecutionStore::open_with(disk.path().join("m3.sqlite"), options).await?;
    let rounds = store.managed_input_store().await?;
    let held = store
        .create_execution(NewExecution::new(json!({"prompt": "held"})))
        .await?;
    let lease = store
        .acquire_lease(AcquireLease::new(&held.execution_id, "worker-1", LEASE))
        .await?
        .to_ref();

    disk.fill();
    let refused = store
        .create_execution(NewExecution::new(big_spec()).with_execution_id("too-big"))
        .await;
    let error = refused.err().ok_or("a write on a full disk must fail")?;
    assert!(error.is_storage(), "{error:?}");
    let renewal = store
        .renew_leases(RenewLeases::new(vec![lease.clone()], LEASE))
        .await;
    let error = renewal.err().ok_or("a renewal on a full disk must fail")?;
    assert!(error.is_storage(), "{error:?}");
    let round = CreateRound::new(
        address_round(&held.execution_id, "r1", SystemClock.now()),
        "worker-1",
        LEASE,
    );
    let error = rounds
        .create_round(round.clone())
        .await
        .err()
        .ok_or("a round written on a full disk must fail")?;
    assert!(error.is_storage(), "{error:?}");
    disk.free();

    // The same store, the same connections: everything writes again.
    let renewed = store
        .renew_leases(RenewLeases::new(vec![lease], LEASE))
        .await?;
    assert!(
        renewed.iter().all(Result::is_ok),
        "the lease is renewed: {renewed:?}"
    );
    let created = store
        .create_execution(NewExecution::new(json!({"prompt": "after"})))
        .await?;
    assert_eq!(created.sequence, 0);
    assert!(
        store.get_execution("too-big").await?.is_none(),
        "the failed write left nothing behind"
    );
    let stored = rounds.create_round(round).await?;
    assert_eq!(stored.pending.round_id, "r1");
    Ok(())
}
