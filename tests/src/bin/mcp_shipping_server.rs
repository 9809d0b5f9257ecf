//! The m3-fixtures `shipping` server on stdin/stdout, for the MCP client tests.
//!
//! Usage: `mcp_shipping_server [--era auto|2026-07-28|legacy] [--fault MODE]`.
//! Exits 0 when stdin closes, `CRASH_EXIT_CODE` after the crash fault, 2 on a
//! usage error.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use m3_fixtures::{CRASH_EXIT_CODE, Era, Fault, ServeOutcome, ShippingOptions, serve_named_stdio};

fn parse() -> Result<ShippingOptions, String> {
    let mut era = Era::Auto;
    let mut fault: Option<Fault> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--era" => era = value.parse().map_err(|e| format!("{e}"))?,
            "--fault" => fault = Some(value.parse().map_err(|e| format!("{e}"))?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let options = ShippingOptions::new(era);
    Ok(match fault {
        Some(fault) => options.with_fault(fault),
        None => options,
    })
}

fn main() -> ExitCode {
    let options = match parse() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("mcp_shipping_server: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mcp_shipping_server: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve_named_stdio("shipping", options)) {
        Ok(ServeOutcome::Crashed) => {
            runtime.shutdown_background();
            ExitCode::from(CRASH_EXIT_CODE)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcp_shipping_server: {error}");
            ExitCode::from(1)
        }
    }
}
