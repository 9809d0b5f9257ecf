//! Test helper: answers an execution's pending round from another process.
//!
//! Usage: `m3-test-responder <database> <execution-id> <city>`. Opens its own
//! kit on the database (without recovery), attaches to the execution, waits for
//! its pending round and answers `shipping_address` with `1 Main Street, <city>`.
//! Prints the round id.

use std::time::Duration;

use m3_kit::McpTestKit;
use m3_tests::runtime_support::address;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(database), Some(execution_id), Some(city)) = (args.next(), args.next(), args.next())
    else {
        return Err("usage: m3-test-responder <database> <execution-id> <city>".into());
    };
    let kit = McpTestKit::builder()
        .database(&database)
        .recover_on_open(false)
        .build()?;
    let handle = kit.attach(&execution_id)?;
    let round = handle
        .wait_for_pending(Duration::from_secs(30))?
        .ok_or("the execution finished without asking")?;
    handle.respond_elicitation(
        &round.round_id,
        address("shipping_address", &city),
        &format!("address-{}", round.round_id),
    )?;
    println!("{}", round.round_id);
    Ok(())
}
