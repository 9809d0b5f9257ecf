//! `worker`: `m3 submit` -> an idle `m3 worker` starts the execution, and many managed
//! executions waiting at once in one `m3 worker`: its memory and idle CPU, its servers'
//! memory separately.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_store::{EVENT_EXECUTION_CREATED, EVENT_EXECUTION_STATE_CHANGED};
use m3_tests::runtime_support::{call, shipping};
use m3_types::HumanInput;
use serde_json::Value;

use crate::Error;
use crate::stats::{Summary, cpu_ticks, descendants, print_row, status_kb, ticks_per_second};

/// How long the waiting worker's CPU is watched.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// The `m3` binary: `M3_BIN`, else the one beside this binary, else `m3` on `PATH`.
pub(crate) fn m3_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("M3_BIN") {
        return PathBuf::from(bin);
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("m3")))
        .filter(|path| path.exists());
    sibling.unwrap_or_else(|| PathBuf::from("m3"))
}

/// The fixture shipping server beside this binary (`m3-test-shipping-server`).
fn shipping_server() -> Result<String, Error> {
    let exe = std::env::current_exe()?;
    let server = exe
        .parent()
        .ok_or("no binary directory")?
        .join("m3-test-shipping-server");
    if !server.exists() {
        return Err(format!("{} is not built", server.display()).into());
    }
    Ok(server.display().to_string())
}

/// A running `m3 --json worker` and its lines.
struct Worker {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Worker {
    fn start(db: &Path, concurrency: usize) -> Result<Self, Error> {
        let mut child = Command::new(m3_bin())
            .arg("--db")
            .arg(db)
            .args(["--json", "worker", "--drain-timeout", "0", "--concurrency"])
            .arg(concurrency.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("worker stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        });
        let worker = Self { child, lines };
        worker.next_of("started", None)?;
        Ok(worker)
    }

    /// The next line of `kind` (for `execution`, when given).
    fn next_of(&self, kind: &str, execution: Option<&str>) -> Result<Value, Error> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .map_err(|_| format!("no '{kind}' line from the worker"))?;
            if line["type"] == kind
                && execution.is_none_or(|id| line["execution_id"].as_str() == Some(id))
            {
                return Ok(line);
            }
        }
    }

    /// SIGTERM (drain timeout 0: the rest fails closed), then waits for the exit.
    fn stop(mut self) -> Result<(), Error> {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        self.child.wait()?;
        Ok(())
    }
}

/// The store's own timestamps: execution created (queued by `m3 submit`) -> moved to
/// `starting` by the worker's claim, in ms.
async fn queued_to_started(kit: &AsyncMcpTestKit, id: &str) -> Result<f64, Error> {
    let events = kit.attach(id).await?.events(None).await?;
    let queued = events
        .iter()
        .find(|e| e.kind == EVENT_EXECUTION_CREATED)
        .ok_or("no created event")?;
    let started = events
        .iter()
        .find(|e| e.kind == EVENT_EXECUTION_STATE_CHANGED && e.payload["lifecycle"] == "starting")
        .ok_or("no starting event")?;
    Ok((started.timestamp - queued.timestamp).as_seconds_f64() * 1000.0)
}

/// `starts` times: `m3 submit` one `quote` execution (no input round) to an idle worker,
/// wait until it finished.
pub(crate) async fn submit_to_start(dir: &Path, starts: usize) -> Result<(), Error> {
    let db = dir.join("starts.sqlite");
    let server = format!("shipping={} modern", shipping_server()?);
    let worker = Worker::start(&db, 4)?;
    let kit = reader_kit(&db).await?;
    let mut samples = Vec::new();
    for _ in 0..starts {
        let out = Command::new(m3_bin())
            .arg("--db")
            .arg(&db)
            .args(["--json", "submit", "--server", &server])
            .args([
                "--call",
                "shipping:quote",
                "--arguments",
                r#"{"weight_kg": 2}"#,
            ])
            .output()?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
        let submitted: Value = serde_json::from_slice(&out.stdout)?;
        let id = submitted["execution_id"]
            .as_str()
            .ok_or("no execution id")?;
        worker.next_of("finished", Some(id))?;
        samples.push(queued_to_started(&kit, id).await?);
    }
    kit.close().await?;
    worker.stop()?;
    print_row(
        "m3 submit -> idle worker starts it",
        Summary::of(samples),
        "target p50 <= 10 ms",
    );
    Ok(())
}

/// A kit that only reads (no worker, no sweep, no recovery).
pub(crate) async fn reader_kit(db: &Path) -> Result<AsyncMcpTestKit, Error> {
    Ok(AsyncMcpTestKit::builder()
        .database(db)
        .embedded_worker(false)
        .recovery_sweep(None)
        .recover_on_open(false)
        .build()
        .await?)
}

/// `waiting` managed `book_shipment` executions, queued by this process, all claimed by one
/// `m3 worker --concurrency waiting`; once every round is pending, what the worker costs.
pub(crate) async fn waiting_at_once(dir: &Path, waiting: usize) -> Result<(), Error> {
    waiting_at_once_over(dir, waiting, IDLE_WINDOW).await
}

/// [`waiting_at_once`], the idle CPU watched over `window`.
pub(crate) async fn waiting_at_once_over(
    dir: &Path,
    waiting: usize,
    window: Duration,
) -> Result<(), Error> {
    let db = dir.join("waiting.sqlite");
    let server = shipping_server()?;
    let kit = reader_kit(&db).await?;
    let agent = kit.agents([call("book_shipment")])?.remove(0);
    for _ in 0..waiting {
        let options = SubmitOptions::new()
            .server(shipping(&server, "modern"))
            .human_input(HumanInput::Managed);
        agent.submit("Book a shipment.", options).await?;
    }
    let started = Instant::now();
    let worker = Worker::start(&db, waiting)?;
    let pid = worker.child.id();
    wait_all_pending(&kit, waiting).await?;
    let ready = started.elapsed();
    // Let the claim burst's work settle before watching the idle worker.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu_ticks(pid).ok_or("no worker stat")?;
    let watch = Instant::now();
    tokio::time::sleep(window).await;
    let after = cpu_ticks(pid).ok_or("no worker stat")?;
    let cpu = (after - before) as f64 / ticks_per_second() / watch.elapsed().as_secs_f64();
    let rss = status_kb(pid, "VmRSS").ok_or("no worker status")?;
    let servers = descendants(pid);
    let server_kb: u64 = servers.iter().filter_map(|p| status_kb(*p, "VmRSS")).sum();
    kit.close().await?;
    worker.stop()?;
    report_waiting(waiting, ready, rss, (cpu, window), servers.len(), server_kb);
    Ok(())
}

/// Waits until `waiting` rounds are pending (at most 20 minutes).
async fn wait_all_pending(kit: &AsyncMcpTestKit, waiting: usize) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(1200);
    loop {
        let pending = kit.pending_rounds().await?.len();
        if pending >= waiting {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {pending} of {waiting} rounds pending").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn report_waiting(
    waiting: usize,
    ready: Duration,
    rss_kb: u64,
    (cpu, window): (f64, Duration),
    servers: usize,
    server_kb: u64,
) {
    let mb = |kb: u64| kb as f64 / 1024.0;
    let per = |kb: u64| kb as f64 / waiting.max(1) as f64;
    println!(
        "{:<48} {waiting} rounds pending after {:.1} s",
        format!("{waiting} managed executions waiting in one worker"),
        ready.as_secs_f64()
    );
    println!(
        "{:<48} {:>8.1} MB ({:.0} KB per execution)  | target <= 100 MB at 1,000",
        "  worker RSS (without its servers)",
        mb(rss_kb),
        per(rss_kb)
    );
    println!(
        "{:<48} {:>8.3} cores ({:.1} ms CPU per s)  | target ~0",
        format!("  worker CPU while idle, over {} s", window.as_secs()),
        cpu,
        cpu * 1000.0
    );
    println!(
        "{:<48} {:>8.1} MB in {servers} processes ({:.0} KB each)  | reported separately",
        "  servers' RSS",
        mb(server_kb),
        server_kb as f64 / servers.max(1) as f64
    );
}
