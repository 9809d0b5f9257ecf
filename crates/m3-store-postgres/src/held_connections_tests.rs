//! Kept connections on a real server (`M3_TEST_POSTGRES_URL`): a kept connection the server
//! ends costs at most one failed operation and is never kept again, and an operation
//! dropped mid-statement does not leave its connection in the cache.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes these
// lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use sqlx::{Connection, PgConnection};

use crate::PgManagedInputStore;
use crate::testing::{isolated_options, test_server_url};
use m3_store::conformance::{create_fresh_round, sample_submission};
use m3_store::{LeaseRef, ManagedInputStore, RoundRef};

/// Upper bound of every wait, so a hang fails the test instead.
const PATIENCE: Duration = Duration::from_secs(60);

const LEASE: Duration = Duration::from_secs(30);

/// A store in a fresh schema (pool of 4: up to 2 kept connections) and its first round.
async fn store_with_round() -> (PgManagedInputStore, String, RoundRef, LeaseRef) {
    let options = isolated_options().unwrap();
    let schema = options.schema().to_owned();
    let store = PgManagedInputStore::open_with(options).await.unwrap();
    let (round, lease) = new_round(&store).await.unwrap();
    (store, schema, round, lease)
}

/// Creates round 1 of a fresh execution, leased to `worker-1`.
async fn new_round(store: &PgManagedInputStore) -> m3_types::Result<(RoundRef, LeaseRef)> {
    let created = create_fresh_round(store, LEASE).await?;
    Ok((RoundRef::of(&created), LeaseRef::of(&created.lease)))
}

fn kept_count(store: &PgManagedInputStore) -> usize {
    store.shared().kept.kept_count()
}

/// The server process of the connection the store's next operation takes.
async fn next_connection_pid(store: &PgManagedInputStore) -> i32 {
    let mut conn = store.shared().connection().await.unwrap();
    let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn.in_use())
        .await;
    conn.settle_sqlx(&pid);
    conn.release();
    pid.unwrap()
}

async fn admin() -> PgConnection {
    PgConnection::connect(&test_server_url().unwrap())
        .await
        .unwrap()
}

/// Waits until the server has no process `pid` any more.
async fn gone(admin: &mut PgConnection, pid: i32) {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let alive: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                    .bind(pid)
                    .fetch_one(&mut *admin)
                    .await
                    .unwrap();
            if !alive {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the terminated backend exits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_the_server_ended_costs_at_most_one_failed_operation() {
    let (store, _, round, lease) = store_with_round().await;
    // The create's connection is kept, and the next operation takes it (and keeps it).
    assert_eq!(kept_count(&store), 1);
    let killed = next_connection_pid(&store).await;
    assert_eq!(kept_count(&store), 1);
    assert_eq!(
        next_connection_pid(&store).await,
        killed,
        "reused, not re-checked-out"
    );
    let mut admin = admin().await;
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(killed)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(terminated);
    gone(&mut admin, killed).await;

    let mut failures = Vec::new();
    for attempt in 0..5 {
        match store.renew(&round, &lease, LEASE).await {
            Ok(renewed) => assert_eq!(renewed.lease.lease_token, lease.lease_token),
            Err(error) => failures.push((attempt, error)),
        }
    }
    match failures.as_slice() {
        [] => {}
        [(0, error)] => {
            // The one failure is the first operation on the dead connection, a clear
            // storage error the caller may retry.
            assert_eq!(error.code(), "storage_error", "{error:?}");
        }
        more => panic!("the dead connection failed more than its first operation: {more:?}"),
    }
    assert_ne!(
        next_connection_pid(&store).await,
        killed,
        "the dead connection was kept"
    );
    let answered = store
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await
        .unwrap();
    assert_eq!(answered.status.as_str(), "response_validated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_mid_statement_does_not_keep_its_connection() {
    let (store, schema, round, lease) = store_with_round().await;
    assert_eq!(kept_count(&store), 1);
    // Another session holds the round's row lock, so the store's guarded UPDATE waits.
    let mut admin = admin().await;
    let mut locker = self::admin().await;
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    let lock = format!(
        "SELECT 1 FROM \"{schema}\".m3rs_rounds WHERE execution_id = $1 AND round_id = $2 FOR UPDATE"
    );
    sqlx::query(sqlx::AssertSqlSafe(lock))
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .execute(&mut locker)
        .await
        .unwrap();
    let writer = {
        let (store, round, lease) = (store.clone(), round.clone(), lease.clone());
        tokio::spawn(async move { store.renew(&round, &lease, LEASE).await })
    };
    tokio::time::timeout(PATIENCE, async {
        loop {
            let waiting: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE '%UPDATE m3rs_rounds%')",
            )
            .fetch_one(&mut admin)
            .await
            .unwrap();
            if waiting {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the store's UPDATE waits for the row lock");
    writer.abort();
    assert!(writer.await.unwrap_err().is_cancelled());
    // The connection with the UPDATE under way went back to the pool, not to the cache.
    assert_eq!(kept_count(&store), 0);
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();

    // Whether or not the dropped renewal reached the row, the round goes on.
    store.renew(&round, &lease, LEASE).await.unwrap();
    let answered = store
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await
        .unwrap();
    assert_eq!(answered.status.as_str(), "response_validated");
    assert_eq!(kept_count(&store), 1);
}

/// One round's lifecycle (create, answer, deliver, resolve) of a fresh execution.
async fn lifecycle(store: &PgManagedInputStore) -> m3_types::Result<()> {
    let (round, lease) = new_round(store).await?;
    store
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await?;
    store.start_delivery(&round, &lease).await?;
    store.mark_delivered(&round, &lease).await?;
    store.resolve(&round, &lease).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrent_writers_than_connections_all_finish() {
    // 16 writers on a pool of 4: writers wait for connections, kept ones included, and
    // announcements queued for the sender task need a connection of the pool too.
    let store = PgManagedInputStore::open_with(isolated_options().unwrap().max_connections(4))
        .await
        .unwrap();
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let store = store.clone();
        writers.spawn(async move {
            for _ in 0..3 {
                lifecycle(&store).await?;
            }
            Ok::<_, m3_types::Error>(())
        });
    }
    let finished = tokio::time::timeout(PATIENCE, async {
        while let Some(joined) = writers.join_next().await {
            joined.unwrap().unwrap();
        }
    })
    .await;
    assert!(finished.is_ok(), "concurrent writers did not finish");
    assert!(kept_count(&store) <= 2, "at most half the pool is kept");
}

/// A store object outliving its runtime (a program's last handle dropped after the runtime
/// ended) closes its kept connections instead of handing them to a pool that would need
/// the runtime to take them.
#[test]
fn a_store_dropped_after_its_runtime_ended_closes_its_kept_connections() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(async {
        let (store, _, _, _) = store_with_round().await;
        assert_eq!(kept_count(&store), 1);
        store
    });
    drop(runtime);
    assert!(tokio::runtime::Handle::try_current().is_err());
    drop(store);
}
