//! `m3 example-provider --script FILE`: the deterministic local model provider of
//! `m3-fixtures` (an OpenAI Responses API on 127.0.0.1 for Codex).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use m3_fixtures::FixtureError;
use m3_fixtures::provider::{ExampleProvider, ProviderOptions, ProviderScript};

use crate::failure::{Failure, exit};
use crate::output::Output;

/// Serves `script` until SIGINT or SIGTERM; prints the base URL as the first stdout line.
pub(crate) fn run(out: Output, script: &Path, port: u16, record: Option<PathBuf>) -> ExitCode {
    let runtime = match super::process::plumbing_runtime(true) {
        Ok(runtime) => runtime,
        Err(error) => {
            return fail(
                out,
                Failure::other("io_error", format!("cannot start the runtime: {error}")),
            );
        }
    };
    let outcome = runtime.block_on(serve(script, port, record));
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => fail(out, failure),
    }
}

async fn serve(script: &Path, port: u16, record: Option<PathBuf>) -> Result<(), Failure> {
    let text = tokio::fs::read_to_string(script).await.map_err(|error| {
        Failure::other(
            "io_error",
            format!("cannot read the script {}: {error}", script.display()),
        )
    })?;
    let script = ProviderScript::from_json(&text).map_err(fixture_failure)?;
    let mut options = ProviderOptions::default().with_port(port);
    if let Some(record) = record {
        options = options.with_record(record);
    }
    let provider = ExampleProvider::start_with(script, options)
        .await
        .map_err(fixture_failure)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", provider.base_url())
        .and_then(|()| stdout.flush())
        .map_err(|error| Failure::other("io_error", format!("cannot write stdout: {error}")))?;
    drop(stdout);
    stopped().await?;
    provider.stop().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn stopped() -> Result<(), Failure> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|error| {
        Failure::other("io_error", format!("cannot watch SIGTERM: {error}"))
    })?;
    tokio::select! {
        outcome = tokio::signal::ctrl_c() => outcome
            .map_err(|error| Failure::other("io_error", format!("cannot watch SIGINT: {error}"))),
        _ = terminate.recv() => Ok(()),
    }
}

fn fixture_failure(error: FixtureError) -> Failure {
    match error {
        FixtureError::InvalidArgument(message) => Failure::invalid(message),
        other => Failure::other(other.code(), other.to_string()),
    }
}

fn fail(out: Output, failure: Failure) -> ExitCode {
    out.fail(&failure);
    ExitCode::from(failure.exit())
}
