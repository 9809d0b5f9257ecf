//! Handing an execution from its live owner to a named successor: one compare-and-set of the
//! execution lease, never a takeover of an expired or foreign lease.

use std::time::Duration;

use m3_types::{ExecutionOutcome, Reason};

use super::ExecutionHarness;
use super::support::{CONFLICT, INVALID_ARGUMENT, STATE, TTL, advance, create, lease, read};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::{CaseResult, start_time};
use crate::{EVENT_EXECUTION_HANDED_OVER, ExecutionLeaseRef, FinishExecution};

/// The owner's live lease passes to the successor under a fresh token, with the
/// `execution.handed_over` event; the old lease is dead and the new one renews and finishes.
pub async fn the_live_owner_hands_its_lease_to_a_successor(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    advance(h, Duration::from_secs(5));
    let handed = h.store.hand_over(&held.to_ref(), "worker-b", TTL).await?;
    let new = handed
        .lease
        .clone()
        .ok_or_else(|| crate::conformance::CaseFailure::new("no lease after the handover"))?;
    ensure!(
        new.owner_id == "worker-b"
            && new.lease_token != held.lease_token
            && !new.lease_token.is_empty()
            && new.expires_at == start_time() + Duration::from_secs(5) + TTL,
        "unexpected lease after the handover {new:?}"
    );
    ensure!(
        read(h, &id).await?.lease == Some(new.clone()),
        "the handed-over lease is not stored"
    );
    let events = h.peer.list_events(&id, None).await?;
    let last = events.last().map(|e| (e.kind.clone(), e.payload.clone()));
    ensure!(
        last == Some((
            EVENT_EXECUTION_HANDED_OVER.to_owned(),
            serde_json::json!({"from": "worker-a", "to": "worker-b"})
        )),
        "expected the handed_over event last, got {last:?}"
    );
    expect_error(
        h.store.renew_lease(&held.to_ref(), TTL).await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    h.peer.renew_lease(&new.to_ref(), TTL).await?;
    let finish = FinishExecution::new(&id, ExecutionOutcome::Completed).with_lease(new.to_ref());
    h.peer.finish(finish).await?;
    Ok(())
}

/// Only the stored live lease hands over: a wrong owner or token, an expired lease (left to
/// recovery), a finished execution, an empty successor, the owner itself and a zero ttl are
/// refused, and the lease is unchanged.
pub async fn a_handover_needs_the_live_lease_and_changes_nothing_when_refused(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    let wrong_token = ExecutionLeaseRef::new(&id, "worker-a", "lease-other");
    let wrong_owner = ExecutionLeaseRef::new(&id, "worker-c", &held.lease_token);
    for bad in [&wrong_token, &wrong_owner] {
        expect_error(
            h.store.hand_over(bad, "worker-b", TTL).await,
            CONFLICT,
            Some(Reason::LeaseNotHeld),
        )?;
    }
    for (successor, ttl) in [("", TTL), ("worker-a", TTL), ("worker-b", Duration::ZERO)] {
        expect_error(
            h.store.hand_over(&held.to_ref(), successor, ttl).await,
            INVALID_ARGUMENT,
            None,
        )?;
    }
    ensure!(
        read(h, &id).await?.lease == Some(held.clone()),
        "a refused handover changed the lease"
    );
    advance(h, TTL);
    expect_error(
        h.store.hand_over(&held.to_ref(), "worker-b", TTL).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    let done = create(h).await?.execution_id;
    let finished = lease(h, &done, "worker-a").await?;
    let finish =
        FinishExecution::new(&done, ExecutionOutcome::Completed).with_lease(finished.to_ref());
    h.store.finish(finish).await?;
    let refused = h.store.hand_over(&finished.to_ref(), "worker-b", TTL).await;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.code() == STATE || e.code() == CONFLICT),
        "a finished execution was handed over: {refused:?}"
    );
    Ok(())
}

/// Two owners-to-be racing for one handover (a stale copy of the lease used twice): exactly
/// one succeeds.
pub async fn racing_handovers_of_one_lease_apply_once(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?.to_ref();
    let (first, second) = tokio::join!(
        h.store.hand_over(&held, "worker-b", TTL),
        h.peer.hand_over(&held, "worker-c", TTL),
    );
    let winners = [&first, &second].iter().filter(|r| r.is_ok()).count();
    ensure!(
        winners == 1,
        "expected one handover, got {first:?} and {second:?}"
    );
    let owner = read(h, &id).await?.lease.map(|l| l.owner_id);
    ensure!(
        owner.as_deref()
            == Some(if first.is_ok() {
                "worker-b"
            } else {
                "worker-c"
            }),
        "the stored owner {owner:?} is not the winner"
    );
    Ok(())
}
