//! End-to-end: managed elicitation input through the async kit, the scripted
//! harness and the real `shipping` MCP server process (m3-fixtures). The shipping scenario
//! (one round, two rounds) runs on SQLite and on PostgreSQL.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, ExecutionTrace, SubmitOptions};
use m3_runtime::mcp::AttemptOutcome;
use m3_tests::runtime_support::{WAIT, address, call, kit, lifecycle, pending, shipping};
use m3_tests::store_support::TestDb;
use m3_types::{
    ElicitationRequest, ElicitationResponse, ExecutionOutcome, ExecutionStatus, HumanInput,
    ManagedInputStatus, OperationKind, ResponseMap,
};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

fn managed(era: &str) -> SubmitOptions {
    SubmitOptions::new()
        .server(shipping(SERVER, era))
        .tools(["shipping:book_shipment", "shipping:book_verified_shipment"])
        .human_input(HumanInput::Managed)
}

async fn one_round_accept(era: &str, backend: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(backend.location(dir.path()).unwrap()).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit(
            "Ask for the delivery address, then book the shipment.",
            managed(era),
        )
        .await
        .unwrap();
    let round = pending(&handle).await;
    assert_eq!(round.execution_id, handle.execution_id());
    assert_eq!(round.server, "shipping");
    assert_eq!(round.operation_kind, OperationKind::Tool);
    assert_eq!(round.operation_name, "book_shipment");
    let key = round.requests.keys().next().unwrap().clone();
    let ElicitationRequest::Form(form) = &round.requests[&key] else {
        panic!("form expected")
    };
    assert_eq!(form.message, "Enter the delivery address.");
    lifecycle(&handle, ExecutionStatus::WaitingForInput).await;

    handle
        .respond_elicitation(
            &round.round_id,
            address(&key, "Pune"),
            &format!("address-{}", round.round_id),
        )
        .await
        .unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    let trace = ExecutionTrace::of(&result).unwrap();
    assert!(
        trace
            .final_text
            .as_deref()
            .unwrap()
            .contains("Shipment booked.")
    );
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].logical_operation_id, round.logical_operation_id);
    match era {
        "modern" => assert_eq!(calls[0].attempts.len(), 2, "one retry carries the answer"),
        _ => assert_eq!(
            calls[0].attempts[0].rounds.len(),
            1,
            "one elicitation/create exchange"
        ),
    }
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
    assert_eq!(rounds[0].delivery_attempts, 1);
    assert_eq!(
        rounds[0].response_idempotency_key.as_deref(),
        Some(format!("address-{}", round.round_id).as_str())
    );
    assert!(handle.pending_elicitation().await.unwrap().is_none());

    let events = handle.events(None).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let request_at = kinds
        .iter()
        .position(|k| *k == "elicitation.request")
        .unwrap();
    let response_at = kinds
        .iter()
        .position(|k| *k == "elicitation.response")
        .unwrap();
    assert!(request_at < response_at, "{kinds:?}");
    assert_eq!(
        events[request_at].payload["round_id"],
        json!(round.round_id)
    );
    assert_eq!(
        events[response_at].payload["responses"],
        json!(rounds[0].redacted_responses)
    );
    let lifecycles: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e.kind == "execution.state_changed")
        .map(|e| &e.payload["lifecycle"])
        .collect();
    assert!(
        lifecycles.contains(&&json!("waiting_for_input")),
        "{lifecycles:?}"
    );
    assert_eq!(kinds.last(), Some(&"execution.finished"));
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_modern_era() {
    one_round_accept("modern", TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_legacy_era() {
    one_round_accept("legacy", TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_modern_era_on_postgres() {
    one_round_accept("modern", TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_legacy_era_on_postgres() {
    one_round_accept("legacy", TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rounds_form_then_url_make_one_logical_call_with_three_attempts() {
    two_rounds_form_then_url(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rounds_form_then_url_make_one_logical_call_with_three_attempts_on_postgres() {
    two_rounds_form_then_url(TestDb::Postgres).await;
}

async fn two_rounds_form_then_url(backend: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(backend.location(dir.path()).unwrap()).await.unwrap();
    let agent = kit
        .agents([call("book_verified_shipment")])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit("Book a verified shipment.", managed("modern"))
        .await
        .unwrap();

    let first = pending(&handle).await;
    assert!(matches!(
        first.requests["shipping_address"],
        ElicitationRequest::Form(_)
    ));
    handle
        .respond_elicitation(
            &first.round_id,
            address("shipping_address", "Pune"),
            "first",
        )
        .await
        .unwrap();

    let second = pending(&handle).await;
    assert_ne!(second.round_id, first.round_id);
    assert_eq!(second.logical_operation_id, first.logical_operation_id);
    let ElicitationRequest::Url(url) = &second.requests["verification"] else {
        panic!("URL request expected")
    };
    assert!(url.url.starts_with("https://example.test/verify/"));
    let answer =
        ResponseMap::from([("verification".to_owned(), ElicitationResponse::accept_url())]);
    handle
        .respond_elicitation(&second.round_id, answer, "second")
        .await
        .unwrap();

    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    let trace = ExecutionTrace::of(&result).unwrap();
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical tool call");
    assert_eq!(calls[0].attempts.len(), 3, "three wire attempts");
    assert!(matches!(
        calls[0].attempts[2].outcome,
        AttemptOutcome::Complete {
            is_error: false,
            ..
        }
    ));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(
        rounds.iter().map(|r| r.round_index).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(
        rounds
            .iter()
            .all(|r| r.status == ManagedInputStatus::Resolved)
    );
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_and_cancel_answers_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    for (answer, expected) in [
        (ElicitationResponse::decline(), "declined"),
        (ElicitationResponse::cancel(), "cancelled"),
    ] {
        let handle = agent
            .submit("Book a shipment.", managed("modern"))
            .await
            .unwrap();
        let round = pending(&handle).await;
        let responses = ResponseMap::from([("shipping_address".to_owned(), answer)]);
        handle
            .respond_elicitation(&round.round_id, responses, "answer")
            .await
            .unwrap();
        let result = handle.result(Some(WAIT)).await.unwrap();
        // The tool reports the refusal; the execution itself completes.
        assert_eq!(result.outcome(), Some(ExecutionOutcome::Completed));
        let trace = ExecutionTrace::of(&result).unwrap();
        assert!(
            trace.final_text.as_deref().unwrap().contains(expected),
            "{:?}",
            trace.final_text
        );
        assert!(matches!(
            trace.operations[0].last_attempt().unwrap().outcome,
            AttemptOutcome::Complete { is_error: true, .. }
        ));
        assert_eq!(
            handle.rounds().await.unwrap()[0].status,
            ManagedInputStatus::Resolved
        );
    }
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_content_is_rejected_and_the_round_stays_pending() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book a shipment.", managed("modern"))
        .await
        .unwrap();
    let round = pending(&handle).await;

    let mut bad = serde_json::Map::new();
    bad.insert("street".into(), json!(12));
    let bad = ResponseMap::from([(
        "shipping_address".to_owned(),
        ElicitationResponse::accept(bad),
    )]);
    let error = handle
        .respond_elicitation(&round.round_id, bad, "bad")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid", "{error}");
    let wrong_key = address("not_a_key", "Pune");
    let error = handle
        .respond_elicitation(&round.round_id, wrong_key, "bad-key")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid", "{error}");
    let error = handle
        .respond_elicitation("", address("shipping_address", "Pune"), "k")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid");
    let error = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid");
    let error = handle
        .respond_elicitation("no-such-round", address("shipping_address", "Pune"), "k")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "not_found");

    let still = handle.pending_elicitation().await.unwrap().unwrap();
    assert_eq!(still.round_id, round.round_id);
    lifecycle(&handle, ExecutionStatus::WaitingForInput).await;

    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "good")
        .await
        .unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_is_idempotent_and_the_same_key_with_another_payload_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book a shipment.", managed("modern"))
        .await
        .unwrap();
    let round = pending(&handle).await;
    let key = format!("address-{}", round.round_id);
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), &key)
        .await
        .unwrap();
    // A retry after a lost acknowledgement reuses key and payload.
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), &key)
        .await
        .unwrap();
    let error = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Mumbai"), &key)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_conflict", "{error}");
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Completed));
    let trace = ExecutionTrace::of(&result).unwrap();
    assert_eq!(
        trace.tool_calls().next().unwrap().attempts.len(),
        2,
        "delivered exactly once"
    );
    // A replay after resolution still returns the stored record.
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), &key)
        .await
        .unwrap();
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_mode_finishes_failed_with_unexpected_elicitation() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit(
            "Book a shipment.",
            SubmitOptions::new().server(shipping(SERVER, "modern")),
        )
        .await
        .unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let error = result.error.unwrap();
    assert_eq!(error.code.as_str(), "protocol_error");
    assert_eq!(error.details["reason"], json!("unexpected_elicitation"));
    assert!(handle.pending_elicitation().await.unwrap().is_none());
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_limit_counts_rounds_per_execution() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit
        .agents([call("book_verified_shipment")])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit("Book.", managed("modern").elicitation_round_limit(1))
        .await
        .unwrap();
    let round = pending(&handle).await;
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "k")
        .await
        .unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    assert_eq!(
        result.error.unwrap().code.as_str(),
        "elicitation_round_limit"
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds.len(), 1, "the second round is never persisted");
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_round_deadline_fails_the_round_with_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit(
            "Book.",
            managed("modern").input_deadline(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let round = pending(&handle).await;
    assert!(round.deadline.is_some());
    let result = handle.result(Some(WAIT)).await.unwrap();
    let error = result.error.clone().unwrap();
    assert_eq!(error.code.as_str(), "timeout");
    assert_eq!(error.details["reason"], json!("elicitation_deadline"));
    assert_eq!(result.outcome(), Some(ExecutionOutcome::TimedOut));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(rounds[0].failure_code.as_deref(), Some("timeout"));
    let late = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(late.code(), "managed_input_state", "{late}");
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_fails_the_round_as_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent.submit("Book.", managed("modern")).await.unwrap();
    let round = pending(&handle).await;
    handle.cancel().await.unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Cancelled));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(rounds[0].failure_code.as_deref(), Some("cancelled"));
    let late = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(late.code(), "managed_input_state");
    handle.cancel().await.unwrap(); // no-op once finished
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_timeout_ends_a_waiting_execution_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent
        .submit("Book.", managed("modern").timeout(Duration::from_secs(2)))
        .await
        .unwrap();
    pending(&handle).await;
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::TimedOut));
    assert_eq!(
        result.error.unwrap().details["reason"],
        json!("execution_timeout")
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(rounds[0].failure_code.as_deref(), Some("timeout"));
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_wait_timeout_leaves_the_execution_running() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent.submit("Book.", managed("modern")).await.unwrap();
    let round = pending(&handle).await;
    let error = handle
        .result(Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "timeout");
    assert_eq!(error.details()["wait_only"], json!(true));
    assert_eq!(
        handle
            .result(Some(Duration::ZERO))
            .await
            .unwrap_err()
            .code(),
        "invalid_argument"
    );
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "k")
        .await
        .unwrap();
    assert_eq!(
        handle.result(Some(WAIT)).await.unwrap().outcome(),
        Some(ExecutionOutcome::Completed)
    );
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_misuse_is_a_model_validation_error() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let error = agent
        .submit("x", managed("modern").human_input("sometimes"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert!(error.message().contains("'fail' or 'managed'"), "{error}");
    let plan = m3_kit::ElicitationPlan::new(vec![address("shipping_address", "Pune")]);
    let error = agent
        .submit("x", managed("modern").elicitation_plan(plan))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert!(
        error.message().contains("predefined elicitation plan"),
        "{error}"
    );
    let error = agent
        .submit("x", managed("modern").tools(["other:tool"]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument");

    let ephemeral = AsyncMcpTestKit::builder().build().await.unwrap();
    let agent = ephemeral.agents([call("book_shipment")]).unwrap().remove(0);
    let error = agent.submit("x", managed("modern")).await.unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert!(error.message().contains("persistent"), "{error}");

    let codex = serde_json::from_value(json!({"harness": "codex", "models": []})).unwrap();
    let error = kit.agents([codex]).unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert!(error.message().contains("models"), "{error}");

    let error = kit.attach("no-such-execution").await.unwrap_err();
    assert_eq!(error.code(), "not_found");
    ephemeral.close().await.unwrap();
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predefined_plan_answers_rounds_without_a_human() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let plan = m3_kit::ElicitationPlan::new(vec![address("shipping_address", "Pune")]);
    let handle = agent
        .submit(
            "Book.",
            SubmitOptions::new()
                .server(shipping(SERVER, "modern"))
                .elicitation_plan(plan),
        )
        .await
        .unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    kit.close().await.unwrap();
}
