//! `m3 demo`: a shipment booked through one managed input round, on the embedded defaults. A scripted agent calls
//! `shipping:book_shipment` on the bundled shipping server (`<this exe> example-server
//! shipping`) with `human_input=managed`; the round is answered with the sample address (or
//! by the person with `--interactive`); the result and the round's final status are printed.

use std::path::Path;
use std::time::Duration;

use m3_kit::{AgentSelection, AsyncMcpTestKit, SubmitOptions};
use m3_types::{
    ElicitationResponse, ExecutionResult, HumanInput, PendingElicitationRound, ResponseMap,
    StdioServer,
};
use serde_json::{Value, json};

use crate::commands::inspect::open_kit;
use crate::commands::run::{Answer, finished, follow, parse_selection, print_result};
use crate::failure::Failure;
use crate::output::Output;
use crate::render;

/// The sample delivery address the demo answers with.
fn sample_address(round: &PendingElicitationRound) -> ResponseMap {
    let content = json!({"street": "1 Main Street", "city": "Pune"});
    round
        .requests
        .keys()
        .map(|key| {
            let content = content.as_object().cloned().unwrap_or_default();
            (key.clone(), ElicitationResponse::accept(content))
        })
        .collect()
}

pub(crate) async fn run(out: Output, db: &Path, interactive: bool) -> Result<(), Failure> {
    let (selection, options) = demo_submission()?;
    out.say(format!(
        "m3 demo (store: {})",
        crate::output::store_label(db)
    ));
    let kit = open_kit(db, true).await?;
    let outcome = run_demo(out, &kit, selection, options, interactive).await;
    kit.close().await?;
    let result = outcome?;
    finished(&result)?;
    let booked = serde_json::to_value(&result).is_ok_and(|value| render::contains_booking(&value));
    if booked {
        out.say("shipment booked.");
        Ok(())
    } else {
        Err(Failure::new(
            "not_booked",
            "the execution completed but the shipment was not booked",
        ))
    }
}

/// The demo's agent (a scripted `book_shipment` call) and submit options (this
/// `m3` as the shipping server, managed input).
fn demo_submission() -> Result<(AgentSelection, SubmitOptions), Failure> {
    let exe = std::env::current_exe().map_err(|error| {
        Failure::other(
            "io_error",
            format!("cannot find the m3 executable: {error}"),
        )
    })?;
    let server = StdioServer::new("shipping", exe.to_string_lossy())
        .with_args(["example-server", "shipping"]);
    let selection = parse_selection(&json!({
        "harness": "scripted",
        "script": {"steps": [{"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}}]}
    }))?;
    let options = SubmitOptions::new()
        .server(server)
        .tools(["shipping:book_shipment"])
        .human_input(HumanInput::Managed)
        .timeout(Duration::from_secs(120));
    Ok((selection, options))
}

/// Submits the demo execution, answers its round and shows rounds and result.
async fn run_demo(
    out: Output,
    kit: &AsyncMcpTestKit,
    selection: AgentSelection,
    options: SubmitOptions,
    interactive: bool,
) -> Result<ExecutionResult, Failure> {
    let agent = kit
        .agents([selection])?
        .into_iter()
        .next()
        .ok_or_else(|| Failure::other("internal", "the kit returned no agent"))?;
    let handle = agent
        .submit(
            "Ask for the delivery address, then book the shipment.",
            options,
        )
        .await?;
    if out.is_json() {
        out.event("execution", &json!({"execution_id": handle.execution_id()}))?;
    }
    out.say(format!(
        "1. submitted execution {}: a scripted agent calls shipping:book_shipment with human_input=managed",
        handle.execution_id()
    ));
    out.say("2. waiting for the server to ask for input ...");
    let answer = if interactive {
        Answer::Terminal
    } else {
        Answer::Fixed(sample_address)
    };
    let result = follow(out, &handle, answer).await?;
    let rounds = handle.rounds().await?;
    let rounds: Vec<Value> = rounds
        .iter()
        .map(|round| serde_json::to_value(round).unwrap_or(Value::Null))
        .collect();
    for round in &rounds {
        let answered_by = round
            .get("answered_by")
            .and_then(|actor| serde_json::from_value::<m3_types::Actor>(actor.clone()).ok())
            .map(|actor| format!(", answered by {actor}"))
            .unwrap_or_default();
        out.say(format!(
            "3. round {} is {}{answered_by}",
            round.get("round_id").and_then(Value::as_str).unwrap_or("?"),
            out.status(round.get("status").and_then(Value::as_str).unwrap_or("?"))
        ));
    }
    out.say("4. result:");
    print_result(out, &result)?;
    if out.is_json() {
        out.event("rounds", &json!({"rounds": rounds}))?;
    }
    Ok(result)
}
