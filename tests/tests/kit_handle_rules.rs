//! Handle rules: more than one pending round makes `pending_elicitation()` a state
//! error, and `respond_elicitation` on a `human_input = fail` handle is
//! `invalid_argument` (nothing is written), and an answer presents the current lease even
//! when the round changed owner after the handle saw it.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_store::conformance::sample_round;
use m3_store::{ClaimRound, CreateRound, ManagedInputStore, RoundRef, SqliteManagedInputStore};
use m3_tests::runtime_support::{WAIT, address, call, kit, pending, shipping};
use m3_types::{DeliveryState, HumanInput, ManagedInputStatus};

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

fn options(human_input: HumanInput) -> SubmitOptions {
    SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .tools(["shipping:book_shipment"])
        .human_input(human_input)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pending_rounds_make_pending_elicitation_a_state_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m3.sqlite");
    let kit = kit(&path).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book a shipment.", options(HumanInput::Managed))
        .await
        .unwrap();
    let first = pending(&handle).await;

    // A second pending round of the same execution, written by another store.
    let store = SqliteManagedInputStore::open(&path).await.unwrap();
    let mut second = first.clone();
    second.round_id = format!("{}-second", first.round_id);
    store
        .create_round(
            CreateRound::new(second, "other-owner", Duration::from_secs(60)).with_round_index(7),
        )
        .await
        .unwrap();

    let error = handle.pending_elicitation().await.unwrap_err();
    assert_eq!(error.code(), "managed_input_state", "{error}");
    assert_eq!(
        error.details()["pending_rounds"],
        2,
        "{:?}",
        error.details()
    );

    handle.cancel().await.unwrap();
    handle.result(Some(WAIT)).await.unwrap();
    drop(store);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responding_on_a_fail_handle_is_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book a shipment.", options(HumanInput::Fail))
        .await
        .unwrap();
    let error = handle
        .respond_elicitation("round-1", address("shipping_address", "Pune"), "key-1")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument", "{error}");
    assert!(handle.pending_elicitation().await.unwrap().is_none());
    handle.result(Some(WAIT)).await.unwrap();
    let rounds = handle.rounds().await.unwrap();
    assert!(
        rounds
            .iter()
            .all(|r| r.status != ManagedInputStatus::Resolved),
        "nothing was answered: {rounds:?}"
    );
    kit.close().await.unwrap();
}

/// `respond_elicitation` presents the lease the handle saw on the pending round; when another
/// owner took the round over since, the store refuses that lease and the handle answers
/// under the current one instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_after_the_round_changed_owner_uses_the_current_lease() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m3.sqlite");
    // Nothing runs the execution: the round below is this test's.
    let kit = AsyncMcpTestKit::builder()
        .database(&path)
        .embedded_worker(false)
        .recovery_sweep(None)
        .recover_on_open(false)
        .build()
        .await
        .unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book a shipment.", options(HumanInput::Managed))
        .await
        .unwrap();
    let store = SqliteManagedInputStore::open(&path).await.unwrap();
    let pending = sample_round(handle.execution_id(), "round-1");
    let created = store
        .create_round(CreateRound::new(
            pending,
            "first-owner",
            Duration::from_millis(50),
        ))
        .await
        .unwrap();
    let seen = handle.pending_elicitation().await.unwrap().unwrap();
    assert_eq!(seen.round_id, "round-1");

    tokio::time::sleep(Duration::from_millis(100)).await;
    let round = RoundRef::of(&created);
    let claimed = store
        .claim_round(
            &round,
            ClaimRound::new("second-owner", Duration::from_secs(60))
                .with_expected_lease_token(created.lease.lease_token.clone())
                .with_delivery_state(DeliveryState::NotStarted),
        )
        .await
        .unwrap();
    assert_ne!(claimed.lease.lease_token, created.lease.lease_token);

    handle
        .respond_elicitation("round-1", address("shipping_address", "Pune"), "key-1")
        .await
        .unwrap();
    let answered = store.get_round(&round).await.unwrap().unwrap();
    assert_eq!(answered.status, ManagedInputStatus::ResponseValidated);
    assert_eq!(answered.lease.owner_id, "second-owner");
    drop(store);
    kit.close().await.unwrap();
}
