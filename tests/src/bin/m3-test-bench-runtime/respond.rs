//! `respond`: submit -> visible, and respond -> MCP retry sent, answered in the worker's own
//! process and from another process, on SQLite and (when given) PostgreSQL.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use m3_kit::{AsyncAgent, AsyncExecutionHandle, AsyncMcpTestKit, ExecutionTrace, SubmitOptions};
use m3_tests::runtime_support::{address, call, shipping};
use m3_types::{ExecutionStatus, HumanInput};
use time::OffsetDateTime;

use crate::Error;
use crate::stats::{Summary, print_row};

/// The targets of the cross-process response path.
const TARGET: &str = "target p50 <= 2 ms, p99 <= 10 ms";
/// The target of the HTTP answer path: the kit's cross-process figure plus this allowance.
const HTTP_TARGET: &str = "target p50 within 0.5 ms of the kit's";
/// How much slower than the kit's cross-process p50 the HTTP path may be, in ms.
const HTTP_ALLOWANCE_MS: f64 = 0.5;

fn micros(t: OffsetDateTime) -> i128 {
    t.unix_timestamp_nanos() / 1000
}

fn millis_between(from_us: i128, to_us: i128) -> f64 {
    (to_us - from_us) as f64 / 1000.0
}

/// The round of `handle` once visible, and when it was seen (polled every 1 ms).
async fn wait_visible(handle: &AsyncExecutionHandle) -> Result<(String, OffsetDateTime), Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(round) = handle.pending_elicitation().await? {
            return Ok((round.round_id, OffsetDateTime::now_utc()));
        }
        if Instant::now() > deadline {
            return Err("no round within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the execution is `waiting_for_input` (polled every 1 ms). The worker stores
/// the round first and then records its request event and the lifecycle change; a response
/// timed from the round's first sight would also time the worker's own setup commits, which
/// hold SQLite's write lock then. A person, a test or a service answers a round it saw
/// waiting, so the measured path starts there.
async fn wait_waiting(handle: &AsyncExecutionHandle) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while handle.snapshot().await?.lifecycle != ExecutionStatus::WaitingForInput {
        if Instant::now() > deadline {
            return Err("not waiting_for_input within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// How the child process answers: through the kit, or by POSTing to `m3 serve`'s JSON API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerPath {
    /// `respond_elicitation` on a handle of the kit.
    Kit,
    /// `POST /api/v1/executions/{id}/rounds/{round}/responses` to a server in the child.
    Http,
}

impl AnswerPath {
    /// The child's subcommand.
    fn command(self) -> &'static str {
        match self {
            Self::Kit => "respond-child",
            Self::Http => "respond-child-http",
        }
    }
}

/// A kit that answers only: no worker, no recovery.
async fn responder_kit(database: &str) -> Result<AsyncMcpTestKit, Error> {
    Ok(AsyncMcpTestKit::builder()
        .database(database)
        .recover_on_open(false)
        .embedded_worker(false)
        .recovery_sweep(None)
        .build()
        .await?)
}

/// Child process: reads execution ids on stdin; for each, polls for its round, answers it
/// once the execution waits (through `path`), and prints `<visible_unix_us> <respond_unix_us>`.
pub(crate) async fn responder(database: &str, path: AnswerPath) -> Result<(), Error> {
    let kit = responder_kit(database).await?;
    let server = match path {
        AnswerPath::Kit => None,
        AnswerPath::Http => Some(crate::respond_http::Server::start(kit.clone()).await?),
    };
    let mut lines = BufReader::new(std::io::stdin()).lines();
    let mut out = std::io::stdout();
    while let Some(line) = lines.next().transpose()? {
        let handle = kit.attach(line.trim()).await?;
        let (round_id, visible) = wait_visible(&handle).await?;
        wait_waiting(&handle).await?;
        let respond = OffsetDateTime::now_utc();
        match &server {
            None => answer(&handle, &round_id).await?,
            Some(server) => {
                let (responses, key) = answer_of(&round_id);
                server
                    .answer(handle.execution_id(), &round_id, &responses, &key)
                    .await?;
            }
        }
        writeln!(out, "{} {}", micros(visible), micros(respond))?;
        out.flush()?;
    }
    if let Some(server) = server {
        server.stop().await?;
    }
    kit.close().await?;
    Ok(())
}

/// The answer every benchmark round gets, and its idempotency key.
fn answer_of(round_id: &str) -> (m3_types::ResponseMap, String) {
    (
        address("shipping_address", "Pune"),
        format!("address-{round_id}"),
    )
}

async fn answer(handle: &AsyncExecutionHandle, round_id: &str) -> Result<(), Error> {
    let (responses, key) = answer_of(round_id);
    handle
        .respond_elicitation(round_id, responses, &key)
        .await?;
    Ok(())
}

fn retry_started(result: &m3_types::ExecutionResult) -> Result<OffsetDateTime, Error> {
    let trace = ExecutionTrace::of(result)?;
    let call = trace.tool_calls().next().ok_or("no tool call")?;
    Ok(call.attempts.get(1).ok_or("no retry attempt")?.started_at)
}

/// The latencies of one path: submit -> visible and respond -> retry, in ms.
#[derive(Default)]
pub(crate) struct Series {
    pub(crate) visible: Vec<f64>,
    pub(crate) retry: Vec<f64>,
}

/// Runs `rounds` executions answered in this process, then `rounds` answered by a child
/// process, on the store `database` names, and prints both beside the targets.
pub(crate) async fn bench(backend: &str, database: &str, rounds: usize) -> Result<(), Error> {
    let exe = std::env::current_exe()?.display().to_string();
    let kit = AsyncMcpTestKit::builder()
        .database(database)
        .build()
        .await?;
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    let same = same_process(&agent, &exe, rounds).await?;
    let cross = other_process(&agent, &exe, database, rounds, AnswerPath::Kit).await?;
    let http = other_process(&agent, &exe, database, rounds, AnswerPath::Http).await?;
    kit.close().await?;
    let same_retry = Summary::of(same.retry);
    let reference = same_retry.map_or_else(String::new, |s| {
        format!(
            "{TARGET}; same process p50 {:.2} ms, p99 {:.2} ms",
            s.p50, s.p99
        )
    });
    print_row(
        &format!("[{backend}] submit -> visible, same process"),
        Summary::of(same.visible),
        "(no target)",
    );
    print_row(
        &format!("[{backend}] submit -> visible, other process"),
        Summary::of(cross.visible),
        "(no target)",
    );
    print_row(
        &format!("[{backend}] respond -> MCP retry, same process"),
        same_retry,
        "(reference of the next row)",
    );
    let cross_retry = Summary::of(cross.retry);
    let http_reference = cross_retry.map_or_else(String::new, |s| {
        format!(
            "{HTTP_TARGET}; through the kit p50 {:.2} ms (+{:.2} ms allowed)",
            s.p50, HTTP_ALLOWANCE_MS
        )
    });
    print_row(
        &format!("[{backend}] respond -> MCP retry, other process"),
        cross_retry,
        &reference,
    );
    print_row(
        &format!("[{backend}] POST answer -> MCP retry, other process, m3 serve"),
        Summary::of(http.retry),
        &http_reference,
    );
    Ok(())
}

fn options(exe: &str) -> SubmitOptions {
    // This binary is its own shipping server (`serve-shipping`).
    SubmitOptions::new()
        .server(shipping(exe, "serve-shipping"))
        .human_input(HumanInput::Managed)
}

pub(crate) async fn same_process(
    agent: &AsyncAgent,
    exe: &str,
    rounds: usize,
) -> Result<Series, Error> {
    let mut series = Series::default();
    for _ in 0..rounds {
        let submitted = OffsetDateTime::now_utc();
        let handle = agent.submit("Book a shipment.", options(exe)).await?;
        let (round_id, visible) = wait_visible(&handle).await?;
        wait_waiting(&handle).await?;
        let respond = OffsetDateTime::now_utc();
        answer(&handle, &round_id).await?;
        let result = handle.result(Some(Duration::from_secs(60))).await?;
        series
            .visible
            .push(millis_between(micros(submitted), micros(visible)));
        series.retry.push(millis_between(
            micros(respond),
            micros(retry_started(&result)?),
        ));
    }
    Ok(series)
}

/// The child responder's pipes.
struct Child {
    process: std::process::Child,
    to: ChildStdin,
    from: Lines<BufReader<ChildStdout>>,
}

fn spawn_responder(exe: &str, database: &str, path: AnswerPath) -> Result<Child, Error> {
    let mut process = Command::new(exe)
        .args([path.command(), database])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let to = process.stdin.take().ok_or("stdin")?;
    let from = BufReader::new(process.stdout.take().ok_or("stdout")?).lines();
    Ok(Child { process, to, from })
}

async fn other_process(
    agent: &AsyncAgent,
    exe: &str,
    database: &str,
    rounds: usize,
    path: AnswerPath,
) -> Result<Series, Error> {
    let mut child = spawn_responder(exe, database, path)?;
    let mut series = Series::default();
    for _ in 0..rounds {
        let submitted = OffsetDateTime::now_utc();
        let handle = agent.submit("Book a shipment.", options(exe)).await?;
        writeln!(child.to, "{}", handle.execution_id())?;
        child.to.flush()?;
        let line = child.from.next().ok_or("responder ended")??;
        let mut parts = line.split_whitespace().map(str::parse::<i128>);
        let (Some(Ok(visible)), Some(Ok(respond))) = (parts.next(), parts.next()) else {
            return Err(format!("bad responder line {line:?}").into());
        };
        let result = handle.result(Some(Duration::from_secs(60))).await?;
        series
            .visible
            .push(millis_between(micros(submitted), visible));
        series
            .retry
            .push(millis_between(respond, micros(retry_started(&result)?)));
    }
    drop(child.to);
    child.process.wait()?;
    Ok(series)
}
