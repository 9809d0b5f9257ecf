//! One module per `m3` command (or group of small commands).

pub(crate) mod demo;
pub(crate) mod example_provider;
pub(crate) mod example_server;
pub(crate) mod inspect;
pub(crate) mod mcp_relay;
pub(crate) mod respond;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod serve;

/// Logging to stderr (`RUST_LOG`, default `warn`) and a tokio runtime for the
/// plumbing commands (example servers, provider, relay) that run outside the kit.
pub(crate) fn plumbing_runtime(multi_thread: bool) -> std::io::Result<tokio::runtime::Runtime> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build()
}
