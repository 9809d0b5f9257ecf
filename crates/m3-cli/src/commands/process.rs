//! What a command's process sets up before it runs: logging to stderr, and the tokio
//! runtime of the plumbing commands.

use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use super::telemetry::TelemetryGuard;

/// Logging to stderr: `RUST_LOG` when set, else `quiet` (the level without `-v`: `off` for
/// the commands whose stderr carries the one error line or JSON object, `warn` for the
/// plumbing servers) raised by each `-v` (info, debug, trace). Set once per process.
/// With `traces` (a long-running command), also the OpenTelemetry exporter when the
/// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables ask for it; keep the guard to flush it at exit.
pub(crate) fn init_logging(verbose: u8, quiet: &str, traces: bool) -> Option<TelemetryGuard> {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // The exporter has its own filter (m3's spans), whatever the log filter says.
    let (exporter, guard) = super::telemetry::otlp_layer(traces).unzip();
    let _ = tracing_subscriber::registry()
        .with(exporter)
        .with(fmt.with_filter(filter))
        .try_init();
    guard
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
