//! The managed-input example of the guide, line by line, with the `codex` harness:
//! real Codex is the agent and the MCP client, and the round it pauses on is
//! answered here.
//!
//! Run with a signed-in Codex account (its `auth.json` is copied into a
//! temporary `CODEX_HOME`):
//!
//! ```text
//! cargo build -p m3-cli          # the relay Codex starts in front of the server
//! M3_DOCS_CODEX_MODEL=<model> cargo run -p m3-kit --example managed_input_codex
//! ```
//!
//! Offline, against the deterministic local provider (this is how
//! `scripts/test.sh` runs it): start `m3 example-provider --script
//! crates/m3-kit/examples/codex-provider.json`, and set
//! `M3_DOCS_CODEX_PROVIDER_URL` to the URL it prints. `M3_DOCS_CODEX_EXECUTABLE`
//! names the `codex` binary when it is not on `PATH`.
//!
//! The program is its own shipping server: started as
//! `managed_input_codex serve-shipping` it serves `m3_fixtures`' shipping server
//! on stdin/stdout, and the main program binds that command as the `shipping`
//! stdio server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use m3_kit::{AgentSelection, CodexProvider, CodexSelection, McpTestKit, SubmitOptions};
use m3_types::{ElicitationResponse, ExecutionStatus, HumanInput, ResponseMap, StdioServer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("serve-shipping") {
        return serve_shipping();
    }
    // `shipping_server` is the application's configured stdio server binding.
    let shipping_server =
        StdioServer::new("shipping", std::env::current_exe()?.display().to_string())
            .with_args(["serve-shipping"]);
    // Set this to a model enabled for the signed-in Codex account.
    let dir = tempfile::tempdir()?;
    let kit = McpTestKit::builder()
        .database(dir.path().join("executions.sqlite"))
        .env(BTreeMap::new())
        .build()?;
    let agent = kit
        .agents([AgentSelection::Codex(codex_selection(std::env::var(
            "M3_DOCS_CODEX_MODEL",
        )?))])?
        .remove(0);
    let handle = agent.submit(
        "Ask for the delivery address, then book the shipment.",
        SubmitOptions::new()
            .server(shipping_server)
            .tools(["shipping:book_shipment"])
            .human_input(HumanInput::Managed),
    )?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut pending = handle.pending_elicitation()?;
    while pending.is_none() && Instant::now() < deadline {
        let snapshot = handle.snapshot()?;
        if snapshot.lifecycle == ExecutionStatus::Finished {
            return Err(format!(
                "execution finished before it requested managed input: {:?}",
                snapshot.outcome
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(200));
        pending = handle.pending_elicitation()?;
    }
    let pending = pending.ok_or("execution did not request managed input")?;
    println!(
        "round {} asks: {}",
        pending.round_id,
        pending.requests["shipping_address"].message()
    );
    let mut address = serde_json::Map::new();
    address.insert("street".into(), "1 Main Street".into());
    address.insert("city".into(), "Pune".into());
    handle.respond_elicitation(
        &pending.round_id,
        ResponseMap::from([(
            "shipping_address".to_owned(),
            ElicitationResponse::accept(address),
        )]),
        &format!("address-{}", pending.round_id),
    )?;
    let result = handle.result(Some(Duration::from_secs(120)))?;

    let trace = m3_kit::ExecutionTrace::of(&result)?;
    println!("outcome: {:?}", result.outcome());
    println!("codex said: {}", trace.final_text.as_deref().unwrap_or(""));
    if result.outcome() != Some(m3_types::ExecutionOutcome::Completed) {
        return Err(format!("execution did not complete: {:?}", result.error).into());
    }
    kit.close()?;
    Ok(())
}

/// `{"harness": "codex", "models": [model]}`, plus the optional local provider
/// and executable of an offline run.
fn codex_selection(model: String) -> CodexSelection {
    let mut selection = CodexSelection::new(model);
    if let Ok(url) = std::env::var("M3_DOCS_CODEX_PROVIDER_URL") {
        selection = selection.with_provider(CodexProvider::new(url));
    }
    if let Ok(executable) = std::env::var("M3_DOCS_CODEX_EXECUTABLE") {
        selection = selection.with_executable(executable);
    }
    selection
}

fn serve_shipping() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(m3_fixtures::serve_stdio(m3_fixtures::ShippingOptions::new(
        m3_fixtures::Era::Auto,
    )))?;
    Ok(())
}
