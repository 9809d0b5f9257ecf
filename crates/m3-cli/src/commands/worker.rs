//! `m3 worker`: runs queued executions of the store until SIGINT/SIGTERM, then drains and
//! exits 0 (CLI.md).

use std::path::Path;
use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, PoolEvent, PoolOptions, SweepOptions};
use serde_json::json;

use crate::cli::WorkerArgs;
use crate::commands::serve::signal;
use crate::failure::Failure;
use crate::output::Output;

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
        json!({"worker_id": pool.owner_id(), "concurrency": args.concurrency}),
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
    let stopping = signal();
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            () = &mut stopping => break,
            event = events.recv() => match event {
                Some(event) => report_event(out, &event)?,
                None => break,
            },
        }
    }
    out_event(out, "draining", json!({"running": pool.running()}))?;
    let drain = pool.shutdown();
    tokio::pin!(drain);
    let drained = loop {
        tokio::select! {
            report = &mut drain => break report,
            Some(event) = events.recv() => report_event(out, &event)?,
        }
    };
    while let Ok(event) = events.try_recv() {
        report_event(out, &event)?;
    }
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
        json!({"finished": drained.finished, "failed_closed": drained.failed_closed}),
    )?;
    kit.close().await?;
    Ok(())
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
        _ => Ok(()),
    }
}

/// One `{"type": KIND, ...}` line with `--json`, else a short line for people.
fn out_event(out: Output, kind: &str, value: serde_json::Value) -> Result<(), Failure> {
    if out.is_json() {
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
    out.say(format!("{kind} {}", fields.join(" ")));
    Ok(())
}
