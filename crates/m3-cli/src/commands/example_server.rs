//! `m3 example-server NAME [--http ADDRESS]`: the bundled MCP servers of `m3-fixtures`, on
//! stdio or over Streamable HTTP.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use m3_fixtures::{CRASH_EXIT_CODE, Era, Fault, FixtureError, ServeOutcome, ShippingOptions};

use crate::failure::{Failure, exit};
use crate::output::Output;

/// Serves `name` on stdin/stdout until the client closes it.
pub(crate) fn run(
    name: &str,
    era: Era,
    fault: Option<Fault>,
    call_log: Option<std::path::PathBuf>,
    hold_retry: bool,
) -> ExitCode {
    let runtime = match super::process::plumbing_runtime(true) {
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

/// Serves `name` over Streamable HTTP on `address` until SIGINT or SIGTERM; prints the
/// endpoint URL as the first stdout line.
pub(crate) fn run_http(
    out: Output,
    name: &str,
    era: Era,
    address: SocketAddr,
    call_log: Option<std::path::PathBuf>,
) -> ExitCode {
    let outcome = super::process::plumbing_runtime(true)
        .map_err(|error| Failure::other("io_error", format!("cannot start the runtime: {error}")))
        .and_then(|runtime| {
            let outcome = runtime.block_on(serve_http(name, era, address, call_log));
            runtime.shutdown_background();
            outcome
        });
    match outcome {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            out.fail(&failure);
            ExitCode::from(failure.exit())
        }
    }
}

async fn serve_http(
    name: &str,
    era: Era,
    address: SocketAddr,
    call_log: Option<std::path::PathBuf>,
) -> Result<(), Failure> {
    let mut options = ShippingOptions {
        era,
        ..ShippingOptions::default()
    };
    options.call_log = call_log;
    let fixture = m3_fixtures::serve_named_http(name, options, address)
        .await
        .map_err(|error| match error {
            FixtureError::InvalidArgument(message) => Failure::invalid(message),
            other => Failure::other(other.code(), other.to_string()),
        })?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", fixture.url())
        .and_then(|()| stdout.flush())
        .map_err(|error| Failure::other("io_error", format!("cannot write stdout: {error}")))?;
    drop(stdout);
    super::example_provider::stopped().await?;
    fixture
        .stop()
        .await
        .map_err(|error| Failure::other(error.code(), error.to_string()))
}
