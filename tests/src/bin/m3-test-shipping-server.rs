//! Test helper: serves the m3-fixtures `shipping` server on stdin/stdout.
//!
//! Usage: `m3-test-shipping-server [auto|modern|legacy]`.

use m3_fixtures::{Era, ShippingOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let era = match std::env::args().nth(1).as_deref() {
        None | Some("auto") => Era::Auto,
        Some("modern") => Era::Modern,
        Some("legacy") => Era::Legacy,
        Some(other) => return Err(format!("unknown era '{other}'").into()),
    };
    m3_fixtures::serve_stdio(ShippingOptions::new(era)).await?;
    Ok(())
}
