//! The managed-input example of the guide, blocking, against the bundled shipping
//! server and the scripted harness.
//!
//! Run: `cargo run -p m3-kit --example managed_input`
//!
//! The program is its own shipping server: started as
//! `managed_input serve-shipping` it serves `m3_fixtures`' shipping server on
//! stdin/stdout, and the main program binds that command as the `shipping`
//! stdio server (see docs/decisions.md).

use std::time::{Duration, Instant};

use m3_kit::{AgentSelection, McpTestKit, Script, SubmitOptions};
use m3_types::{ElicitationResponse, ExecutionStatus, HumanInput, ResponseMap, StdioServer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("serve-shipping") {
        return serve_shipping();
    }
    // `shipping_server` is the application's configured stdio server binding.
    let shipping_server =
        StdioServer::new("shipping", std::env::current_exe()?.display().to_string())
            .with_args(["serve-shipping"]);
    let dir = tempfile::tempdir()?;
    let kit = McpTestKit::builder()
        .database(dir.path().join("executions.sqlite"))
        .build()?;

    let mut arguments = serde_json::Map::new();
    arguments.insert("weight_kg".into(), 2.into());
    let agent = kit
        .agents([AgentSelection::scripted(Script::call(
            "shipping:book_shipment",
            arguments,
        ))])?
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
    let responses = ResponseMap::from([(
        "shipping_address".to_owned(),
        ElicitationResponse::accept(address),
    )]);
    handle.respond_elicitation(
        &pending.round_id,
        responses,
        &format!("address-{}", pending.round_id),
    )?;

    let result = handle.result(Some(Duration::from_secs(120)))?;
    let trace = m3_kit::ExecutionTrace::of(&result)?;
    println!("outcome: {:?}", result.outcome());
    println!("agent said: {}", trace.final_text.as_deref().unwrap_or(""));
    if result.outcome() != Some(m3_types::ExecutionOutcome::Completed) {
        return Err(format!("execution did not complete: {:?}", result.error).into());
    }
    kit.close()?;
    Ok(())
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
