//! Claiming queued executions: oldest first, once ever, and never the same one twice under
//! racing claimers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{ExecutionOutcome, ExecutionStatus, Reason};

use super::ExecutionHarness;
use super::support::{INVALID_ARGUMENT, TTL, advance, create, lease, read};
use crate::conformance::CaseResult;
use crate::conformance::check::{ensure, expect_error};
use crate::{ClaimQueued, EVENT_EXECUTION_STATE_CHANGED, ExecutionStore, FinishExecution};

/// A queued execution, created one millisecond after the previous one (creation order is
/// claim order).
async fn queued(h: &ExecutionHarness) -> super::support::Step<String> {
    advance(h, Duration::from_millis(1));
    let id = create(h).await?.execution_id;
    h.store
        .transition(&id, ExecutionStatus::Queued, None)
        .await?;
    Ok(id)
}

/// The oldest queued execution is claimed first, moves to `starting` under the caller's
/// fresh lease with one `execution.state_changed` event; an execution that is only
/// created, or no longer queued, is never handed out.
pub async fn claim_takes_the_oldest_queued_execution_once(h: &ExecutionHarness) -> CaseResult {
    let first = queued(h).await?;
    advance(h, Duration::from_millis(1));
    let created_only = create(h).await?.execution_id;
    let second = queued(h).await?;
    let claim = || ClaimQueued::new("worker-a", TTL);
    let got = h.store.claim_queued(claim()).await?;
    let got = got.ok_or_else(|| crate::conformance::CaseFailure::new("nothing claimed"))?;
    ensure!(
        got.record.execution_id == first,
        "claimed {} first",
        got.record.execution_id
    );
    ensure!(
        got.record.lifecycle == ExecutionStatus::Starting,
        "lifecycle {:?}",
        got.record.lifecycle
    );
    ensure!(
        got.lease.owner_id == "worker-a",
        "owner {}",
        got.lease.owner_id
    );
    ensure!(
        got.record.lease.as_ref() == Some(&got.lease),
        "the record carries the lease"
    );
    let events = h.peer.list_events(&first, None).await?;
    let last = events.last().map(|e| (e.kind.as_str(), e.payload.clone()));
    ensure!(
        last == Some((
            EVENT_EXECUTION_STATE_CHANGED,
            serde_json::json!({"lifecycle": "starting"})
        )),
        "last event {last:?}"
    );
    ensure!(
        got.record.sequence == events.len() as u64 - 1,
        "record sequence"
    );
    // The claimed lease fences writes like any other.
    h.store
        .transition(
            &first,
            ExecutionStatus::RunningTurn,
            Some(&got.lease.to_ref()),
        )
        .await?;
    let next = h
        .peer
        .claim_queued(claim())
        .await?
        .map(|c| c.record.execution_id);
    ensure!(
        next.as_deref() == Some(second.as_str()),
        "second claim got {next:?}"
    );
    ensure!(
        h.store.claim_queued(claim()).await?.is_none(),
        "a third claim got something"
    );
    let only = h.store.claim_queued(claim().only(&created_only)).await?;
    ensure!(
        only.is_none(),
        "an execution that was never queued was claimed"
    );
    ensure!(
        read(h, &created_only).await?.lease.is_none(),
        "the created execution got a lease"
    );
    Ok(())
}

/// `only` claims exactly the named queued execution, even when older ones wait.
pub async fn claim_of_one_execution_skips_the_others(h: &ExecutionHarness) -> CaseResult {
    let older = queued(h).await?;
    let mine = queued(h).await?;
    let got = h
        .store
        .claim_queued(ClaimQueued::new("kit", TTL).only(&mine))
        .await?
        .map(|c| c.record.execution_id);
    ensure!(got.as_deref() == Some(mine.as_str()), "claimed {got:?}");
    ensure!(
        read(h, &older).await?.lifecycle == ExecutionStatus::Queued,
        "the older one moved"
    );
    let again = h
        .store
        .claim_queued(ClaimQueued::new("kit", TTL).only(&mine))
        .await?;
    ensure!(again.is_none(), "claimed twice");
    Ok(())
}

/// Bad arguments are refused even when nothing is queued.
pub async fn claim_validates_its_arguments(h: &ExecutionHarness) -> CaseResult {
    let empty_owner = h.store.claim_queued(ClaimQueued::new(" ", TTL)).await;
    expect_error(empty_owner, INVALID_ARGUMENT, Some(Reason::EmptyArgument))?;
    let zero_ttl = h
        .store
        .claim_queued(ClaimQueued::new("w", Duration::ZERO))
        .await;
    expect_error(
        zero_ttl,
        INVALID_ARGUMENT,
        Some(Reason::InvalidLeaseDuration),
    )?;
    let empty_id = h
        .store
        .claim_queued(ClaimQueued::new("w", TTL).only(""))
        .await;
    expect_error(empty_id, INVALID_ARGUMENT, Some(Reason::EmptyArgument))?;
    Ok(())
}

/// A claimed execution whose lease expires is left for recovery, never claimed again; a
/// queued execution that was leased directly or finished is not claimable either.
pub async fn claimed_executions_are_recovered_never_claimed_again(
    h: &ExecutionHarness,
) -> CaseResult {
    let lost = queued(h).await?;
    let claimed = h.store.claim_queued(ClaimQueued::new("gone", TTL)).await?;
    ensure!(claimed.is_some(), "nothing claimed");
    let leased = queued(h).await?;
    lease(h, &leased, "direct").await?;
    let finished = queued(h).await?;
    h.store
        .finish(FinishExecution::new(&finished, ExecutionOutcome::Cancelled))
        .await?;
    advance(h, TTL + Duration::from_secs(1));
    let again = h.peer.claim_queued(ClaimQueued::new("next", TTL)).await?;
    ensure!(
        again.is_none(),
        "claimed {:?}",
        again.map(|c| c.record.execution_id)
    );
    let expired: Vec<String> = h
        .store
        .list_expired_leases()
        .await?
        .into_iter()
        .map(|r| r.execution_id)
        .collect();
    ensure!(
        expired.contains(&lost),
        "the lost claim is not listed for recovery: {expired:?}"
    );
    Ok(())
}

/// Eight claimers on the store and its peer drain twelve queued executions: each one is
/// claimed exactly once, and every claim is the stored lease.
pub async fn racing_claimers_never_share_an_execution(h: &ExecutionHarness) -> CaseResult {
    const QUEUED: usize = 12;
    let mut ids = BTreeSet::new();
    for _ in 0..QUEUED {
        ids.insert(queued(h).await?);
    }
    let both: [Arc<dyn ExecutionStore>; 2] = [Arc::clone(&h.store), Arc::clone(&h.peer)];
    let tasks: Vec<_> = (0..8_usize)
        .map(|worker| {
            let store = Arc::clone(&both[worker % 2]);
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while let Some(claimed) = store
                    .claim_queued(ClaimQueued::new(format!("worker-{worker}"), TTL))
                    .await?
                {
                    mine.push(claimed);
                    tokio::task::yield_now().await;
                }
                Ok::<_, m3_types::Error>(mine)
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for task in tasks {
        let mine = task.await.map_err(|e| {
            crate::conformance::CaseFailure::new(format!("a claimer failed: {e}"))
        })??;
        for claimed in mine {
            let id = claimed.record.execution_id.clone();
            ensure!(seen.insert(id.clone()), "{id} claimed twice");
            let stored = read(h, &id).await?.lease;
            ensure!(
                stored == Some(claimed.lease),
                "{id}: the stored lease is not the claimer's"
            );
        }
    }
    ensure!(seen == ids, "claimed {} of {QUEUED}", seen.len());
    Ok(())
}
