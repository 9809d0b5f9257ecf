//! What a command's process sets up before it runs: logging to stderr, and the tokio
//! runtime of the plumbing commands.

use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

use super::telemetry::TelemetryGuard;
use crate::cli::LogFormat;

/// Libraries that log whole protocol messages or credentials above `info`: rmcp writes
/// every JSON-RPC message at `trace` (answers included) and OAuth token results at
/// `debug`. Their lines stop at `info` whatever `M3_LOG` asks for, so no filter setting
/// can put a response value or a token in a log line.
const PAYLOAD_LOGGERS: [&str; 1] = ["rmcp"];

/// Logging to stderr, set once per process. The filter is `M3_LOG` when set, else
/// `RUST_LOG`, else `quiet` (the level without `-v`: `off` for the commands whose stderr
/// carries the one error line or JSON object, `warn` for the plumbing servers) raised by
/// each `-v` (info, debug, trace). Text lines carry a UTC timestamp; JSON lines carry the
/// timestamp, level, target, the event's fields and the fields of every enclosing span.
/// With `traces` (a long-running command), also the OpenTelemetry exporter when the
/// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables ask for it; keep the guard to flush it at exit.
pub(crate) fn init_logging(
    verbose: u8,
    quiet: &str,
    format: LogFormat,
    traces: bool,
) -> Option<TelemetryGuard> {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = ["M3_LOG", "RUST_LOG"]
        .iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        })
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let payload_cap = PAYLOAD_LOGGERS.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |targets, target| targets.with_target(*target, LevelFilter::INFO),
    );
    let lines = match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    // The exporter has its own filter (m3's spans), whatever the log filter says.
    let (exporter, guard) = super::telemetry::otlp_layer(traces).unzip();
    let _ = tracing_subscriber::registry()
        .with(exporter)
        .with(lines.with_filter(filter).with_filter(payload_cap))
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
