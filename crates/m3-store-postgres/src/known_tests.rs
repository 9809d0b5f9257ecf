//! Writes decided on a known record at the estimated server time, on a real server
//! (`M3_TEST_POSTGRES_URL`): a known record another store object made stale, or an
//! estimate far from the server's clock, never decides an outcome; the write is decided
//! again on a fresh read, as without them.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes these
// lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use m3_types::{ManagedInputRecord, ManagedInputStatus};
use time::OffsetDateTime;

use crate::testing::isolated_options;
use crate::{PgManagedInputStore, PgStoreOptions};
use m3_store::conformance::{create_fresh_round, sample_round, sample_submission};
use m3_store::{CreateRound, LeaseRef, ManagedInputStore, RoundRef};

const LEASE: Duration = Duration::from_secs(30);

/// Two store objects on one fresh schema (as two processes would have).
async fn two_stores() -> (PgManagedInputStore, PgManagedInputStore) {
    let options: PgStoreOptions = isolated_options().unwrap();
    let first = PgManagedInputStore::open_with(options.clone())
        .await
        .unwrap();
    let second = PgManagedInputStore::open_with(options).await.unwrap();
    (first, second)
}

async fn create(store: &PgManagedInputStore, lease: Duration) -> (RoundRef, LeaseRef) {
    let created = create_fresh_round(store, lease).await.unwrap();
    (RoundRef::of(&created), LeaseRef::of(&created.lease))
}

/// The record `store` knows of `round`, if any.
fn known(store: &PgManagedInputStore, round: &RoundRef) -> Option<ManagedInputRecord> {
    store
        .shared()
        .rounds
        .get(round)
        .map(|known| known.record().clone())
}

/// The server's clock, read now.
async fn server_clock(store: &PgManagedInputStore) -> OffsetDateTime {
    sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&store.shared().pool)
        .await
        .unwrap()
}

fn near(a: OffsetDateTime, b: OffsetDateTime) -> bool {
    (a - b).abs() < time::Duration::seconds(5)
}

#[tokio::test]
async fn a_round_another_store_object_answered_is_delivered_after_a_fresh_read() {
    let (worker, responder) = two_stores().await;
    let (round, lease) = create(&worker, LEASE).await;
    assert_eq!(
        known(&worker, &round).unwrap().status,
        ManagedInputStatus::Pending
    );

    responder
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await
        .unwrap();
    // The worker's known record is now behind the row: the write falls back to reading.
    let started = worker.start_delivery(&round, &lease).await.unwrap();
    assert_eq!(started.status, ManagedInputStatus::DeliveryStarted);
    assert_eq!(known(&worker, &round).unwrap(), started);

    // A different answer through the stale object is refused as the rules refuse it on
    // the row, and the same answer is an idempotent replay.
    let other = m3_store::conformance::other_address("k-2");
    let through_stale = worker.submit_responses(&round, &lease, other.clone()).await;
    let through_fresh = responder.submit_responses(&round, &lease, other).await;
    assert_eq!(
        through_stale.map_err(|e| e.code()),
        through_fresh.map_err(|e| e.code())
    );
}

#[tokio::test]
async fn a_refusal_on_a_stale_known_record_is_decided_again_on_the_row() {
    let (worker, renewer) = two_stores().await;
    let (round, lease) = create(&worker, Duration::from_secs(1)).await;
    // Another store object renews the lease; the worker still knows the short one.
    renewer.renew(&round, &lease, LEASE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(known(&worker, &round).unwrap().lease.expires_at < server_clock(&worker).await);

    // On the known record the lease has expired; on the row it has not.
    let submitted = worker
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await
        .unwrap();
    assert_eq!(submitted.status, ManagedInputStatus::ResponseValidated);
}

#[tokio::test]
async fn a_write_outside_the_estimates_window_is_decided_again_at_the_servers_time() {
    let (store, _) = two_stores().await;
    let (round, lease) = create(&store, LEASE).await;
    let skew = time::Duration::hours(1);

    // An estimate an hour ahead (a server clock stepped back since the last reading).
    let ahead = server_clock(&store).await + skew;
    store.shared().server_time.reset(ahead, Instant::now());
    let submitted = store
        .submit_responses(&round, &lease, sample_submission("k-1"))
        .await
        .unwrap();
    let server = server_clock(&store).await;
    assert!(
        near(submitted.updated_at, server),
        "{submitted:?} at {server}"
    );
    assert!(near(store.shared().server_time.estimate().now, server));

    // An estimate an hour behind, for a creation.
    let behind = server - skew;
    store.shared().server_time.reset(behind, Instant::now());
    let created = create_fresh_round(&store, LEASE).await.unwrap();
    let server = server_clock(&store).await;
    assert!(near(created.created_at, server), "{created:?} at {server}");
    assert!(near(store.shared().server_time.estimate().now, server));
}

#[tokio::test]
async fn a_creation_replayed_through_an_estimate_is_still_an_idempotent_replay() {
    let (store, other) = two_stores().await;
    let execution = m3_types::new_id();
    let request = CreateRound::new(sample_round(&execution, "round-1"), "worker-1", LEASE)
        .with_lease_token("token-1");
    let first = store.create_round(request.clone()).await.unwrap();
    let replayed = other.create_round(request).await.unwrap();
    assert_eq!(first, replayed);
}
