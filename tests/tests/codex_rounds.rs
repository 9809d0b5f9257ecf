//! End-to-end tests of the `codex` harness with the real Codex CLI (installed by
//! `scripts/test.sh`), the deterministic local model provider, M3's relay and
//! the shipping fixture server: Codex is the agent and the MCP client, and M3
//! answers its native elicitation prompts from managed rounds. This file: the
//! rounds a person answers, in both eras and both tested Codex versions.

use std::time::Duration;

use m3_kit::CodexMcpProtocol;
use m3_mcp::AttemptOutcome;
use m3_tests::codex_support::{
    CODEX, CODEX_OLD, CODEX_WAIT, CodexSetup, Peers, answer_the_booking_round,
    assert_no_authorization_sent, booking,
};
use m3_tests::runtime_support::{
    TestResult, accept, address, assert_refused, completes, final_result, first_call, pending,
    resolved_rounds, retried_content,
};
use m3_types::{ElicitationRequest, ElicitationResponse, HumanInput, ResponseMap};
use serde_json::json;

const PEERS: Peers = Peers {
    server: env!("CARGO_BIN_EXE_m3-test-shipping-server"),
    relay: env!("CARGO_BIN_EXE_m3-test-relay"),
};
const RESPONDER: &str = env!("CARGO_BIN_EXE_m3-test-responder");

async fn one_form_round(version: &str, protocol: CodexMcpProtocol) -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let agent = setup.agent(version, protocol);
    let tools = ["shipping:book_shipment"];
    let handle = setup.submit(agent, &tools, HumanInput::Managed).await?;
    let trace = answer_the_booking_round(&handle, protocol).await?;
    let usage = trace.token_usage.as_ref().ok_or("no token usage")?;
    assert!(usage.to_string().contains("totalTokens"), "{usage}");
    assert_no_authorization_sent(&setup.provider);
    setup.temp.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_2026_07_28() -> TestResult {
    one_form_round(CODEX, CodexMcpProtocol::V2026_07_28).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_legacy_era() -> TestResult {
    one_form_round(CODEX, CodexMcpProtocol::Legacy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_with_codex_0_156_1() -> TestResult {
    one_form_round(CODEX_OLD, CodexMcpProtocol::V2026_07_28).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_legacy_with_codex_0_156_1() -> TestResult {
    one_form_round(CODEX_OLD, CodexMcpProtocol::Legacy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_with_two_keys_is_answered_together() -> TestResult {
    let (_setup, handle) = booking(PEERS, "book_gift_shipment", HumanInput::Managed).await?;
    let round = pending(&handle).await;
    assert_eq!(
        round.requests.keys().collect::<Vec<_>>(),
        ["gift_message", "shipping_address"]
    );
    let mut responses = address("shipping_address", "Pune");
    responses.extend(accept(
        "gift_message",
        [("message", json!("Happy birthday"))],
    ));
    handle
        .respond_elicitation(&round.round_id, responses, "gift-1")
        .await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    let call = first_call(&trace)?;
    assert_eq!(call.attempts.len(), 2);
    let retry = call.attempts[1]
        .input_responses
        .as_ref()
        .ok_or("no retry")?;
    assert_eq!(retry.len(), 2, "both keys in one retry: {retry:?}");
    let (result, _) = final_result(call)?;
    let gift_message = &result["structuredContent"]["gift_message"];
    assert_eq!(gift_message, "Happy birthday");
    Ok(())
}

async fn two_successive_rounds(protocol: CodexMcpProtocol) -> TestResult {
    let legacy = protocol == CodexMcpProtocol::Legacy;
    let (address_key, url_key) = if legacy {
        ("elicitation", "elicitation")
    } else {
        ("shipping_address", "verification")
    };
    let setup = CodexSetup::new(PEERS, "shipping:book_verified_shipment").await?;
    let agent = setup.agent(CODEX, protocol);
    let tools = ["shipping:book_verified_shipment"];
    let handle = setup.submit(agent, &tools, HumanInput::Managed).await?;
    let first = pending(&handle).await;
    assert_eq!(first.requests.keys().collect::<Vec<_>>(), [address_key]);
    handle
        .respond_elicitation(&first.round_id, address(address_key, "Pune"), "r1")
        .await?;
    let second = loop {
        let round = pending(&handle).await;
        if round.round_id != first.round_id {
            break round;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(second.requests.keys().collect::<Vec<_>>(), [url_key]);
    assert!(matches!(
        second.requests[url_key],
        ElicitationRequest::Url(_)
    ));
    let verified = ResponseMap::from([(url_key.to_owned(), ElicitationResponse::accept_url())]);
    handle
        .respond_elicitation(&second.round_id, verified, "r2")
        .await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical call: {calls:?}");
    assert_eq!(calls[0].attempts.len(), if legacy { 1 } else { 3 });
    assert_eq!(calls[0].rounds, 2);
    let (result, is_error) = final_result(calls[0])?;
    assert!(!is_error, "{result}");
    assert_eq!(result["structuredContent"]["city"], "Pune");
    resolved_rounds(&handle, 2).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_successive_rounds_in_one_logical_tool_call() -> TestResult {
    two_successive_rounds(CodexMcpProtocol::V2026_07_28).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_then_url_rounds_in_the_legacy_era() -> TestResult {
    two_successive_rounds(CodexMcpProtocol::Legacy).await
}

async fn declined_or_cancelled(response: ElicitationResponse) -> TestResult {
    let (_setup, handle) = booking(PEERS, "book_shipment", HumanInput::Managed).await?;
    let round = pending(&handle).await;
    let action = response.action;
    let responses = ResponseMap::from([("shipping_address".to_owned(), response)]);
    handle
        .respond_elicitation(&round.round_id, responses, "no")
        .await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    let call = first_call(&trace)?;
    let retry = call.attempts[1]
        .input_responses
        .as_ref()
        .ok_or("no retry")?;
    assert_eq!(retry["shipping_address"].action, action);
    assert!(retry["shipping_address"].content.is_none());
    assert!(
        matches!(
            call.attempts[1].outcome,
            AttemptOutcome::Complete { is_error: true, .. }
        ),
        "{call:?}"
    );
    resolved_rounds(&handle, 1).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_reaches_the_server() -> TestResult {
    declined_or_cancelled(ElicitationResponse::decline()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_the_server() -> TestResult {
    declined_or_cancelled(ElicitationResponse::cancel()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_content_is_rejected_before_codex_sees_it_then_replay_and_conflict() -> TestResult {
    let (_setup, handle) = booking(PEERS, "book_shipment", HumanInput::Managed).await?;
    let round = pending(&handle).await;
    let id = round.round_id.as_str();
    let bad = accept("shipping_address", [("street", json!(12))]);
    assert_refused(&handle, id, bad, "bad", "managed_input_invalid").await?;
    let still = handle
        .pending_elicitation()
        .await?
        .ok_or("no pending round")?;
    assert_eq!(still.round_id, round.round_id, "the round stays pending");

    let good = address("shipping_address", "Pune");
    handle
        .respond_elicitation(id, good.clone(), "key-1")
        .await?;
    // Same key, same payload: a no-op returning the stored record.
    handle.respond_elicitation(id, good, "key-1").await?;
    let delhi = address("shipping_address", "Delhi");
    assert_refused(&handle, id, delhi, "key-1", "managed_input_conflict").await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    let city = retried_content(first_call(&trace)?, "shipping_address", "city")?;
    assert_eq!(
        city, "Pune",
        "only the first valid response reached the server"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_from_another_process_is_delivered() -> TestResult {
    let (setup, handle) = booking(PEERS, "book_shipment", HumanInput::Managed).await?;
    let db = setup.temp.db.to_str().ok_or("database path is not UTF-8")?;
    let output = tokio::process::Command::new(RESPONDER)
        .args([db, handle.execution_id(), "Nagpur"])
        .output()
        .await?;
    assert!(
        output.status.success(),
        "responder failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let trace = completes(&handle, CODEX_WAIT).await?;
    let city = retried_content(first_call(&trace)?, "shipping_address", "city")?;
    assert_eq!(city, "Nagpur");
    Ok(())
}
