//! Benchmark of the managed-input runtime latencies (run with `--release`):
//!
//! - **submit → visible**: from just before `agent.submit(...)` to the first
//!   `pending_elicitation()` that returns the round (polled every 1 ms);
//! - **respond → retry**: from just before `respond_elicitation(...)` to the
//!   `started_at` of the MCP retry attempt that carries the answer.
//!
//! Both in one process (the in-process notifier wakes the worker) and across
//! processes (a child process of this binary polls and responds; the worker
//! wakes by its 50 ms durable poll).
//!
//! ```sh
//! cargo run --release -p m3-tests --bin m3-test-bench-runtime -- 200
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit, ExecutionTrace, SubmitOptions};
use m3_tests::runtime_support::{address, call, shipping};
use m3_types::HumanInput;
use time::OffsetDateTime;

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("serve-shipping") => {
            m3_fixtures::serve_stdio(m3_fixtures::ShippingOptions::new(m3_fixtures::Era::Modern))
                .await?;
            Ok(())
        }
        Some("respond") => responder(args.get(2).ok_or("respond <database>")?).await,
        other => {
            let rounds: usize = other.map(str::parse).transpose()?.unwrap_or(200);
            bench(rounds).await
        }
    }
}

fn micros(t: OffsetDateTime) -> i128 {
    t.unix_timestamp_nanos() / 1000
}

async fn wait_visible(handle: &AsyncExecutionHandle) -> Result<(String, OffsetDateTime), Error> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(round) = handle.pending_elicitation().await? {
            return Ok((round.round_id, OffsetDateTime::now_utc()));
        }
        if Instant::now() > deadline {
            return Err("no round within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Child process: reads execution ids on stdin; for each, polls for its round,
/// answers it, and prints `<visible_unix_us> <respond_unix_us>`.
async fn responder(database: &str) -> Result<(), Error> {
    let kit = AsyncMcpTestKit::builder()
        .database(database)
        .recover_on_open(false)
        .build()
        .await?;
    let mut lines = BufReader::new(std::io::stdin()).lines();
    let mut out = std::io::stdout();
    while let Some(line) = lines.next().transpose()? {
        let handle = kit.attach(line.trim()).await?;
        let (round_id, visible) = wait_visible(&handle).await?;
        let respond = OffsetDateTime::now_utc();
        handle
            .respond_elicitation(
                &round_id,
                address("shipping_address", "Pune"),
                &format!("address-{round_id}"),
            )
            .await?;
        writeln!(out, "{} {}", micros(visible), micros(respond))?;
        out.flush()?;
    }
    Ok(())
}

fn retry_started(result: &m3_types::ExecutionResult) -> Result<OffsetDateTime, Error> {
    let trace = ExecutionTrace::of(result)?;
    let call = trace.tool_calls().next().ok_or("no tool call")?;
    Ok(call.attempts.get(1).ok_or("no retry attempt")?.started_at)
}

fn report(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{name:<40} n={:<4} p50={:>8.2} ms  p99={:>8.2} ms  max={:>8.2} ms",
        samples.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

async fn bench(rounds: usize) -> Result<(), Error> {
    let exe = std::env::current_exe()?.display().to_string();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.sqlite");
    let kit = AsyncMcpTestKit::builder().database(&db).build().await?;
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    // This binary is its own shipping server (`serve-shipping`).
    let options = || {
        SubmitOptions::new()
            .server(shipping(&exe, "serve-shipping"))
            .human_input(HumanInput::Managed)
    };

    let (mut visible_same, mut retry_same) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let submitted = OffsetDateTime::now_utc();
        let handle = agent.submit("Book a shipment.", options()).await?;
        let (round_id, visible) = wait_visible(&handle).await?;
        let respond = OffsetDateTime::now_utc();
        handle
            .respond_elicitation(
                &round_id,
                address("shipping_address", "Pune"),
                &format!("address-{round_id}"),
            )
            .await?;
        let result = handle.result(Some(Duration::from_secs(30))).await?;
        visible_same.push((micros(visible) - micros(submitted)) as f64 / 1000.0);
        retry_same.push((micros(retry_started(&result)?) - micros(respond)) as f64 / 1000.0);
    }

    let mut child = Command::new(&exe)
        .args(["respond", db.to_str().ok_or("path")?])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut to_child = child.stdin.take().ok_or("stdin")?;
    let mut from_child = BufReader::new(child.stdout.take().ok_or("stdout")?).lines();
    let (mut visible_cross, mut retry_cross) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let submitted = OffsetDateTime::now_utc();
        let handle = agent.submit("Book a shipment.", options()).await?;
        writeln!(to_child, "{}", handle.execution_id())?;
        to_child.flush()?;
        let line = from_child.next().ok_or("responder ended")??;
        let mut parts = line.split_whitespace().map(str::parse::<i128>);
        let (Some(Ok(visible)), Some(Ok(respond))) = (parts.next(), parts.next()) else {
            return Err(format!("bad responder line {line:?}").into());
        };
        let result = handle.result(Some(Duration::from_secs(30))).await?;
        visible_cross.push((visible - micros(submitted)) as f64 / 1000.0);
        retry_cross.push((micros(retry_started(&result)?) - respond) as f64 / 1000.0);
    }
    drop(to_child);
    child.wait()?;
    kit.close().await?;

    report("submit -> visible (same process)", visible_same);
    report("respond -> MCP retry sent (same process)", retry_same);
    report("submit -> visible (cross process)", visible_cross);
    report("respond -> MCP retry sent (cross process)", retry_cross);
    Ok(())
}
