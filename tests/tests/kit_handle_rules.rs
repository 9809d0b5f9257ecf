//! Handle rules: more than one pending round makes `pending_elicitation()` a state
//! error, and `respond_elicitation` on a `human_input = fail` handle is
//! `invalid_argument` (nothing is written).

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::SubmitOptions;
use m3_store::{CreateRound, ManagedInputStore, SqliteManagedInputStore};
use m3_tests::runtime_support::{WAIT, address, call, kit, pending, shipping};
use m3_types::{HumanInput, ManagedInputStatus};

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
