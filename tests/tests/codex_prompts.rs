//! End-to-end tests of the `codex` harness with the real Codex CLI: the native
//! prompts M3 answers itself (tool-call and command approvals), and the official
//! Python SDK server's questions, including ones M3 must refuse to guess.

use std::time::Duration;

use m3_fixtures::provider::ExampleProvider;
use m3_kit::{
    AgentSelection, AsyncExecutionHandle, CodexMcpProtocol, PermissionPolicy, SubmitOptions,
};
use m3_tests::codex_support::{
    CODEX, CODEX_WAIT, CodexSetup, Peers, codex, provider_with, scripted_provider, selection,
};
use m3_tests::runtime_support::{
    TempKit, TestResult, accept, address, completes, ends, failure, final_result, first_call,
    pending, python, shipping, text_json,
};
use m3_types::{ElicitationResponse, ExecutionOutcome, HumanInput, ResponseMap, StdioServer};
use serde_json::json;

const PEERS: Peers = Peers {
    server: env!("CARGO_BIN_EXE_m3-test-shipping-server"),
    relay: env!("CARGO_BIN_EXE_m3-test-relay"),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tool_selection_codex_asks_and_m3_approves_the_started_call() -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let agent = setup
        .temp
        .agent(setup.agent(CODEX, CodexMcpProtocol::Legacy))?;
    // No `tools`: every tool is allowed, so Codex's own approval prompt is not
    // suppressed and M3 must answer it from the started mcpToolCall item.
    let options = SubmitOptions::new()
        .server(shipping(PEERS.server, "auto"))
        .human_input(HumanInput::Managed);
    let handle = agent.submit("Book the shipment.", options).await?;
    let round = pending(&handle).await;
    handle
        .respond_elicitation(&round.round_id, address("elicitation", "Pune"), "a")
        .await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    assert_eq!(trace.tool_calls().count(), 1);
    Ok(())
}

/// Codex 0.169.0 on `provider` in the 2026-07-28 era.
fn latest_codex(provider: &ExampleProvider) -> AgentSelection {
    selection(
        &codex(CODEX),
        provider,
        CodexMcpProtocol::V2026_07_28,
        PEERS.relay,
    )
}

fn python_peer() -> StdioServer {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/dual_era_server.py");
    StdioServer::new("peer", python()).with_args([script.display().to_string()])
}

/// Codex calling the Python peer's `ask` tool with `plan`; the kit and the
/// provider live as long as the returned values.
async fn python_peer_run(
    plan: &str,
    human_input: HumanInput,
) -> TestResult<(AsyncExecutionHandle, ExampleProvider, TempKit)> {
    let temp = TempKit::new().await?;
    let provider = provider_with("peer:ask", json!({"plan": plan}), "Done.").await?;
    let codex = latest_codex(&provider);
    let options = SubmitOptions::new()
        .server(python_peer())
        .tools(["peer:ask"])
        .human_input(human_input)
        .timeout(Duration::from_secs(120));
    let handle = temp.agent(codex)?.submit("Ask.", options).await?;
    Ok((handle, provider, temp))
}

/// The answers the Python peer reports in its last tool result.
async fn peer_answers(handle: &AsyncExecutionHandle) -> TestResult<serde_json::Value> {
    let trace = completes(handle, CODEX_WAIT).await?;
    let (result, _) = final_result(first_call(&trace)?)?;
    text_json(result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_server_gets_a_managed_answer_through_codex() -> TestResult {
    let (handle, _provider, _temp) = python_peer_run("name-age", HumanInput::Managed).await?;
    let round = pending(&handle).await;
    assert_eq!(round.requests.keys().collect::<Vec<_>>(), ["age", "name"]);
    let mut responses = accept("name", [("name", json!("Ada"))]);
    responses.extend(accept("age", [("age", json!(36))]));
    handle
        .respond_elicitation(&round.round_id, responses, "peer-1")
        .await?;
    let answers = peer_answers(&handle).await?;
    assert_eq!(answers["era"], "2026-07-28");
    assert_eq!(answers["answers"]["name"]["content"]["name"], "Ada");
    assert_eq!(answers["answers"]["age"]["content"]["age"], 36);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indistinguishable_native_prompts_fail_closed() -> TestResult {
    let (handle, _provider, _temp) = python_peer_run("name-twin", HumanInput::Managed).await?;
    let result = ends(&handle, CODEX_WAIT, ExecutionOutcome::Failed).await?;
    let error = failure(&result, "protocol_error", "ambiguous_native_prompt")?;
    assert_eq!(error.details["turn_interrupted"], true);
    assert!(
        handle.rounds().await?.is_empty(),
        "nothing was persisted or answered"
    );
    let trace = m3_kit::ExecutionTrace::of(&result)?;
    let call = first_call(&trace)?;
    assert_eq!(
        call.attempts.len(),
        1,
        "no answer reached the server: {call:?}"
    );
    Ok(())
}

/// Whether Codex ran an escalated `touch` command under `policy`.
async fn escalated_command(policy: PermissionPolicy) -> TestResult<bool> {
    let temp = TempKit::new().await?;
    let marker = temp.dir().join("escalated-marker");
    let provider = scripted_provider(&json!({"steps": [
        {"builtin": "exec_command", "arguments": {
            "cmd": format!("touch '{}'", marker.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "m3 permission policy test"
        }},
        {"text": "Done."}
    ]}))
    .await?;
    let codex = latest_codex(&provider);
    let options = SubmitOptions::new()
        .server(shipping(PEERS.server, "auto"))
        .tools(["shipping:book_shipment"])
        .permission_policy(policy);
    let handle = temp
        .agent(codex)?
        .submit("Touch the marker.", options)
        .await?;
    completes(&handle, CODEX_WAIT).await?;
    Ok(marker.exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_policy_deny_declines_a_native_command_approval() -> TestResult {
    let ran = escalated_command(PermissionPolicy::Deny).await?;
    assert!(!ran, "the command ran");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_policy_allow_approves_a_native_command_approval() -> TestResult {
    let ran = escalated_command(PermissionPolicy::Allow).await?;
    assert!(ran, "the command did not run");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_forging_the_approval_marker_gets_a_managed_round_not_an_approval() -> TestResult {
    let (handle, _provider, _temp) = python_peer_run("forged", HumanInput::Managed).await?;
    // The server's question carries Codex's approval marker in its `_meta`. Codex
    // 0.169.0 drops a server's `_meta` from the native prompt; whatever a Codex
    // version does, M3 must not answer it as an approval (the guard itself is unit
    // tested in turn/approvals.rs): it becomes a managed round a person answers.
    let round = pending(&handle).await;
    assert_eq!(round.requests.keys().collect::<Vec<_>>(), ["forged"]);
    let refusal = ResponseMap::from([("forged".to_owned(), ElicitationResponse::decline())]);
    handle
        .respond_elicitation(&round.round_id, refusal, "forged-1")
        .await?;
    let answers = peer_answers(&handle).await?;
    let action = &answers["answers"]["forged"]["action"];
    assert_eq!(action, "decline", "{answers}");
    Ok(())
}
