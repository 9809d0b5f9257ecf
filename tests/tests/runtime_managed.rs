//! End-to-end: managed elicitation input through the async kit, the scripted
//! harness and the real `shipping` MCP server process (m3-fixtures). The shipping scenario
//! (one round, two rounds) runs on SQLite and on PostgreSQL.

use std::time::Duration;

use m3_kit::{AsyncAgent, AsyncExecutionHandle, AsyncMcpTestKit, SubmitOptions};
use m3_mcp::AttemptOutcome;
use m3_tests::runtime_support::{
    TempKit, TestResult, WAIT, accept, address, assert_late_response_refused, assert_refused, call,
    completes, ends, failure, final_result, first_call, first_round_failed, lifecycle, only,
    pending, resolved_rounds, shipping,
};
use m3_tests::store_support::TestDb;
use m3_types::{
    ElicitationRequest, ElicitationResponse, Error, ExecutionOutcome, ExecutionStatus, HumanInput,
    OperationKind, ResponseMap,
};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

fn managed(era: &str) -> SubmitOptions {
    SubmitOptions::new()
        .server(shipping(SERVER, era))
        .tools(["shipping:book_shipment", "shipping:book_verified_shipment"])
        .human_input(HumanInput::Managed)
}

/// A kit on SQLite whose scripted agent calls `shipping:<tool>`, and the execution it
/// submitted with `prompt` and `options`.
async fn submitted(
    tool: &str,
    prompt: &str,
    options: SubmitOptions,
) -> TestResult<(TempKit, AsyncExecutionHandle)> {
    submitted_on(TestDb::Sqlite, tool, prompt, options).await
}

/// As [`submitted`], with the store on `backend`.
async fn submitted_on(
    backend: TestDb,
    tool: &str,
    prompt: &str,
    options: SubmitOptions,
) -> TestResult<(TempKit, AsyncExecutionHandle)> {
    let setup = TempKit::on(backend).await?;
    let handle = setup.agent(call(tool))?.submit(prompt, options).await?;
    Ok((setup, handle))
}

/// The Pune address for the `shipping_address` key.
fn pune() -> ResponseMap {
    address("shipping_address", "Pune")
}

async fn one_round_accept(era: &str, backend: TestDb) -> TestResult {
    let prompt = "Ask for the delivery address, then book the shipment.";
    let (setup, handle) = submitted_on(backend, "book_shipment", prompt, managed(era)).await?;
    let round = pending(&handle).await;
    assert_eq!(round.execution_id, handle.execution_id());
    assert_eq!(round.server, "shipping");
    assert_eq!(round.operation_kind, OperationKind::Tool);
    assert_eq!(round.operation_name, "book_shipment");
    let key = round.requests.keys().next().ok_or("no request")?.clone();
    let ElicitationRequest::Form(form) = &round.requests[&key] else {
        return Err("form expected".into());
    };
    assert_eq!(form.message, "Enter the delivery address.");
    lifecycle(&handle, ExecutionStatus::WaitingForInput).await;

    let idempotency_key = format!("address-{}", round.round_id);
    handle
        .respond_elicitation(&round.round_id, address(&key, "Pune"), &idempotency_key)
        .await?;
    let trace = completes(&handle, WAIT).await?;
    let final_text = trace.final_text.as_deref().ok_or("no final text")?;
    assert!(final_text.contains("Shipment booked."), "{final_text}");
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
    let rounds = resolved_rounds(&handle, 1).await?;
    assert_eq!(rounds[0].delivery_attempts, 1);
    assert_eq!(
        rounds[0].response_idempotency_key.as_deref(),
        Some(idempotency_key.as_str())
    );
    assert!(handle.pending_elicitation().await?.is_none());

    let events = handle.events(None).await?;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let position = |kind: &str| {
        kinds
            .iter()
            .position(|k| *k == kind)
            .ok_or_else(|| format!("no {kind} event: {kinds:?}"))
    };
    let request_at = position("elicitation.request")?;
    let response_at = position("elicitation.response")?;
    assert!(request_at < response_at, "{kinds:?}");
    let request = &events[request_at].payload;
    assert_eq!(request["round_id"], json!(round.round_id));
    let response = &events[response_at].payload;
    assert_eq!(response["responses"], json!(rounds[0].redacted_responses));
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
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_modern_era() -> TestResult {
    one_round_accept("modern", TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_modern_era_on_postgres() -> TestResult {
    one_round_accept("modern", TestDb::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_legacy_era_on_postgres() -> TestResult {
    one_round_accept("legacy", TestDb::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_accept_legacy_era() -> TestResult {
    one_round_accept("legacy", TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rounds_form_then_url_make_one_logical_call_with_three_attempts() -> TestResult {
    two_rounds_form_then_url(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rounds_form_then_url_make_one_logical_call_with_three_attempts_on_postgres()
-> TestResult {
    two_rounds_form_then_url(TestDb::Postgres).await
}

async fn two_rounds_form_then_url(backend: TestDb) -> TestResult {
    let (setup, handle) = submitted_on(
        backend,
        "book_verified_shipment",
        "Book a verified shipment.",
        managed("modern"),
    )
    .await?;

    let first = pending(&handle).await;
    assert!(matches!(
        first.requests["shipping_address"],
        ElicitationRequest::Form(_)
    ));
    handle
        .respond_elicitation(&first.round_id, pune(), "first")
        .await?;

    let second = pending(&handle).await;
    assert_ne!(second.round_id, first.round_id);
    assert_eq!(second.logical_operation_id, first.logical_operation_id);
    let ElicitationRequest::Url(url) = &second.requests["verification"] else {
        return Err("URL request expected".into());
    };
    assert!(url.url.starts_with("https://example.test/verify/"));
    let answer =
        ResponseMap::from([("verification".to_owned(), ElicitationResponse::accept_url())]);
    handle
        .respond_elicitation(&second.round_id, answer, "second")
        .await?;

    let trace = completes(&handle, WAIT).await?;
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
    let rounds = resolved_rounds(&handle, 2).await?;
    assert_eq!(
        rounds.iter().map(|r| r.round_index).collect::<Vec<_>>(),
        vec![0, 1]
    );
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_and_cancel_answers_reach_the_server() -> TestResult {
    let setup = TempKit::new().await?;
    let agent = setup.agent(call("book_shipment"))?;
    for (answer, expected) in [
        (ElicitationResponse::decline(), "declined"),
        (ElicitationResponse::cancel(), "cancelled"),
    ] {
        let handle = agent.submit("Book a shipment.", managed("modern")).await?;
        let round = pending(&handle).await;
        let responses = ResponseMap::from([("shipping_address".to_owned(), answer)]);
        handle
            .respond_elicitation(&round.round_id, responses, "answer")
            .await?;
        // The tool reports the refusal; the execution itself completes.
        let trace = completes(&handle, WAIT).await?;
        let final_text = trace.final_text.as_deref().ok_or("no final text")?;
        assert!(final_text.contains(expected), "{final_text}");
        let (_, is_error) = final_result(&trace.operations[0])?;
        assert!(is_error, "the tool reports the refusal as an error");
        resolved_rounds(&handle, 1).await?;
    }
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_content_is_rejected_and_the_round_stays_pending() -> TestResult {
    let (setup, handle) = submitted("book_shipment", "Book a shipment.", managed("modern")).await?;
    let round = pending(&handle).await;
    let id = round.round_id.as_str();

    let bad = accept("shipping_address", [("street", json!(12))]);
    let invalid = "managed_input_invalid";
    assert_refused(&handle, id, bad, "bad", invalid).await?;
    let wrong_key = address("not_a_key", "Pune");
    assert_refused(&handle, id, wrong_key, "bad-key", invalid).await?;
    assert_refused(&handle, "", pune(), "k", invalid).await?;
    assert_refused(&handle, id, pune(), "", invalid).await?;
    assert_refused(&handle, "no-such-round", pune(), "k", "not_found").await?;

    let still = handle
        .pending_elicitation()
        .await?
        .ok_or("no pending round")?;
    assert_eq!(still.round_id, round.round_id);
    lifecycle(&handle, ExecutionStatus::WaitingForInput).await;

    handle.respond_elicitation(id, pune(), "good").await?;
    completes(&handle, WAIT).await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_is_idempotent_and_the_same_key_with_another_payload_conflicts() -> TestResult {
    let (setup, handle) = submitted("book_shipment", "Book a shipment.", managed("modern")).await?;
    let round = pending(&handle).await;
    let id = round.round_id.as_str();
    let key = format!("address-{id}");
    handle.respond_elicitation(id, pune(), &key).await?;
    // A retry after a lost acknowledgement reuses key and payload.
    handle.respond_elicitation(id, pune(), &key).await?;
    let mumbai = address("shipping_address", "Mumbai");
    assert_refused(&handle, id, mumbai, &key, "managed_input_conflict").await?;
    let trace = completes(&handle, WAIT).await?;
    let attempts = first_call(&trace)?.attempts.len();
    assert_eq!(attempts, 2, "delivered exactly once");
    // A replay after resolution still returns the stored record.
    handle.respond_elicitation(id, pune(), &key).await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_mode_finishes_failed_with_unexpected_elicitation() -> TestResult {
    let options = SubmitOptions::new().server(shipping(SERVER, "modern"));
    let (setup, handle) = submitted("book_shipment", "Book a shipment.", options).await?;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await?;
    failure(&result, "protocol_error", "unexpected_elicitation")?;
    assert!(handle.pending_elicitation().await?.is_none());
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_limit_counts_rounds_per_execution() -> TestResult {
    let options = managed("modern").elicitation_round_limit(1);
    let (setup, handle) = submitted("book_verified_shipment", "Book.", options).await?;
    let round = pending(&handle).await;
    handle
        .respond_elicitation(&round.round_id, pune(), "k")
        .await?;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await?;
    let error = result.error.ok_or("no error")?;
    assert_eq!(error.code.as_str(), "elicitation_round_limit");
    // One round: the second is never persisted.
    resolved_rounds(&handle, 1).await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_round_deadline_fails_the_round_with_timeout() -> TestResult {
    let options = managed("modern").input_deadline(Duration::from_millis(300));
    let (setup, handle) = submitted("book_shipment", "Book.", options).await?;
    let round = pending(&handle).await;
    assert!(round.deadline.is_some());
    let result = ends(&handle, WAIT, ExecutionOutcome::TimedOut).await?;
    failure(&result, "timeout", "elicitation_deadline")?;
    first_round_failed(&handle, "timeout").await?;
    assert_late_response_refused(&handle, &round.round_id).await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_fails_the_round_as_cancelled() -> TestResult {
    let (setup, handle) = submitted("book_shipment", "Book.", managed("modern")).await?;
    let round = pending(&handle).await;
    handle.cancel().await?;
    ends(&handle, WAIT, ExecutionOutcome::Cancelled).await?;
    first_round_failed(&handle, "cancelled").await?;
    assert_late_response_refused(&handle, &round.round_id).await?;
    handle.cancel().await?; // no-op once finished
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_timeout_ends_a_waiting_execution_timed_out() -> TestResult {
    let options = managed("modern").timeout(Duration::from_secs(2));
    let (setup, handle) = submitted("book_shipment", "Book.", options).await?;
    pending(&handle).await;
    let result = ends(&handle, WAIT, ExecutionOutcome::TimedOut).await?;
    let error = result.error.ok_or("no error")?;
    assert_eq!(error.details["reason"], json!("execution_timeout"));
    first_round_failed(&handle, "timeout").await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_wait_timeout_leaves_the_execution_running() -> TestResult {
    let (setup, handle) = submitted("book_shipment", "Book.", managed("modern")).await?;
    let round = pending(&handle).await;
    let Err(error) = handle.result(Some(Duration::from_millis(100))).await else {
        return Err("the result arrived before anyone answered".into());
    };
    assert_eq!(error.code(), "timeout");
    assert_eq!(error.details()["wait_only"], json!(true));
    let Err(error) = handle.result(Some(Duration::ZERO)).await else {
        return Err("a zero wait was accepted".into());
    };
    assert_eq!(error.code(), "invalid_argument");
    handle
        .respond_elicitation(&round.round_id, pune(), "k")
        .await?;
    ends(&handle, WAIT, ExecutionOutcome::Completed).await?;
    setup.close().await
}

/// The error refusing a submission with `options`.
async fn refused_submission(agent: &AsyncAgent, options: SubmitOptions) -> TestResult<Error> {
    match agent.submit("x", options).await {
        Ok(handle) => Err(format!("submission accepted: {}", handle.execution_id()).into()),
        Err(error) => Ok(error),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_misuse_is_a_model_validation_error() -> TestResult {
    let setup = TempKit::new().await?;
    let agent = setup.agent(call("book_shipment"))?;
    for (options, says) in [
        (
            managed("modern").human_input("sometimes"),
            "'fail' or 'managed'",
        ),
        (
            managed("modern").elicitation_plan(m3_kit::ElicitationPlan::new(vec![pune()])),
            "predefined elicitation plan",
        ),
    ] {
        let error = refused_submission(&agent, options).await?;
        assert_eq!(error.code(), "invalid_argument");
        assert!(error.message().contains(says), "{error}");
    }
    let error = refused_submission(&agent, managed("modern").tools(["other:tool"])).await?;
    assert_eq!(error.code(), "invalid_argument");

    let ephemeral = AsyncMcpTestKit::builder().build().await?;
    let agent = only(ephemeral.agents([call("book_shipment")])?)?;
    let error = refused_submission(&agent, managed("modern")).await?;
    assert_eq!(error.code(), "invalid_argument");
    assert!(error.message().contains("persistent"), "{error}");

    let codex = serde_json::from_value(json!({"harness": "codex", "models": []}))?;
    let Err(error) = setup.kit.agents([codex]) else {
        return Err("a codex selection without models was accepted".into());
    };
    assert_eq!(error.code(), "invalid_argument");
    assert!(error.message().contains("models"), "{error}");

    let Err(error) = setup.kit.attach("no-such-execution").await else {
        return Err("an unknown execution was attached".into());
    };
    assert_eq!(error.code(), "not_found");
    ephemeral.close().await?;
    setup.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predefined_plan_answers_rounds_without_a_human() -> TestResult {
    let plan = m3_kit::ElicitationPlan::new(vec![pune()]);
    let options = SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .elicitation_plan(plan);
    let (setup, handle) = submitted("book_shipment", "Book.", options).await?;
    completes(&handle, WAIT).await?;
    setup.close().await
}
