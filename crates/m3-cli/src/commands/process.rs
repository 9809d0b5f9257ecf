//! What a command's process sets up before it runs: logging to stderr, and the tokio
//! runtime of the plumbing commands.

/// Logging to stderr: `RUST_LOG` when set, else `quiet` (the level without `-v`: `off` for
/// the commands whose stderr carries the one error line or JSON object, `warn` for the
/// plumbing servers) raised by each `-v` (info, debug, trace). Set once per process.
pub(crate) fn init_logging(verbose: u8, quiet: &str) {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .try_init();
}

/// A tokio runtime for the plumbing commands (example servers, provider, relay) that run
/// outside the kit; logging is already set up by [`init_logging`].
pub(crate) fn plumbing_runtime(multi_thread: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build()
}
