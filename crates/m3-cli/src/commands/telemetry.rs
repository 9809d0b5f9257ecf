//! The OpenTelemetry trace exporter of the long-running commands: an OTLP/HTTP (protobuf)
//! exporter, on only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (the standard variables, read by
//! `opentelemetry-otlp` itself, as are `OTEL_EXPORTER_OTLP_HEADERS` and the timeouts).
//!
//! Only m3's own spans go out (`m3.execution`, `m3.mcp.operation`, `m3.round.wait`,
//! `m3.round.delivery`, `m3.http.request`; see docs/operations.md), never log events: a
//! span's fields are ids, names, routes and statuses, so no response value or token can
//! reach the collector.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::{Layer, Registry};

/// The service name when `OTEL_SERVICE_NAME` does not give one.
const SERVICE_NAME: &str = "m3";

/// The variables that switch the exporter on.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// The layer that exports spans, as the subscriber takes it.
pub(crate) type TraceLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Flushes and stops the exporter when dropped (at the end of `main`): the spans still in
/// the batch go out before the process exits.
#[derive(Debug)]
pub(crate) struct TelemetryGuard {
    provider: SdkTracerProvider,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("m3: flushing the OpenTelemetry traces failed: {error}");
        }
    }
}

/// The OTLP exporter's layer and its guard when `wanted` (a long-running command) and an
/// endpoint variable is set; `None` otherwise, or (with a note on stderr) when the
/// exporter cannot be built from the variables.
pub(crate) fn otlp_layer(wanted: bool) -> Option<(TraceLayer, TelemetryGuard)> {
    let configured = ENDPOINT_VARIABLES
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
    if !wanted || !configured {
        return None;
    }
    // reqwest is built with `rustls-no-provider` (as for the MCP HTTP client): an
    // https:// endpoint needs the process provider, and building the client needs one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = match SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("m3: OpenTelemetry traces are off: {error}");
            return None;
        }
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource())
        .build();
    let tracer = provider.tracer(SERVICE_NAME);
    let layer = tracing_opentelemetry::layer()
        // Busy/idle timing reads the clock on every poll of an instrumented future; a
        // waiting round is polled often and nobody reads those two attributes.
        .with_tracked_inactivity(false)
        .with_tracer(tracer)
        // The documented `m3.*` spans only: the store's and rmcp's spans would make a root
        // (a trace of its own) of every poll outside an execution.
        .with_filter(filter_fn(|metadata| {
            metadata.is_span() && metadata.name().starts_with("m3.")
        }));
    Some((Box::new(layer), TelemetryGuard { provider }))
}

/// The SDK's resource (which reads `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`),
/// named `m3` unless `OTEL_SERVICE_NAME` names it.
fn resource() -> Resource {
    let builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|value| !value.is_empty()) {
        builder.build()
    } else {
        builder.with_service_name(SERVICE_NAME).build()
    }
}
