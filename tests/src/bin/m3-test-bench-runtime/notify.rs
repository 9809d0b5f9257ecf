//! Webhook delivery: a round committed -> a local receiver has its signed POST (one at a
//! time, p50/p99), and 1,000 rounds created at once -> all delivered, with one in-process
//! notifier (`m3_kit::notify`). The receiver is a plain HTTP/1.1 listener in this process
//! that notes when each request arrived (the signatures are verified by the real Standard
//! Webhooks library in `cli_webhooks.rs`, not here).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_kit::notify::{Notifier, NotifierOptions};
use m3_store::conformance::sample_round;
use m3_store::subscriptions::{NewSubscription, WebhookSecret};
use m3_store::{CreateRound, ExecutionStore, NewExecution};
use m3_types::ChangeRecordKind;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::stats::{Summary, print_row};

/// How long the benchmark waits for one delivery before it gives up.
const PATIENCE: Duration = Duration::from_secs(30);

/// Rounds of the burst.
pub(crate) const BURST: usize = 1_000;

/// `latency_rounds` rounds one at a time, then `burst` at once, on the store at `db`.
pub(crate) async fn bench(
    backend: &str,
    db: &str,
    latency_rounds: usize,
    burst: usize,
) -> Result<(), Error> {
    m3_store_postgres::register();
    let store = m3_store::open(db).await?;
    let (url, mut arrivals) = receiver().await?;
    let subscriptions = store.subscription_store().await?;
    let new = NewSubscription::new(url, WebhookSecret::generate()?)
        .with_events([ChangeRecordKind::RoundPending])
        .allow_loopback(true);
    subscriptions.create_subscription(new).await?;
    let stop = CancellationToken::new();
    let notifier = Notifier::new(Arc::clone(&store), NotifierOptions::default()).await?;
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { notifier.run(stop).await }
    });
    // Warm-up: the notifier claims the subscription and delivers one round.
    let first = pending_round(&store).await?;
    wait_for(&mut arrivals, &first).await?;
    let mut latencies = Vec::with_capacity(latency_rounds);
    for _ in 0..latency_rounds {
        let round = pending_round(&store).await?;
        let committed = Instant::now();
        let arrived = wait_for(&mut arrivals, &round).await?;
        latencies.push(arrived.saturating_duration_since(committed).as_secs_f64() * 1_000.0);
    }
    print_row(
        &format!("[{backend}] round committed -> receiver has the signed POST"),
        Summary::of(latencies),
        "target p50 <= 10 ms",
    );
    burst_of(backend, &store, &mut arrivals, burst).await?;
    stop.cancel();
    running.await??;
    Ok(())
}

/// `count` rounds created at once (concurrently), then every delivery awaited.
async fn burst_of(
    backend: &str,
    store: &Arc<dyn ExecutionStore>,
    arrivals: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    count: usize,
) -> Result<(), Error> {
    let started = Instant::now();
    let creates = (0..count).map(|_| pending_round(store));
    let rounds: Vec<String> = futures_util::future::try_join_all(creates).await?;
    let all_committed = Instant::now();
    let mut waiting: HashMap<String, ()> = rounds.into_iter().map(|r| (r, ())).collect();
    let mut last = all_committed;
    while !waiting.is_empty() {
        let (round, at) = tokio::time::timeout(PATIENCE, arrivals.recv())
            .await?
            .ok_or("the receiver stopped")?;
        if waiting.remove(&round).is_some() {
            last = at;
        }
    }
    println!(
        "[{backend}] {count} rounds created at once -> all delivered: {:.2} s after the first create, {:.2} s after the last commit (creating took {:.2} s) | target <= 5 s",
        last.duration_since(started).as_secs_f64(),
        last.saturating_duration_since(all_committed).as_secs_f64(),
        all_committed.duration_since(started).as_secs_f64(),
    );
    Ok(())
}

/// A new execution with one pending round; the round's id.
async fn pending_round(store: &Arc<dyn ExecutionStore>) -> Result<String, Error> {
    let execution = store
        .create_execution(NewExecution::new(serde_json::json!({"bench": "notify"})))
        .await?;
    let round_id = m3_types::new_id();
    let mut round = sample_round(&execution.execution_id, &round_id);
    round.created_at = m3_store::store_now(store.clock().as_ref());
    let rounds = store.managed_input_store().await?;
    rounds
        .create_round(CreateRound::new(
            round,
            "bench-worker",
            Duration::from_secs(600),
        ))
        .await?;
    Ok(round_id)
}

/// Waits for the delivery of `round`; when it arrived.
async fn wait_for(
    arrivals: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    round: &str,
) -> Result<Instant, Error> {
    loop {
        let (id, at) = tokio::time::timeout(PATIENCE, arrivals.recv())
            .await?
            .ok_or("the receiver stopped")?;
        if id == round {
            return Ok(at);
        }
    }
}

/// A loopback HTTP/1.1 listener answering every POST `204` and sending the round id of each
/// body with its arrival time; its URL.
async fn receiver() -> Result<(String, mpsc::UnboundedReceiver<(String, Instant)>), Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                if let Ok(Some(round)) = one_request(stream).await {
                    let _ = tx.send((round, Instant::now()));
                }
            });
        }
    });
    Ok((url, rx))
}

/// Reads one request, answers `204`, and returns the `data.round_id` of its body.
async fn one_request(mut stream: TcpStream) -> Result<Option<String>, Error> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let (head_end, length) = loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let arrived: Value = serde_json::from_slice(&buffer[head_end..]).unwrap_or(Value::Null);
    stream
        .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await?;
    Ok(arrived["data"]["round_id"].as_str().map(str::to_owned))
}
