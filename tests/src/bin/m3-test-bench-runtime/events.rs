//! Commit -> an `m3 events --follow` process prints the record: the change feed's latency
//! to a reader in another process (woken by the store's change signal), beside a follower
//! in the committing process (`m3_store::changes::follow`, the same-process reference).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use m3_store::{ExecutionStore, NewExecution};
use m3_types::Cursor;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::Error;
use crate::stats::{Summary, print_row};
use crate::worker::m3_bin;

/// How long one record may take before the benchmark gives up.
const PATIENCE: Duration = Duration::from_secs(10);

/// `commits` cancel requests, one at a time, each timed from the end of its commit to the
/// line a child `m3 events --follow` prints for it, and to the same-process follower.
pub(crate) async fn bench(backend: &str, db: &str, commits: usize) -> Result<(), Error> {
    m3_store_postgres::register();
    let store = m3_store::open(db).await?;
    let mut ids = Vec::with_capacity(commits);
    for _ in 0..commits {
        let record = store
            .create_execution(NewExecution::new(serde_json::json!({"bench": "events"})))
            .await?;
        ids.push(record.execution_id);
    }
    let start = store.read_changes(Cursor::START, 10_000).await?.next;
    let mut child = Command::new(m3_bin())
        .args([
            "--db",
            db,
            "events",
            "--follow",
            "--after",
            &start.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (other_tx, mut other_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let seen = Instant::now();
            let id = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["execution_id"].as_str().map(str::to_owned));
            if other_tx.send((id, seen)).is_err() {
                break;
            }
        }
    });
    let (same_tx, mut same_rx) = mpsc::unbounded_channel();
    let follower: Arc<dyn ExecutionStore> = Arc::clone(&store);
    tokio::spawn(async move {
        let mut changes = Box::pin(m3_store::changes::follow(follower, start));
        while let Some(Ok(record)) = changes.next().await {
            if same_tx
                .send((Some(record.execution_id), Instant::now()))
                .is_err()
            {
                break;
            }
        }
    });
    // The child is ready once it prints the first record (unmeasured warm-up).
    store.request_cancel(&ids[0], None).await?;
    wait_for(&mut other_rx, &ids[0]).await?;
    wait_for(&mut same_rx, &ids[0]).await?;
    let (mut other, mut same) = (Vec::new(), Vec::new());
    for id in &ids[1..] {
        store.request_cancel(id, None).await?;
        let committed = Instant::now();
        let seen_other = wait_for(&mut other_rx, id).await?;
        let seen_same = wait_for(&mut same_rx, id).await?;
        other.push(millis(seen_other.saturating_duration_since(committed)));
        same.push(millis(seen_same.saturating_duration_since(committed)));
    }
    child.start_kill()?;
    let _ = child.wait().await;
    println!(
        "== commit -> record printed ({backend}, {} commits)",
        ids.len() - 1
    );
    print_row(
        "  m3 events --follow (other process)",
        Summary::of(other),
        "target p50 <= 5 ms",
    );
    print_row(
        "  changes::follow (same process)",
        Summary::of(same),
        "reference",
    );
    Ok(())
}

/// The time the record of execution `id` arrived (earlier arrivals of others are dropped).
async fn wait_for(
    rx: &mut mpsc::UnboundedReceiver<(Option<String>, Instant)>,
    id: &str,
) -> Result<Instant, Error> {
    let deadline = tokio::time::sleep(PATIENCE);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            got = rx.recv() => match got {
                Some((Some(seen), at)) if seen == id => return Ok(at),
                Some(_) => {}
                None => return Err("the reader ended".into()),
            },
            () = &mut deadline => return Err(format!("no record for {id} in {PATIENCE:?}").into()),
        }
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
