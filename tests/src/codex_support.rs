//! Helpers for the end-to-end tests of the `codex` harness: real Codex CLIs
//! installed by `scripts/test.sh`, the deterministic local model provider, and
//! the relay binary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use m3_fixtures::provider::{ExampleProvider, ProviderScript};
use m3_kit::{
    AgentSelection, AsyncExecutionHandle, CodexMcpProtocol, CodexProvider, CodexSelection,
    ExecutionTrace, SubmitOptions,
};
use m3_types::HumanInput;
use serde_json::json;

use crate::runtime_support::{
    TempKit, TestResult, address, completes, final_result, only, pending, resolved_rounds,
    retried_content, shipping,
};

/// The Codex version every test runs unless it names another.
pub const CODEX: &str = "0.169.0";
/// The older tested version (the one the Python original pins).
pub const CODEX_OLD: &str = "0.156.1";

/// The installed `codex` of `version` (`M3_TEST_CODEX_DIR` or the tools folder),
/// which must exist.
pub fn codex(version: &str) -> PathBuf {
    let root = std::env::var("M3_TEST_CODEX_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = Path::new(&root).join(format!("codex-{version}/node_modules/.bin/codex"));
    assert!(
        path.exists(),
        "codex {version} missing at {}: run scripts/test.sh to install it",
        path.display()
    );
    path
}

/// A provider that calls `target` (`"server:tool"`) with `{"weight_kg": 2}`,
/// then says `text`.
pub async fn provider(target: &str, text: &str) -> TestResult<ExampleProvider> {
    provider_with(target, json!({"weight_kg": 2}), text).await
}

/// A provider that calls `target` with `arguments`, then says `text`.
pub async fn provider_with(
    target: &str,
    arguments: serde_json::Value,
    text: &str,
) -> TestResult<ExampleProvider> {
    let script = json!({
        "model": "m3-example-model",
        "steps": [
            {"call": target, "arguments": arguments},
            {"text": text}
        ]
    });
    scripted_provider(&script).await
}

/// A provider playing `script` (the `m3 example-provider` script format).
pub async fn scripted_provider(script: &serde_json::Value) -> TestResult<ExampleProvider> {
    let script = ProviderScript::from_json(&script.to_string())?;
    Ok(ExampleProvider::start(script).await?)
}

/// `{"harness": "codex", ...}` with the local provider, the given executable, era and relay.
pub fn selection(
    executable: &Path,
    provider: &ExampleProvider,
    protocol: CodexMcpProtocol,
    relay: &str,
) -> AgentSelection {
    AgentSelection::Codex(
        CodexSelection::new("m3-example-model")
            .with_executable(executable.display().to_string())
            .with_provider(CodexProvider::new(provider.base_url()))
            .with_mcp_protocol(protocol)
            .with_relay([relay]),
    )
}

/// A wrapper script around `codex` that writes its own pid to `pid_file`
/// before `exec`ing Codex, so a test can kill exactly its app-server.
pub fn pid_recording_codex(codex: &Path, dir: &Path, pid_file: &Path) -> TestResult<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("codex-with-pid");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec '{}' \"$@\"\n",
            pid_file.display(),
            codex.display()
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    Ok(script)
}

/// Codex needs a moment longer than the scripted agent (app-server start-up).
pub const CODEX_WAIT: Duration = Duration::from_secs(90);

/// The test binaries a Codex test runs, from its `env!("CARGO_BIN_EXE_...")`.
#[derive(Debug, Clone, Copy)]
pub struct Peers {
    /// `m3-test-shipping-server`.
    pub server: &'static str,
    /// `m3-test-relay`.
    pub relay: &'static str,
}

/// A kit on a fresh SQLite file and a local provider calling one tool.
#[derive(Debug)]
pub struct CodexSetup {
    /// The kit and its database.
    pub temp: TempKit,
    /// The provider Codex asks.
    pub provider: ExampleProvider,
    peers: Peers,
}

impl CodexSetup {
    /// A provider that calls `target` (`"shipping:<tool>"`), then says "Shipment booked.".
    pub async fn new(peers: Peers, target: &str) -> TestResult<Self> {
        Ok(Self {
            temp: TempKit::new().await?,
            provider: provider(target, "Shipment booked.").await?,
            peers,
        })
    }

    /// The installed Codex `version` on this provider, speaking `protocol`.
    pub fn agent(&self, version: &str, protocol: CodexMcpProtocol) -> AgentSelection {
        self.agent_at(&codex(version), protocol)
    }

    /// The Codex `executable` on this provider, speaking `protocol`.
    pub fn agent_at(&self, executable: &Path, protocol: CodexMcpProtocol) -> AgentSelection {
        selection(executable, &self.provider, protocol, self.peers.relay)
    }

    /// Submits the booking prompt to `agent` with the shipping server (era
    /// `auto`) and `tools` selected.
    pub async fn submit(
        &self,
        agent: AgentSelection,
        tools: &[&str],
        human_input: HumanInput,
    ) -> TestResult<AsyncExecutionHandle> {
        let server = shipping(self.peers.server, "auto");
        self.submit_to(server, agent, tools, human_input).await
    }

    /// Submits the booking prompt to `agent` with `server` bound and `tools` selected.
    pub async fn submit_to(
        &self,
        server: impl Into<m3_types::ServerBinding>,
        agent: AgentSelection,
        tools: &[&str],
        human_input: HumanInput,
    ) -> TestResult<AsyncExecutionHandle> {
        let options = SubmitOptions::new()
            .server(server)
            .tools(tools.iter().copied())
            .human_input(human_input)
            .timeout(Duration::from_secs(120));
        let prompt = "Ask for the delivery address, then book the shipment.";
        Ok(self.temp.agent(agent)?.submit(prompt, options).await?)
    }
}

/// Codex 0.169.0 in the 2026-07-28 era calling `shipping:<tool>`, the only selected tool.
pub async fn booking(
    peers: Peers,
    tool: &str,
    human_input: HumanInput,
) -> TestResult<(CodexSetup, AsyncExecutionHandle)> {
    let target = format!("shipping:{tool}");
    let setup = CodexSetup::new(peers, &target).await?;
    let agent = setup.agent(CODEX, CodexMcpProtocol::V2026_07_28);
    let handle = setup.submit(agent, &[target.as_str()], human_input).await?;
    Ok((setup, handle))
}

/// Asserts Codex asked `provider` and never sent it an `authorization` header.
pub fn assert_no_authorization_sent(provider: &ExampleProvider) {
    let requests = provider.requests();
    assert!(!requests.is_empty(), "codex never asked the provider");
    for request in &requests {
        assert!(
            !request.headers.contains_key("authorization"),
            "codex sent an authorization header"
        );
    }
}

/// Answers the one form round of a managed `shipping:book_shipment` under Codex
/// (`elicitation` on the legacy era, `shipping_address` on 2026-07-28) with a Pune
/// address, and checks the booking then completed as one logical tool call: one
/// attempt answered in-call on the legacy era, a retry carrying the answer on
/// 2026-07-28. Returns the trace for the caller's own checks.
///
/// # Errors
/// When the round, the answer or the result is not what the flow expects.
pub async fn answer_the_booking_round(
    handle: &AsyncExecutionHandle,
    protocol: CodexMcpProtocol,
) -> TestResult<ExecutionTrace> {
    let legacy = protocol == CodexMcpProtocol::Legacy;
    let round = pending(handle).await;
    assert_eq!(round.server, "shipping");
    assert_eq!(round.operation_name, "book_shipment");
    let key = only(round.requests.keys().cloned().collect())?;
    assert_eq!(
        key,
        if legacy {
            "elicitation"
        } else {
            "shipping_address"
        }
    );
    let idempotency_key = format!("address-{}", round.round_id);
    handle
        .respond_elicitation(&round.round_id, address(&key, "Pune"), &idempotency_key)
        .await?;
    let trace = completes(handle, CODEX_WAIT).await?;
    assert_eq!(trace.harness, "codex");
    assert_eq!(trace.final_text.as_deref(), Some("Shipment booked."));
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical tool call: {calls:?}");
    let call = calls[0];
    assert_eq!(call.operation_name, "book_shipment");
    if legacy {
        assert_eq!(call.attempts.len(), 1, "{call:?}");
        let exchange = &call.attempts[0].rounds[0];
        let responses = exchange.responses.as_ref().ok_or("no responses")?;
        let content = responses["elicitation"].content.as_ref();
        assert_eq!(content.ok_or("no content")?["city"], "Pune");
    } else {
        assert_eq!(call.attempts.len(), 2, "{call:?}");
        assert_eq!(retried_content(call, "shipping_address", "city")?, "Pune");
    }
    let (_, is_error) = final_result(call)?;
    assert!(!is_error, "{call:?}");
    resolved_rounds(handle, 1).await?;
    Ok(trace)
}
