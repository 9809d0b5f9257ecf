//! `m3 workers`: the workers registered on the store (`docs/workers.md`): where each runs,
//! since when, whether it is running or draining, and whether its heartbeat is recent.

use std::path::Path;

use m3_kit::DEFAULT_WORKER_HEARTBEAT;
use m3_kit::workers::WorkerEntry;
use serde_json::json;
use time::OffsetDateTime;

use crate::commands::inspect::open_existing_kit;
use crate::failure::Failure;
use crate::output::Output;

/// A worker is shown live while its last heartbeat is at most this many heartbeats old.
const LIVE_WITHIN_HEARTBEATS: u32 = 3;

/// `m3 workers`.
pub(crate) async fn run(out: Output, db: &Path) -> Result<(), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let outcome = async {
        let registry = kit.store().worker_registry().await?;
        let now = m3_kit::store_now(kit.store().clock().as_ref());
        let workers = registry.workers().await?;
        if out.is_json() {
            let all: Vec<_> = workers.iter().map(|w| worker_json(w, now)).collect();
            return out.document(&all);
        }
        if workers.is_empty() {
            out.say("no workers are registered on this store");
        }
        for worker in &workers {
            out.say(format!(
                "{}  {:<9} {:<6} {}@{} since {}, heartbeat {} s ago{}",
                worker.worker_id,
                worker.state.as_str(),
                if is_live(worker, now) {
                    "live"
                } else {
                    "silent"
                },
                worker.pid,
                worker.host,
                m3_types::timestamp::format(worker.started_at),
                (now - worker.heartbeat_at).whole_seconds().max(0),
                if worker.handover_only {
                    " (handover only)"
                } else {
                    ""
                }
            ));
        }
        Ok(())
    }
    .await;
    kit.close().await?;
    outcome
}

fn is_live(worker: &WorkerEntry, now: OffsetDateTime) -> bool {
    worker.is_live(now, DEFAULT_WORKER_HEARTBEAT * LIVE_WITHIN_HEARTBEATS)
}

fn worker_json(worker: &WorkerEntry, now: OffsetDateTime) -> serde_json::Value {
    json!({
        "worker_id": worker.worker_id,
        "host": worker.host,
        "pid": worker.pid,
        "state": worker.state.as_str(),
        "handover_only": worker.handover_only,
        "live": is_live(worker, now),
        "started_at": m3_types::timestamp::format(worker.started_at),
        "heartbeat_at": m3_types::timestamp::format(worker.heartbeat_at),
    })
}
