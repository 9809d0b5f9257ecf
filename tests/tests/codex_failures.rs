//! End-to-end tests of the `codex` harness with the real Codex CLI: how an
//! execution fails or ends early (human input `fail`, an unselected tool, a
//! killed app-server or worker, an untested version, a cancel) and that nothing
//! is replayed afterwards.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use m3_kit::CodexMcpProtocol;
use m3_kit::ExecutionTrace;
use m3_tests::codex_support::{
    CODEX, CODEX_WAIT, CodexSetup, Peers, booking, codex, pid_recording_codex,
};
use m3_tests::runtime_support::{
    TestResult, WAIT, assert_late_response_refused, completes, ends, failure, first_call,
    first_round_failed, kit, pending,
};
use m3_types::{ExecutionOutcome, HumanInput};

const PEERS: Peers = Peers {
    server: env!("CARGO_BIN_EXE_m3-test-shipping-server"),
    relay: env!("CARGO_BIN_EXE_m3-test-relay"),
};
const WORKER: &str = env!("CARGO_BIN_EXE_m3-test-worker");

/// Asserts the first tool call of `result` took exactly one attempt (`why` says
/// what that proves).
fn one_attempt(result: &m3_types::ExecutionResult, why: &str) -> TestResult {
    let trace = ExecutionTrace::of(result)?;
    let call = first_call(&trace)?;
    assert_eq!(call.attempts.len(), 1, "{why}: {call:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_input_fail_interrupts_the_turn() -> TestResult {
    let (_setup, handle) = booking(PEERS, "book_shipment", HumanInput::Fail).await?;
    let result = ends(&handle, CODEX_WAIT, ExecutionOutcome::Failed).await?;
    let error = failure(&result, "protocol_error", "unexpected_elicitation")?;
    assert_eq!(error.details["turn_interrupted"], true);
    assert!(handle.rounds().await?.is_empty());
    one_attempt(&result, "no retry was sent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_selection_is_never_called() -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:quote").await?;
    let agent = setup.agent(CODEX, CodexMcpProtocol::V2026_07_28);
    let tools = ["shipping:book_shipment"];
    let handle = setup.submit(agent, &tools, HumanInput::Managed).await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    assert_eq!(
        trace.tool_calls().count(),
        0,
        "no tools/call reached the server: {:?}",
        trace.operations
    );
    // Codex was not even offered the tool: the model's request lists only the selection.
    let requests = setup.provider.requests();
    let first = requests.first().ok_or("codex never asked the provider")?;
    let tools = first.body["tools"].to_string();
    assert!(tools.contains("book_shipment"), "{tools}");
    assert!(!tools.contains("\"quote\""), "{tools}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_app_server_fails_the_round_and_refuses_a_late_response() -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let pid_file = setup.temp.dir().join("codex.pid");
    let wrapper = pid_recording_codex(&codex(CODEX), setup.temp.dir(), &pid_file)?;
    let agent = setup.agent_at(&wrapper, CodexMcpProtocol::V2026_07_28);
    let tools = ["shipping:book_shipment"];
    let handle = setup.submit(agent, &tools, HumanInput::Managed).await?;
    let round = pending(&handle).await;
    kill(&pid_file)?;
    let result = ends(&handle, CODEX_WAIT, ExecutionOutcome::Failed).await?;
    first_round_failed(&handle, "recovery_unavailable").await?;
    assert_late_response_refused(&handle, &round.round_id).await?;
    one_attempt(&result, "nothing was replayed")
}

fn kill(pid_file: &Path) -> TestResult {
    let pid = std::fs::read_to_string(pid_file)?;
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()?;
    assert!(status.success());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untested_codex_version_is_refused() -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let fake = setup.temp.dir().join("codex");
    std::fs::write(&fake, "#!/bin/sh\necho codex-cli 0.1.0\n")?;
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&fake)
        .status()?;
    let agent = setup.agent_at(&fake, CodexMcpProtocol::V2026_07_28);
    let tools = ["shipping:book_shipment"];
    let handle = setup.submit(agent, &tools, HumanInput::Managed).await?;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await?;
    failure(&result, "invalid_argument", "untested_codex_version")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_interrupts_the_turn_and_fails_the_round() -> TestResult {
    let (_setup, handle) = booking(PEERS, "book_shipment", HumanInput::Managed).await?;
    let round = pending(&handle).await;
    handle.cancel().await?;
    ends(&handle, CODEX_WAIT, ExecutionOutcome::Cancelled).await?;
    first_round_failed(&handle, "cancelled").await?;
    assert_late_response_refused(&handle, &round.round_id).await
}

/// Waits until process `pid` has exited (or is a zombie).
async fn gone(pid: i32) -> TestResult {
    let deadline = tokio::time::Instant::now() + WAIT;
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "codex app-server {pid} outlived its worker"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_sigkill_is_recovered_and_codex_goes_away() -> TestResult {
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let pid_file = setup.temp.dir().join("codex.pid");
    let wrapper = pid_recording_codex(&codex(CODEX), setup.temp.dir(), &pid_file)?;
    let agent = setup.agent_at(&wrapper, CodexMcpProtocol::V2026_07_28);
    let agent = serde_json::to_string(&agent)?;
    let db = setup.temp.db.to_str().ok_or("database path is not UTF-8")?;
    let mut worker = std::process::Command::new(WORKER)
        .args([db, PEERS.server, "1500", &agent])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    let stdout = worker.stdout.take().ok_or("no worker stdout")?;
    BufReader::new(stdout).read_line(&mut line)?;
    let mut ids = line.split_whitespace();
    let (Some(execution_id), Some(round_id)) = (ids.next(), ids.next()) else {
        return Err(format!("the worker printed {line:?}").into());
    };
    let app_server: i32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
    worker.kill()?; // SIGKILL: no cleanup runs
    worker.wait()?;

    // The app-server sees its stdin close and exits (it is not left behind).
    gone(app_server).await?;

    tokio::time::sleep(Duration::from_millis(1700)).await; // the leases expire
    let kit = kit(&setup.temp.db).await?; // opening runs recovery
    let handle = kit.attach(execution_id).await?;
    ends(&handle, WAIT, ExecutionOutcome::Failed).await?;
    let rounds = first_round_failed(&handle, "recovery_unavailable").await?;
    assert_eq!(rounds[0].round_id, round_id);
    assert_late_response_refused(&handle, round_id).await
}
