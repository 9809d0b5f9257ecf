//! `traces [ROUNDS]`: submit -> visible (the store lifecycle of a managed execution) and
//! respond -> MCP retry, in one process, with tracing off and with the OTLP exporter on
//! (pointed at `tests/peers/otlp_receiver.py`), each in a child of this binary (a process
//! has one global subscriber), in the order off, on, on, off three times (each child runs
//! `ROUNDS` executions); prints both and the difference
//! against the target (on at most 5% slower). Metrics are recorded in both (always on).

use std::process::{Command, Stdio};

use m3_kit::AsyncMcpTestKit;
use m3_tests::runtime_support::call;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::Error;
use crate::respond::same_process;
use crate::stats::{Summary, print_row};

const TARGET: &str = "target: on at most 5% slower than off (p50)";

/// Child: `rounds` executions with tracing `on` or not; prints the two series as JSON.
pub(crate) async fn child(on: bool, rounds: usize) -> Result<(), Error> {
    let provider = on.then(install_exporter).transpose()?;
    let dir = tempfile::tempdir()?;
    let kit = AsyncMcpTestKit::builder()
        .database(dir.path().join("m3.sqlite"))
        .build()
        .await?;
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    let exe = std::env::current_exe()?.display().to_string();
    let series = same_process(&agent, &exe, rounds).await?;
    kit.close().await?;
    if let Some(provider) = provider {
        provider.shutdown()?;
    }
    println!(
        "{}",
        serde_json::json!({"visible": series.visible, "retry": series.retry})
    );
    Ok(())
}

/// The subscriber `m3` installs when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
fn install_exporter() -> Result<SdkTracerProvider, Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let layer = tracing_opentelemetry::layer()
        // Busy/idle timing reads the clock on every poll of an instrumented future; a
        // waiting round is polled often and nobody reads those two attributes.
        .with_tracked_inactivity(false)
        .with_tracer(provider.tracer("m3"))
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            metadata.is_span() && metadata.name().starts_with("m3.")
        }));
    tracing_subscriber::registry().with(layer).try_init()?;
    Ok(provider)
}

/// Parent: starts the receiver, runs the children (ABBA, three times), prints the comparison.
pub(crate) fn bench(rounds: usize) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let spans = dir.path().join("spans.jsonl");
    let python = std::env::var("M3_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/otlp_receiver.py");
    let mut receiver = Command::new(python)
        .args([script, "--out"])
        .arg(&spans)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut endpoint = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(receiver.stdout.take().ok_or("receiver stdout")?),
        &mut endpoint,
    )?;
    let exe = std::env::current_exe()?;
    let (mut off, mut on) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    // ABBA, three times: a load that drifts during the run weighs on both alike.
    for mode in ["off", "on", "on", "off"].repeat(3) {
        let mut command = Command::new(&exe);
        command.args(["traces-child", mode, &rounds.to_string()]);
        command.env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        if mode == "on" {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.trim());
        } else {
            command.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
        }
        let output = command.stderr(Stdio::inherit()).output()?;
        if !output.status.success() {
            return Err(format!("traces-child {mode} failed").into());
        }
        let value: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        let target = if mode == "on" { &mut on } else { &mut off };
        let numbers = |key: &str| -> Vec<f64> {
            value[key]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                .unwrap_or_default()
        };
        target.0.extend(numbers("visible"));
        target.1.extend(numbers("retry"));
    }
    let _ = receiver.kill();
    let _ = receiver.wait();
    let exported = std::fs::read_to_string(&spans)
        .unwrap_or_default()
        .lines()
        .count();
    for (name, off, on) in [
        ("submit -> visible", off.0, on.0),
        ("respond -> MCP retry", off.1, on.1),
    ] {
        let (off, on) = (Summary::of(off), Summary::of(on));
        print_row(
            &format!("[traces off] {name}, same process"),
            off,
            "(reference of the next row)",
        );
        let reference = match (off, on) {
            (Some(off), Some(on)) => format!(
                "{TARGET}; p50 {:+.1}%, p99 {:+.1}%",
                (on.p50 / off.p50 - 1.0) * 100.0,
                (on.p99 / off.p99 - 1.0) * 100.0
            ),
            _ => String::new(),
        };
        print_row(
            &format!("[traces on]  {name}, same process"),
            on,
            &reference,
        );
    }
    println!("spans exported to the receiver: {exported}");
    Ok(())
}
