//! The blocking kit: the seed's flow with `McpTestKit`, and the documented
//! panic when a blocking call is made from inside an async runtime.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::{ExecutionTrace, McpTestKit, SubmitOptions};
use m3_tests::runtime_support::{address, call, shipping};
use m3_types::{ExecutionOutcome, HumanInput, ManagedInputStatus};

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

#[test]
fn blocking_kit_answers_a_round_and_gets_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let kit = McpTestKit::builder().database(&db).build().unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit(
            "Ask for the delivery address, then book the shipment.",
            SubmitOptions::new()
                .server(shipping(SERVER, "auto"))
                .tools(["shipping:book_shipment"])
                .human_input(HumanInput::Managed),
        )
        .unwrap();
    let pending = handle
        .wait_for_pending(Duration::from_secs(30))
        .unwrap()
        .unwrap();
    handle
        .respond_elicitation(
            &pending.round_id,
            address("shipping_address", "Pune"),
            &format!("address-{}", pending.round_id),
        )
        .unwrap();
    let result = handle.result(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    assert!(
        ExecutionTrace::of(&result)
            .unwrap()
            .final_text
            .unwrap()
            .contains("Shipment booked.")
    );
    assert_eq!(
        handle.rounds().unwrap()[0].status,
        ManagedInputStatus::Resolved
    );
    let summaries = kit.executions().unwrap();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].pending_rounds, 0);
    kit.close().unwrap();

    // Reopening the same file reads the same execution and round.
    let again = McpTestKit::builder().database(&db).build().unwrap();
    let handle = again.attach(handle.execution_id()).unwrap();
    assert_eq!(
        handle.result(None).unwrap().outcome(),
        Some(ExecutionOutcome::Completed)
    );
    assert_eq!(handle.rounds().unwrap()[0].round_id, pending.round_id);
}

#[test]
fn dropping_the_blocking_kit_cancels_its_executions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let execution_id = {
        let kit = McpTestKit::builder().database(&db).build().unwrap();
        let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
        let handle = agent
            .submit(
                "Book.",
                SubmitOptions::new()
                    .server(shipping(SERVER, "modern"))
                    .human_input(HumanInput::Managed),
            )
            .unwrap();
        handle
            .wait_for_pending(Duration::from_secs(30))
            .unwrap()
            .unwrap();
        handle.execution_id().to_owned()
    };
    let kit = McpTestKit::builder().database(&db).build().unwrap();
    let handle = kit.attach(&execution_id).unwrap();
    let result = handle.result(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Cancelled));
    assert_eq!(
        handle.rounds().unwrap()[0].failure_code.as_deref(),
        Some("cancelled")
    );
}

#[tokio::test]
#[should_panic]
async fn blocking_calls_inside_an_async_runtime_panic() {
    let _ = McpTestKit::builder().build();
}
