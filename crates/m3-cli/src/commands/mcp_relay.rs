//! `m3 mcp-relay --handoff FILE -- COMMAND [ARGS...]`: the MCP relay a harness launches in
//! place of a stdio MCP server (internal plumbing; see `m3_runtime::relay`).

use std::path::Path;
use std::process::ExitCode;

/// Relays stdin/stdout to `command` until the server ends; exits with the server's code.
pub(crate) fn run(handoff: &Path, command: &[String]) -> ExitCode {
    let runtime = match super::process::plumbing_runtime(false) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("m3 mcp-relay: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(m3_runtime::relay::run_relay(
        handoff,
        command,
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    let code = match outcome {
        Ok(code) => code.clamp(0, 255),
        Err(error) => {
            eprintln!("m3 mcp-relay: {error} ({})", error.code());
            if error.code() == "invalid_argument" {
                2
            } else {
                1
            }
        }
    };
    // Exit at once: the runtime would otherwise wait for the blocking stdin read.
    std::process::exit(code)
}
