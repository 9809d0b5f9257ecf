//! End-to-end tests of the `codex` harness with the real Codex CLI (installed by
//! `scripts/test.sh`), the deterministic local model provider, M3's relay and
//! the shipping fixture server: Codex is the agent and the MCP client, and M3
//! answers its native elicitation prompts from managed rounds.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use m3_fixtures::provider::{ExampleProvider, ProviderScript};
use m3_kit::{
    AgentSelection, AsyncExecutionHandle, AsyncMcpTestKit, CodexMcpProtocol, ExecutionTrace,
    PermissionPolicy, SubmitOptions,
};
use m3_runtime::mcp::AttemptOutcome;
use m3_tests::codex_support::{
    CODEX, CODEX_OLD, codex, pid_recording_codex, provider, provider_with, selection,
};
use m3_tests::runtime_support::{WAIT, address, kit, pending, python, shipping};
use m3_types::StdioServer;
use m3_types::{
    ElicitationResponse, ExecutionOutcome, ExecutionResult, HumanInput, ManagedInputStatus,
    ResponseMap,
};
use serde_json::{Map, json};

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");
const RELAY: &str = env!("CARGO_BIN_EXE_m3-test-relay");
const RESPONDER: &str = env!("CARGO_BIN_EXE_m3-test-responder");
const WORKER: &str = env!("CARGO_BIN_EXE_m3-test-worker");

/// Codex needs a moment longer than the scripted agent (app-server start-up).
const CODEX_WAIT: Duration = Duration::from_secs(90);

struct Setup {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    kit: AsyncMcpTestKit,
    provider: ExampleProvider,
}

async fn setup(target: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m3.sqlite");
    let kit = kit(&db).await.unwrap();
    let provider = provider(target, "Shipment booked.").await;
    Setup {
        _dir: dir,
        db,
        kit,
        provider,
    }
}

impl Setup {
    fn agent(&self, version: &str, protocol: CodexMcpProtocol) -> AgentSelection {
        selection(&codex(version), &self.provider, protocol, RELAY)
    }

    async fn submit(
        &self,
        agent: AgentSelection,
        tools: &[&str],
        human_input: HumanInput,
    ) -> AsyncExecutionHandle {
        let agent = self.kit.agents([agent]).unwrap().remove(0);
        agent
            .submit(
                "Ask for the delivery address, then book the shipment.",
                SubmitOptions::new()
                    .server(shipping(SERVER, "auto"))
                    .tools(tools.iter().copied())
                    .human_input(human_input)
                    .timeout(Duration::from_secs(120)),
            )
            .await
            .unwrap()
    }
}

/// Codex 0.169.0 in the 2026-07-28 era calling `shipping:<tool>`, the only selected tool.
async fn booking(tool: &str, human_input: HumanInput) -> (Setup, AsyncExecutionHandle) {
    let target = format!("shipping:{tool}");
    let setup = setup(&target).await;
    let handle = setup
        .submit(
            setup.agent(CODEX, CodexMcpProtocol::V2026_07_28),
            &[target.as_str()],
            human_input,
        )
        .await;
    (setup, handle)
}

fn completed(result: &ExecutionResult) -> ExecutionTrace {
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    ExecutionTrace::of(result).unwrap()
}

fn no_authorization_sent(provider: &ExampleProvider) {
    let requests = provider.requests();
    assert!(!requests.is_empty(), "codex never asked the provider");
    for request in &requests {
        assert!(
            !request.headers.contains_key("authorization"),
            "codex sent an authorization header"
        );
    }
}

async fn one_form_round(version: &str, protocol: CodexMcpProtocol) {
    let setup = setup("shipping:book_shipment").await;
    let handle = setup
        .submit(
            setup.agent(version, protocol),
            &["shipping:book_shipment"],
            HumanInput::Managed,
        )
        .await;
    let round = pending(&handle).await;
    assert_eq!(round.server, "shipping");
    assert_eq!(round.operation_name, "book_shipment");
    assert_eq!(
        round.requests.keys().collect::<Vec<_>>(),
        [if protocol == CodexMcpProtocol::Legacy {
            "elicitation"
        } else {
            "shipping_address"
        }]
    );
    let key = round.requests.keys().next().unwrap().clone();
    handle
        .respond_elicitation(
            &round.round_id,
            address(&key, "Pune"),
            &format!("address-{}", round.round_id),
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    assert_eq!(trace.harness, "codex");
    assert_eq!(trace.final_text.as_deref(), Some("Shipment booked."));
    let usage = trace
        .token_usage
        .as_ref()
        .expect("codex reported token usage");
    assert!(usage.to_string().contains("totalTokens"), "{usage}");
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical tool call: {calls:?}");
    let call = calls[0];
    assert_eq!(call.operation_name, "book_shipment");
    match protocol {
        CodexMcpProtocol::Legacy => {
            assert_eq!(call.attempts.len(), 1);
            let exchange = &call.attempts[0].rounds[0];
            assert_eq!(
                exchange.responses.as_ref().unwrap()["elicitation"]
                    .content
                    .as_ref()
                    .unwrap()["city"],
                "Pune"
            );
        }
        _ => {
            assert_eq!(call.attempts.len(), 2, "{call:?}");
            let retry = call.attempts[1].input_responses.as_ref().unwrap();
            assert_eq!(
                retry["shipping_address"].content.as_ref().unwrap()["city"],
                "Pune"
            );
        }
    }
    assert!(matches!(
        call.attempts.last().unwrap().outcome,
        AttemptOutcome::Complete {
            is_error: false,
            ..
        }
    ));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
    no_authorization_sent(&setup.provider);
    setup.kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_2026_07_28() {
    one_form_round(CODEX, CodexMcpProtocol::V2026_07_28).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_legacy_era() {
    one_form_round(CODEX, CodexMcpProtocol::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_with_codex_0_156_1() {
    one_form_round(CODEX_OLD, CodexMcpProtocol::V2026_07_28).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_form_round_legacy_with_codex_0_156_1() {
    one_form_round(CODEX_OLD, CodexMcpProtocol::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_with_two_keys_is_answered_together() {
    let (_setup, handle) = booking("book_gift_shipment", HumanInput::Managed).await;
    let round = pending(&handle).await;
    assert_eq!(
        round.requests.keys().collect::<Vec<_>>(),
        ["gift_message", "shipping_address"]
    );
    let mut responses = address("shipping_address", "Pune");
    let mut message = Map::new();
    message.insert("message".into(), json!("Happy birthday"));
    responses.insert("gift_message".into(), ElicitationResponse::accept(message));
    handle
        .respond_elicitation(&round.round_id, responses, "gift-1")
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    assert_eq!(call.attempts.len(), 2);
    let retry = call.attempts[1].input_responses.as_ref().unwrap();
    assert_eq!(retry.len(), 2, "both keys in one retry: {retry:?}");
    let AttemptOutcome::Complete { result, .. } = &call.attempts[1].outcome else {
        panic!("not complete: {call:?}")
    };
    assert_eq!(
        result["structuredContent"]["gift_message"],
        "Happy birthday"
    );
}

async fn two_successive_rounds(protocol: CodexMcpProtocol) {
    let legacy = protocol == CodexMcpProtocol::Legacy;
    let (address_key, url_key) = if legacy {
        ("elicitation", "elicitation")
    } else {
        ("shipping_address", "verification")
    };
    let setup = setup("shipping:book_verified_shipment").await;
    let handle = setup
        .submit(
            setup.agent(CODEX, protocol),
            &["shipping:book_verified_shipment"],
            HumanInput::Managed,
        )
        .await;
    let first = pending(&handle).await;
    assert_eq!(first.requests.keys().collect::<Vec<_>>(), [address_key]);
    handle
        .respond_elicitation(&first.round_id, address(address_key, "Pune"), "r1")
        .await
        .unwrap();
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
        m3_types::ElicitationRequest::Url(_)
    ));
    handle
        .respond_elicitation(
            &second.round_id,
            ResponseMap::from([(url_key.to_owned(), ElicitationResponse::accept_url())]),
            "r2",
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical call: {calls:?}");
    assert_eq!(calls[0].attempts.len(), if legacy { 1 } else { 3 });
    assert_eq!(calls[0].rounds, 2);
    let AttemptOutcome::Complete { result, is_error } = &calls[0].last_attempt().unwrap().outcome
    else {
        panic!("not complete: {calls:?}")
    };
    assert!(!is_error, "{result}");
    assert_eq!(result["structuredContent"]["city"], "Pune");
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds.len(), 2);
    assert!(
        rounds
            .iter()
            .all(|r| r.status == ManagedInputStatus::Resolved)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_successive_rounds_in_one_logical_tool_call() {
    two_successive_rounds(CodexMcpProtocol::V2026_07_28).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_then_url_rounds_in_the_legacy_era() {
    two_successive_rounds(CodexMcpProtocol::Legacy).await;
}

async fn declined_or_cancelled(response: ElicitationResponse) {
    let (_setup, handle) = booking("book_shipment", HumanInput::Managed).await;
    let round = pending(&handle).await;
    let action = response.action;
    handle
        .respond_elicitation(
            &round.round_id,
            ResponseMap::from([("shipping_address".to_owned(), response)]),
            "no",
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    let retry = call.attempts[1].input_responses.as_ref().unwrap();
    assert_eq!(retry["shipping_address"].action, action);
    assert!(retry["shipping_address"].content.is_none());
    assert!(
        matches!(
            call.attempts[1].outcome,
            AttemptOutcome::Complete { is_error: true, .. }
        ),
        "{call:?}"
    );
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Resolved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_reaches_the_server() {
    declined_or_cancelled(ElicitationResponse::decline()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_the_server() {
    declined_or_cancelled(ElicitationResponse::cancel()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_content_is_rejected_before_codex_sees_it_then_replay_and_conflict() {
    let (_setup, handle) = booking("book_shipment", HumanInput::Managed).await;
    let round = pending(&handle).await;
    let mut bad = Map::new();
    bad.insert("street".into(), json!(12));
    let error = handle
        .respond_elicitation(
            &round.round_id,
            ResponseMap::from([(
                "shipping_address".to_owned(),
                ElicitationResponse::accept(bad),
            )]),
            "bad",
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_invalid");
    assert_eq!(
        handle
            .pending_elicitation()
            .await
            .unwrap()
            .unwrap()
            .round_id,
        round.round_id,
        "the round stays pending"
    );

    let good = address("shipping_address", "Pune");
    handle
        .respond_elicitation(&round.round_id, good.clone(), "key-1")
        .await
        .unwrap();
    // Same key, same payload: a no-op returning the stored record.
    handle
        .respond_elicitation(&round.round_id, good, "key-1")
        .await
        .unwrap();
    let error = handle
        .respond_elicitation(
            &round.round_id,
            address("shipping_address", "Delhi"),
            "key-1",
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_conflict");
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    let retry = call.attempts[1].input_responses.as_ref().unwrap();
    assert_eq!(
        retry["shipping_address"].content.as_ref().unwrap()["city"],
        "Pune",
        "only the first valid response reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_from_another_process_is_delivered() {
    let (setup, handle) = booking("book_shipment", HumanInput::Managed).await;
    let output = tokio::process::Command::new(RESPONDER)
        .args([setup.db.to_str().unwrap(), handle.execution_id(), "Nagpur"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "responder failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    let retry = call.attempts[1].input_responses.as_ref().unwrap();
    assert_eq!(
        retry["shipping_address"].content.as_ref().unwrap()["city"],
        "Nagpur"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_input_fail_interrupts_the_turn() {
    let (_setup, handle) = booking("book_shipment", HumanInput::Fail).await;
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "protocol_error");
    assert_eq!(error.details["reason"], "unexpected_elicitation");
    assert_eq!(error.details["turn_interrupted"], true);
    assert!(handle.rounds().await.unwrap().is_empty());
    let trace = ExecutionTrace::of(&result).unwrap();
    let call = trace.tool_calls().next().unwrap();
    assert_eq!(call.attempts.len(), 1, "no retry was sent: {call:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_selection_is_never_called() {
    let setup = setup("shipping:quote").await;
    let handle = setup
        .submit(
            setup.agent(CODEX, CodexMcpProtocol::V2026_07_28),
            &["shipping:book_shipment"],
            HumanInput::Managed,
        )
        .await;
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    assert_eq!(
        trace.tool_calls().count(),
        0,
        "no tools/call reached the server: {:?}",
        trace.operations
    );
    // Codex was not even offered the tool: the model's request lists only the selection.
    let first = &setup.provider.requests()[0];
    let tools = first.body["tools"].to_string();
    assert!(tools.contains("book_shipment"), "{tools}");
    assert!(!tools.contains("\"quote\""), "{tools}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_app_server_fails_the_round_and_refuses_a_late_response() {
    let setup = setup("shipping:book_shipment").await;
    let pid_dir = tempfile::tempdir().unwrap();
    let pid_file = pid_dir.path().join("codex.pid");
    let wrapper = pid_recording_codex(&codex(CODEX), pid_dir.path(), &pid_file);
    let handle = setup
        .submit(
            selection(
                &wrapper,
                &setup.provider,
                CodexMcpProtocol::V2026_07_28,
                RELAY,
            ),
            &["shipping:book_shipment"],
            HumanInput::Managed,
        )
        .await;
    let round = pending(&handle).await;
    kill(&pid_file);
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(
        rounds[0].failure_code.as_deref(),
        Some("recovery_unavailable")
    );
    let error = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_state");
    let trace = ExecutionTrace::of(&result).unwrap();
    let call = trace.tool_calls().next().unwrap();
    assert_eq!(call.attempts.len(), 1, "nothing was replayed: {call:?}");
}

fn kill(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untested_codex_version_is_refused() {
    let setup = setup("shipping:book_shipment").await;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("codex");
    std::fs::write(&fake, "#!/bin/sh\necho codex-cli 0.1.0\n").unwrap();
    std::process::Command::new("chmod")
        .args(["755", fake.to_str().unwrap()])
        .status()
        .unwrap();
    let handle = setup
        .submit(
            selection(&fake, &setup.provider, CodexMcpProtocol::V2026_07_28, RELAY),
            &["shipping:book_shipment"],
            HumanInput::Managed,
        )
        .await;
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let error = result.error.unwrap();
    assert_eq!(error.code.as_str(), "invalid_argument");
    assert_eq!(error.details["reason"], "untested_codex_version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_interrupts_the_turn_and_fails_the_round() {
    let (_setup, handle) = booking("book_shipment", HumanInput::Managed).await;
    let round = pending(&handle).await;
    handle.cancel().await.unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Cancelled));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(rounds[0].failure_code.as_deref(), Some("cancelled"));
    let error = handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tool_selection_codex_asks_and_m3_approves_the_started_call() {
    let setup = setup("shipping:book_shipment").await;
    let agent = setup
        .kit
        .agents([setup.agent(CODEX, CodexMcpProtocol::Legacy)])
        .unwrap()
        .remove(0);
    // No `tools`: every tool is allowed, so Codex's own approval prompt is not
    // suppressed and M3 must answer it from the started mcpToolCall item.
    let handle = agent
        .submit(
            "Book the shipment.",
            SubmitOptions::new()
                .server(shipping(SERVER, "auto"))
                .human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let round = pending(&handle).await;
    handle
        .respond_elicitation(&round.round_id, address("elicitation", "Pune"), "a")
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    assert_eq!(trace.tool_calls().count(), 1);
}

fn python_peer() -> StdioServer {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/dual_era_server.py");
    StdioServer::new("peer", python()).with_args([script.display().to_string()])
}

async fn python_peer_run(
    plan: &str,
    human_input: HumanInput,
) -> (AsyncExecutionHandle, ExampleProvider, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let provider = provider_with("peer:ask", json!({"plan": plan}), "Done.").await;
    let agent = kit
        .agents([selection(
            &codex(CODEX),
            &provider,
            CodexMcpProtocol::V2026_07_28,
            RELAY,
        )])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit(
            "Ask.",
            SubmitOptions::new()
                .server(python_peer())
                .tools(["peer:ask"])
                .human_input(human_input)
                .timeout(Duration::from_secs(120)),
        )
        .await
        .unwrap();
    (handle, provider, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_server_gets_a_managed_answer_through_codex() {
    let (handle, _provider, _dir) = python_peer_run("name-age", HumanInput::Managed).await;
    let round = pending(&handle).await;
    assert_eq!(round.requests.keys().collect::<Vec<_>>(), ["age", "name"]);
    let mut name = Map::new();
    name.insert("name".into(), json!("Ada"));
    let mut age = Map::new();
    age.insert("age".into(), json!(36));
    handle
        .respond_elicitation(
            &round.round_id,
            ResponseMap::from([
                ("name".to_owned(), ElicitationResponse::accept(name)),
                ("age".to_owned(), ElicitationResponse::accept(age)),
            ]),
            "peer-1",
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    let AttemptOutcome::Complete { result, .. } = &call.last_attempt().unwrap().outcome else {
        panic!("not complete: {call:?}")
    };
    let text = result["content"][0]["text"].as_str().unwrap();
    let answers: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(answers["era"], "2026-07-28");
    assert_eq!(answers["answers"]["name"]["content"]["name"], "Ada");
    assert_eq!(answers["answers"]["age"]["content"]["age"], 36);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indistinguishable_native_prompts_fail_closed() {
    let (handle, _provider, _dir) = python_peer_run("name-twin", HumanInput::Managed).await;
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "protocol_error");
    assert_eq!(error.details["reason"], "ambiguous_native_prompt");
    assert_eq!(error.details["turn_interrupted"], true);
    assert!(
        handle.rounds().await.unwrap().is_empty(),
        "nothing was persisted or answered"
    );
    let trace = ExecutionTrace::of(&result).unwrap();
    let call = trace.tool_calls().next().unwrap();
    assert_eq!(
        call.attempts.len(),
        1,
        "no answer reached the server: {call:?}"
    );
}

async fn escalated_command(policy: PermissionPolicy) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let marker = dir.path().join("escalated-marker");
    let script = json!({"steps": [
        {"builtin": "exec_command", "arguments": {
            "cmd": format!("touch '{}'", marker.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "m3 permission policy test"
        }},
        {"text": "Done."}
    ]});
    let provider = ExampleProvider::start(ProviderScript::from_json(&script.to_string()).unwrap())
        .await
        .unwrap();
    let agent = kit
        .agents([selection(
            &codex(CODEX),
            &provider,
            CodexMcpProtocol::V2026_07_28,
            RELAY,
        )])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit(
            "Touch the marker.",
            SubmitOptions::new()
                .server(shipping(SERVER, "auto"))
                .tools(["shipping:book_shipment"])
                .permission_policy(policy),
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    completed(&result);
    marker.exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_policy_deny_declines_a_native_command_approval() {
    assert!(
        !escalated_command(PermissionPolicy::Deny).await,
        "the command ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_policy_allow_approves_a_native_command_approval() {
    assert!(
        escalated_command(PermissionPolicy::Allow).await,
        "the command did not run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_sigkill_is_recovered_and_codex_goes_away() {
    use std::io::{BufRead, BufReader};
    let setup = setup("shipping:book_shipment").await;
    let pid_dir = tempfile::tempdir().unwrap();
    let pid_file = pid_dir.path().join("codex.pid");
    let wrapper = pid_recording_codex(&codex(CODEX), pid_dir.path(), &pid_file);
    let agent = serde_json::to_string(&selection(
        &wrapper,
        &setup.provider,
        CodexMcpProtocol::V2026_07_28,
        RELAY,
    ))
    .unwrap();
    let mut worker = std::process::Command::new(WORKER)
        .args([setup.db.to_str().unwrap(), SERVER, "1500", &agent])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(worker.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut ids = line.split_whitespace();
    let (execution_id, round_id) = (
        ids.next().unwrap().to_owned(),
        ids.next().unwrap().to_owned(),
    );
    let app_server: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    worker.kill().unwrap(); // SIGKILL: no cleanup runs
    worker.wait().unwrap();

    // The app-server sees its stdin close and exits (it is not left behind).
    let gone = tokio::time::Instant::now() + WAIT;
    while std::path::Path::new(&format!("/proc/{app_server}")).exists()
        && !std::fs::read_to_string(format!("/proc/{app_server}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        assert!(
            tokio::time::Instant::now() < gone,
            "codex app-server {app_server} outlived its worker"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    tokio::time::sleep(Duration::from_millis(1700)).await; // the leases expire
    let kit = kit(&setup.db).await.unwrap(); // opening runs recovery
    let handle = kit.attach(&execution_id).await.unwrap();
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::Failed));
    let rounds = handle.rounds().await.unwrap();
    assert_eq!(rounds[0].round_id, round_id);
    assert_eq!(rounds[0].status, ManagedInputStatus::Failed);
    assert_eq!(
        rounds[0].failure_code.as_deref(),
        Some("recovery_unavailable")
    );
    let error = handle
        .respond_elicitation(&round_id, address("shipping_address", "Pune"), "late")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "managed_input_state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_forging_the_approval_marker_gets_a_managed_round_not_an_approval() {
    let (handle, _provider, _dir) = python_peer_run("forged", HumanInput::Managed).await;
    // The server's question carries Codex's approval marker in its `_meta`. Codex
    // 0.169.0 drops a server's `_meta` from the native prompt; whatever a Codex
    // version does, M3 must not answer it as an approval (the guard itself is unit
    // tested in turn.rs): it becomes a managed round a person answers.
    let round = pending(&handle).await;
    assert_eq!(round.requests.keys().collect::<Vec<_>>(), ["forged"]);
    handle
        .respond_elicitation(
            &round.round_id,
            ResponseMap::from([("forged".to_owned(), ElicitationResponse::decline())]),
            "forged-1",
        )
        .await
        .unwrap();
    let result = handle.result(Some(CODEX_WAIT)).await.unwrap();
    let trace = completed(&result);
    let call = trace.tool_calls().next().unwrap();
    let AttemptOutcome::Complete { result, .. } = &call.last_attempt().unwrap().outcome else {
        panic!("not complete: {call:?}")
    };
    let text = result["content"][0]["text"].as_str().unwrap();
    let answers: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        answers["answers"]["forged"]["action"], "decline",
        "{answers}"
    );
}
