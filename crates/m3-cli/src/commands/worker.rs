//! `m3 worker`: runs queued executions of the store until SIGINT/SIGTERM, then drains and
//! exits 0 (CLI.md).

use std::path::Path;
use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, DrainReport, PoolEvent, PoolOptions, SweepOptions, WorkerPool};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cli::WorkerArgs;
use crate::failure::Failure;
use crate::output::Output;
use crate::stop_signal::StopSignals;

/// How often a drain says how long the running executions have left.
const COUNTDOWN_EVERY: Duration = Duration::from_secs(5);

pub(crate) async fn run(out: Output, db: &Path, args: WorkerArgs) -> Result<(), Failure> {
    let mut sweep =
        SweepOptions::default().max_queue_age(args.max_queue_age.map(Duration::from_secs_f64));
    if let Some(every) = args.sweep_every {
        sweep = sweep.every(Duration::from_secs_f64(every));
    }
    let options = PoolOptions::queue_worker()
        .concurrency(Some(args.concurrency))
        .drain_timeout(Duration::from_secs_f64(args.drain_timeout))
        .claim_lease(Duration::from_secs_f64(args.claim_lease))
        .sweep(Some(sweep))
        .handover_only(args.handover_only)
        .events_from_start(true);
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    // Opening runs recovery first; the kit's embedded worker is this pool. OAuth tokens
    // are shared with every process on the store when a key is given (docs/oauth.md).
    let mut builder = AsyncMcpTestKit::builder();
    if let Some((key, previous)) = crate::oauth::keys()? {
        builder = builder.oauth_key(key, previous);
    }
    let kit = builder
        .database(db)
        .env(env)
        .round_limits(args.round_limits.limits())
        .worker_options(options)
        .build()
        .await?;
    let pool = kit
        .worker_pool()
        .cloned()
        .ok_or_else(|| Failure::other("internal", "the kit has no worker pool"))?;
    let mut events = pool.events();
    out_event(
        out,
        "started",
        json!({"worker_id": pool.owner_id(), "concurrency": args.concurrency,
            "handover_only": args.handover_only}),
    )?;
    let notifier_stop = tokio_util::sync::CancellationToken::new();
    let notifier =
        crate::notify_args::start_in_process(&args.notify, &kit, notifier_stop.clone()).await?;
    let metrics = match args.metrics {
        Some(addr) => {
            Some(crate::metrics_listener::start(out, addr, &kit, notifier_stop.clone()).await?)
        }
        None => None,
    };
    let mut signals = StopSignals::service()?;
    loop {
        tokio::select! {
            _ = signals.next() => break,
            event = events.recv() => match event {
                Some(event) => report_event(out, &event)?,
                None => break,
            },
        }
    }
    let drained = drain(out, &pool, &mut events, &mut signals, args.drain_timeout).await?;
    notifier_stop.cancel();
    if let Some(notifier) = notifier {
        let _ = notifier.await;
    }
    if let Some(metrics) = metrics {
        let _ = metrics.await;
    }
    out_event(
        out,
        "stopped",
        json!({"finished": drained.finished, "handed_over": drained.handed_over,
            "failed_closed": drained.failed_closed}),
    )?;
    kit.close().await?;
    Ok(())
}

/// The drain after the first stop signal: running executions get `drain_timeout` seconds,
/// a countdown says how long is left, and a second signal fails the rest closed at once.
async fn drain(
    out: Output,
    pool: &WorkerPool,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<PoolEvent>,
    signals: &mut StopSignals,
    drain_timeout: f64,
) -> Result<DrainReport, Failure> {
    let until = Instant::now() + Duration::from_secs_f64(drain_timeout);
    out_event(
        out,
        "draining",
        json!({"running": pool.running(), "seconds_left": drain_timeout}),
    )?;
    out.say("(SIGTERM or Ctrl-C again: fail what still runs closed now)");
    let force = CancellationToken::new();
    let drain = pool.shutdown_or(force.clone().cancelled_owned());
    tokio::pin!(drain);
    let mut countdown = tokio::time::interval_at(Instant::now() + COUNTDOWN_EVERY, COUNTDOWN_EVERY);
    let report = loop {
        tokio::select! {
            report = &mut drain => break report,
            Some(event) = events.recv() => report_event(out, &event)?,
            _ = countdown.tick() => {
                let left = until.saturating_duration_since(Instant::now()).as_secs();
                out_event(out, "drain_countdown", json!({"running": pool.running(), "seconds_left": left}))?;
            }
            stop = signals.next(), if !force.is_cancelled() => {
                force.cancel();
                out_event(out, "drain_forced", json!({"signal": stop.name(), "running": pool.running()}))?;
            }
        }
    };
    while let Ok(event) = events.try_recv() {
        report_event(out, &event)?;
    }
    Ok(report)
}

fn report_event(out: Output, event: &PoolEvent) -> Result<(), Failure> {
    match event {
        PoolEvent::Claimed {
            execution_id,
            owner_id,
        } => out_event(
            out,
            "claimed",
            json!({"execution_id": execution_id, "worker_id": owner_id}),
        ),
        PoolEvent::RoundPending {
            execution_id,
            round_id,
        } => out_event(
            out,
            "round_pending",
            json!({"execution_id": execution_id, "round_id": round_id}),
        ),
        PoolEvent::Finished {
            execution_id,
            outcome,
            error_code,
        } => out_event(
            out,
            "finished",
            json!({"execution_id": execution_id, "outcome": outcome, "error_code": error_code}),
        ),
        PoolEvent::HandedOver {
            execution_id,
            successor,
        } => out_event(
            out,
            "handed_over",
            json!({"execution_id": execution_id, "successor": successor}),
        ),
        PoolEvent::Adopted { execution_id } => {
            out_event(out, "adopted", json!({"execution_id": execution_id}))
        }
        PoolEvent::Parked {
            execution_id,
            round_id,
        } => out_event(
            out,
            "parked",
            json!({"execution_id": execution_id, "round_id": round_id}),
        ),
        PoolEvent::Resumed { execution_id } => {
            out_event(out, "resumed", json!({"execution_id": execution_id}))
        }
        _ => Ok(()),
    }
}

/// One `{"type": KIND, "at": ..., ...}` line with `--json`, else a short line for people
/// starting with the same UTC timestamp.
fn out_event(out: Output, kind: &str, mut value: serde_json::Value) -> Result<(), Failure> {
    let at = m3_types::timestamp::format(time::OffsetDateTime::now_utc());
    if out.is_json() {
        if let Some(fields) = value.as_object_mut() {
            fields.insert("at".to_owned(), json!(at));
        }
        return out.event(kind, &value);
    }
    let fields: Vec<String> = value
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{k}={}", crate::output::compact(v)))
                .collect()
        })
        .unwrap_or_default();
    out.say(format!("{at} {kind} {}", fields.join(" ")));
    Ok(())
}
