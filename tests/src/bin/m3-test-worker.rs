//! Test helper: a worker process that submits a managed execution and keeps
//! waiting on its round (to be killed with SIGKILL by the test).
//!
//! Usage: `m3-test-worker <database> <shipping-server-exe> <lease-ms> [<agent-json>]`.
//! The agent is a scripted `shipping:book_shipment` call unless an agent selection
//! (JSON, e.g. a codex one) is given; then `shipping:book_shipment` is the only
//! selected tool. Prints `<execution-id> <round-id>` once the round is pending,
//! then sleeps.

use std::time::Duration;

use m3_kit::{McpTestKit, SubmitOptions};
use m3_tests::runtime_support::{call, shipping};
use m3_types::HumanInput;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(database), Some(server), Some(lease_ms)) = (args.next(), args.next(), args.next())
    else {
        return Err("usage: m3-test-worker <database> <shipping-server-exe> <lease-ms>".into());
    };
    let lease = Duration::from_millis(lease_ms.parse()?);
    let kit = McpTestKit::builder().database(&database).build()?;
    let mut options = SubmitOptions::new()
        .human_input(HumanInput::Managed)
        .lease(lease)
        .renew_every(lease / 3);
    let selection = match args.next() {
        Some(json) => {
            options = options
                .server(shipping(&server, "auto"))
                .tools(["shipping:book_shipment"]);
            serde_json::from_str(&json)?
        }
        None => {
            options = options.server(shipping(&server, "modern"));
            call("book_shipment")
        }
    };
    let agent = kit.agents([selection])?.remove(0);
    let handle = agent.submit("Book a shipment.", options)?;
    let round = handle
        .wait_for_pending(Duration::from_secs(30))?
        .ok_or("finished without asking")?;
    println!("{} {}", handle.execution_id(), round.round_id);
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}
