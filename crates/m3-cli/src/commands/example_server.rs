//! `m3 example-server NAME`: the bundled stdio MCP servers of `m3-fixtures`.

use std::process::ExitCode;

use m3_fixtures::{CRASH_EXIT_CODE, Era, Fault, ServeOutcome, ShippingOptions};

/// Serves `name` on stdin/stdout until the client closes it.
pub(crate) fn run(
    name: &str,
    era: Era,
    fault: Option<Fault>,
    call_log: Option<std::path::PathBuf>,
    hold_retry: bool,
) -> ExitCode {
    let runtime = match super::plumbing_runtime(true) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("m3 example-server: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let mut options = ShippingOptions::new(era).with_hold_retry(hold_retry);
    options.fault = fault;
    options.call_log = call_log;
    let outcome = runtime.block_on(m3_fixtures::serve_named_stdio(name, options));
    match outcome {
        // Exit at once: the runtime would otherwise wait for the blocking stdin read.
        Ok(ServeOutcome::Crashed) => std::process::exit(i32::from(CRASH_EXIT_CODE)),
        Ok(_) => {
            runtime.shutdown_background();
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("m3 example-server: {error} ({})", error.code());
            runtime.shutdown_background();
            ExitCode::from(if error.code() == "invalid_argument" {
                2
            } else {
                1
            })
        }
    }
}
