//! The worker registry: a worker announced on one store object is seen by the other, its
//! heartbeats renew it on the store clock, silent workers are pruned (never one whose
//! heartbeat came in between), retired ones are gone, and bad announcements add nothing.

use std::time::Duration;

use m3_types::Reason;

use super::ExecutionHarness;
use super::support::{INVALID_ARGUMENT, advance};
use crate::conformance::CaseResult;
use crate::conformance::check::{ensure, expect_error};
use crate::workers::{NewWorker, WorkerState};

/// Announce, heartbeat, list on the peer, retire.
pub async fn a_worker_is_announced_renewed_and_retired(h: &ExecutionHarness) -> CaseResult {
    let workers = h.store.worker_registry().await?;
    let peer = h.peer.worker_registry().await?;
    let first = workers
        .announce(NewWorker::new("m3-worker:a", "host-a", 41))
        .await?;
    ensure!(
        first.state == WorkerState::Running && first.started_at == first.heartbeat_at,
        "announced {first:?}"
    );
    let second = peer
        .announce(NewWorker::new("m3-worker:b", "host-b", 42).handover_only(true))
        .await?;
    advance(h, Duration::from_secs(5));
    let beat = peer.heartbeat("m3-worker:a", WorkerState::Draining).await?;
    ensure!(beat.is_some(), "the peer lost the worker");
    let beat = beat.unwrap_or(first.clone());
    ensure!(
        beat.heartbeat_at == first.heartbeat_at + Duration::from_secs(5)
            && beat.state == WorkerState::Draining
            && beat.started_at == first.started_at,
        "after a heartbeat {beat:?}"
    );
    let listed = workers.workers().await?;
    ensure!(
        listed == vec![beat.clone(), second.clone()],
        "listed {listed:?}"
    );
    ensure!(
        listed[1].handover_only && listed[1].pid == 42 && listed[1].host == "host-b",
        "the second entry {:?}",
        listed[1]
    );
    ensure!(workers.retire("m3-worker:a").await?, "nothing retired");
    ensure!(!peer.retire("m3-worker:a").await?, "retired twice");
    ensure!(
        peer.heartbeat("m3-worker:a", WorkerState::Running)
            .await?
            .is_none(),
        "a retired worker's heartbeat found a row"
    );
    ensure!(
        peer.workers().await? == vec![second],
        "a retired worker is listed"
    );
    Ok(())
}

/// Silent workers are pruned on the store clock; a fresh heartbeat keeps a worker; a pruned
/// worker announces itself again; bad ids and hosts are refused and add nothing.
pub async fn silent_workers_are_pruned_and_bad_announcements_refused(
    h: &ExecutionHarness,
) -> CaseResult {
    let workers = h.store.worker_registry().await?;
    workers
        .announce(NewWorker::new("m3-worker:quiet", "host", 1))
        .await?;
    workers
        .announce(NewWorker::new("m3-worker:busy", "host", 2))
        .await?;
    advance(h, Duration::from_secs(20));
    workers
        .heartbeat("m3-worker:busy", WorkerState::Running)
        .await?;
    advance(h, Duration::from_secs(20));
    let pruned = h
        .peer
        .worker_registry()
        .await?
        .prune_workers(Duration::from_secs(30))
        .await?;
    ensure!(
        pruned == vec!["m3-worker:quiet".to_owned()],
        "pruned {pruned:?}"
    );
    let now = crate::store_now(&h.clock);
    let left = workers.workers().await?;
    ensure!(
        left.len() == 1 && left[0].is_live(now, Duration::from_secs(30)),
        "left {left:?}"
    );
    ensure!(
        workers
            .heartbeat("m3-worker:quiet", WorkerState::Running)
            .await?
            .is_none(),
        "a pruned worker's heartbeat found a row"
    );
    let again = workers
        .announce(NewWorker::new("m3-worker:quiet", "host", 1))
        .await?;
    ensure!(again.started_at == now, "announced again {again:?}");
    for (id, host) in [("", "host"), ("m3-worker:x", ""), ("bad\nid", "host")] {
        expect_error(
            workers.announce(NewWorker::new(id, host, 3)).await,
            INVALID_ARGUMENT,
            Some(Reason::InvalidWorker),
        )?;
    }
    ensure!(
        workers.workers().await?.len() == 2,
        "a refused worker was added"
    );
    Ok(())
}
