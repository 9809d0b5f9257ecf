//! `handover`: the three figures of live handover and parking (issue 32), in one run:
//! transferable executions waiting in one `m3 worker` (parked: its RSS and idle CPU) beside
//! the same for stdio executions; the handover of many waiting executions from a stopping
//! worker to a live one; and respond -> retry after a handover beside the same without one.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_tests::runtime_support::{address, call};
use m3_types::{HttpServer, HumanInput, ServerTrust};
use serde_json::Value;

use crate::Error;
use crate::stats::{Summary, cpu_ticks, print_row, status_kb, ticks_per_second};
use crate::worker::{m3_bin, reader_kit};

/// A running `m3` child (a worker or the HTTP server) and its stdout lines.
struct Process {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Process {
    fn start(mut command: Command) -> Result<Self, Error> {
        let mut child = command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Self { child, lines })
    }

    /// Reads lines until `n` of `type` `kind` were seen; how long that took.
    fn count_of(&self, kind: &str, n: usize) -> Result<Duration, Error> {
        let started = Instant::now();
        self.count_each(&[(kind, n)])?;
        Ok(started.elapsed())
    }

    /// Reads lines until, for each `(kind, n)`, `n` lines of that `type` were seen (in any
    /// interleaving); when the first kind's count was reached.
    fn count_each(&self, wanted: &[(&str, usize)]) -> Result<Duration, Error> {
        let started = Instant::now();
        let mut seen = vec![0usize; wanted.len()];
        let mut first_done = (wanted[0].1 == 0).then(|| started.elapsed());
        while seen.iter().zip(wanted).any(|(s, (_, n))| s < n) {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(600))
                .map_err(|_| format!("fewer lines than wanted: {wanted:?}, seen {seen:?}"))?;
            let value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if let Some(at) = wanted.iter().position(|(kind, _)| value["type"] == *kind) {
                seen[at] += 1;
                if at == 0 && seen[0] == wanted[0].1 {
                    first_done = Some(started.elapsed());
                }
            }
        }
        Ok(first_done.unwrap_or_else(|| started.elapsed()))
    }

    /// The next line of `type` `kind`.
    fn next_of(&self, kind: &str) -> Result<Value, Error> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(600))
                .map_err(|_| format!("no '{kind}' line"))?;
            let value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if value["type"] == kind {
                return Ok(value);
            }
        }
    }

    fn signal(&self, name: &str) -> Result<(), Error> {
        Command::new("kill")
            .args([name, &self.child.id().to_string()])
            .status()?;
        Ok(())
    }

    fn stop(mut self) -> Result<(), Error> {
        self.signal("-TERM")?;
        self.child.wait()?;
        Ok(())
    }
}

/// `m3 example-server shipping --http 127.0.0.1:0 --era 2026-07-28`; its URL.
fn http_server() -> Result<(Process, String), Error> {
    let mut command = Command::new(m3_bin());
    command.args([
        "example-server",
        "shipping",
        "--http",
        "127.0.0.1:0",
        "--era",
        "2026-07-28",
    ]);
    let server = Process::start(command)?;
    let url = server
        .lines
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "the HTTP server printed no URL")?;
    Ok((server, url))
}

/// `m3 --json worker` on `db` (a SQLite path or a PostgreSQL URL).
fn worker(db: &str, concurrency: usize, drain: &str) -> Result<Process, Error> {
    let mut command = Command::new(m3_bin());
    if db.starts_with("postgres") {
        command.env("M3_DB", db);
    } else {
        command.arg("--db").arg(db).env_remove("M3_DB");
    }
    command.args([
        "--json",
        "worker",
        "--drain-timeout",
        drain,
        "--concurrency",
    ]);
    command.arg(concurrency.to_string());
    let worker = Process::start(command)?;
    worker.next_of("started")?;
    Ok(worker)
}

/// Queues `n` managed `book_shipment` executions on the HTTP server `url`.
async fn submit(kit: &AsyncMcpTestKit, url: &str, n: usize) -> Result<Vec<String>, Error> {
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    let server = HttpServer::new("shipping", url).with_trust(ServerTrust::Loopback);
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        // Waiting is the point: no execution timeout while the bench sets up thousands.
        let options = SubmitOptions::new()
            .server(server.clone())
            .human_input(HumanInput::Managed)
            .timeout(Duration::from_secs(3_600));
        ids.push(
            agent
                .submit("Book a shipment.", options)
                .await?
                .execution_id()
                .to_owned(),
        );
    }
    Ok(ids)
}

/// `waiting` transferable executions parked in one worker: RSS and CPU over `window`.
pub(crate) async fn parked_at_once(
    dir: &std::path::Path,
    waiting: usize,
    window: Duration,
) -> Result<(), Error> {
    let db = dir.join("parked.sqlite").display().to_string();
    let (server, url) = http_server()?;
    let kit = reader_kit(std::path::Path::new(&db)).await?;
    submit(&kit, &url, waiting).await?;
    // Parked executions give their slot back: a thousand at a time reach their rounds.
    let worker = worker(&db, waiting.min(1_000), "0")?;
    let pid = worker.child.id();
    let ready = worker.count_of("parked", waiting)?;
    // The burst's work settled.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = cpu_ticks(pid).ok_or("no worker stat")?;
    let watch = Instant::now();
    tokio::time::sleep(window).await;
    let after = cpu_ticks(pid).ok_or("no worker stat")?;
    let cpu = (after - before) as f64 / ticks_per_second() / watch.elapsed().as_secs_f64();
    let rss = status_kb(pid, "VmRSS").ok_or("no worker status")? as f64 / 1024.0;
    kit.close().await?;
    worker.stop()?;
    server.stop()?;
    println!(
        "{:<48} all parked after {:.1} s",
        format!("{waiting} transferable executions parked"),
        ready.as_secs_f64()
    );
    println!(
        "{:<48} {rss:>8.1} MB  | target <= 150 MB at 10,000",
        "  worker RSS"
    );
    println!(
        "{:<48} {cpu:>8.4} cores  | target <= 0.02",
        format!("  worker CPU while idle, over {} s", window.as_secs())
    );
    Ok(())
}

/// On `label`'s store `db`: `handed` executions waiting in a worker that gets SIGTERM,
/// handed to a live one; then respond -> retry for `answered` of them, beside `answered`
/// executions that were never handed over, in the same worker.
pub(crate) async fn handover(
    label: &str,
    db: &str,
    handed: usize,
    answered: usize,
) -> Result<(), Error> {
    let (server, url) = http_server()?;
    let kit = reader_kit(std::path::Path::new(db)).await?;
    let stopping = worker(db, handed.min(1_000), "30")?;
    let moved = submit(&kit, &url, handed).await?;
    stopping.count_of("parked", handed)?;
    let staying = worker(db, (handed + answered).min(1_000), "0")?;
    // Its registry entry is written as it starts; give the first heartbeat a moment.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let signalled = Instant::now();
    stopping.signal("-TERM")?;
    stopping.next_of("stopped")?;
    let handed_off = signalled.elapsed();
    // Taken over, they wait parked in the live worker too.
    // Taken over, they wait parked in the live worker too; counted from the stop line on.
    let taken = handed_off + staying.count_each(&[("adopted", handed), ("parked", handed)])?;
    print_row(
        &format!("[{label}] handover of {handed} waiting executions"),
        Summary::of(vec![handed_off.as_secs_f64() * 1000.0]),
        "target <= 5,000 ms (SIGTERM -> the stopping worker is done)",
    );
    print_row(
        &format!("[{label}]   ... all of them taken by the live worker"),
        Summary::of(vec![taken.as_secs_f64() * 1000.0]),
        "SIGTERM -> the last `adopted` line",
    );
    let after = respond_to_retry(&kit, &moved[..answered.min(moved.len())]).await?;
    let fresh = submit(&kit, &url, answered).await?;
    // Parked like the handed-over ones: the comparison is the handover's alone.
    staying.count_of("parked", answered)?;
    let without = respond_to_retry(&kit, &fresh).await?;
    let ratio = match (&after, &without) {
        (Some(a), Some(w)) if w.p50 > 0.0 => {
            format!("{:.2}x the figure without handover", a.p50 / w.p50)
        }
        _ => "no samples".to_owned(),
    };
    print_row(
        &format!("[{label}] respond -> retry, after a handover"),
        after,
        &ratio,
    );
    print_row(
        &format!("[{label}] respond -> retry, no handover"),
        without,
        "target: the first within 20%",
    );
    kit.close().await?;
    staying.stop()?;
    stopping.child.wait_with_output()?;
    server.stop()?;
    Ok(())
}

/// Answers each execution's pending round in turn; the store's response-validated ->
/// resolved time of each (the retry sent, the server's answer received), in ms.
async fn respond_to_retry(
    kit: &AsyncMcpTestKit,
    executions: &[String],
) -> Result<Option<Summary>, Error> {
    let mut samples = Vec::new();
    for id in executions {
        let handle = kit.attach(id).await?;
        let round = handle
            .pending_elicitation()
            .await?
            .ok_or("no pending round")?;
        let key = round.requests.keys().next().cloned().ok_or("no request")?;
        handle
            .respond_elicitation(&round.round_id, address(&key, "Pune"), "bench")
            .await?;
        let started = Instant::now();
        let details = loop {
            let details = handle.round(&round.round_id).await?;
            if details.diagnostics.resolved_at.is_some() {
                break details;
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err("a round was not resolved within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let diagnostics = details.diagnostics;
        if let (Some(validated), Some(resolved)) =
            (diagnostics.response_validated_at, diagnostics.resolved_at)
        {
            samples.push((resolved - validated).as_seconds_f64() * 1000.0);
        }
    }
    Ok(Summary::of(samples))
}
