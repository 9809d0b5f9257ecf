//! Worker leases: acquire, renew, release, expiry by the store clock, and the fence.

use std::time::Duration;

use m3_types::{ExecutionOutcome, ExecutionStatus, Reason};
use serde_json::json;

use super::ExecutionHarness;
use super::support::{
    CONFLICT, INVALID_ARGUMENT, NOT_FOUND, STATE, TTL, advance, create, lease, read,
};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::{CaseResult, start_time};
use crate::{AcquireLease, AppendEvent, ExecutionLeaseRef, FinishExecution};

/// A lease names the owner, a generated token and `now + ttl`, and is stored.
pub async fn acquire_sets_owner_token_and_expiry(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    ensure!(
        held.execution_id == id
            && held.owner_id == "worker-a"
            && !held.lease_token.is_empty()
            && held.expires_at == start_time() + TTL,
        "unexpected lease {held:?}"
    );
    ensure!(
        read(h, &id).await?.lease == Some(held),
        "the lease is not stored"
    );
    Ok(())
}

/// The same owner and token get the same live lease back; anyone else is refused.
pub async fn acquire_is_idempotent_for_the_same_lease_and_exclusive_otherwise(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    let request = AcquireLease::new(&id, "worker-a", TTL).with_lease_token("lease-fixed");
    let first = h.store.acquire_lease(request.clone()).await?;
    advance(h, Duration::from_secs(1));
    ensure!(
        h.peer.acquire_lease(request).await? == first,
        "not idempotent"
    );
    expect_error(
        lease(h, &id, "worker-b").await,
        CONFLICT,
        Some(Reason::LeaseHeld),
    )?;
    // The same owner with another token is someone else's acquisition.
    expect_error(
        lease(h, &id, "worker-a").await,
        CONFLICT,
        Some(Reason::LeaseHeld),
    )?;
    Ok(())
}

/// Empty owner or token, zero ttl, a token in use, a finished execution are refused.
pub async fn acquire_validates_its_arguments_and_the_execution(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    expect_error(
        lease(h, &id, " ").await,
        INVALID_ARGUMENT,
        Some(Reason::EmptyArgument),
    )?;
    expect_error(
        h.store
            .acquire_lease(AcquireLease::new(&id, "w", Duration::ZERO))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidLeaseDuration),
    )?;
    expect_error(
        h.store
            .acquire_lease(AcquireLease::new(&id, "w", TTL).with_lease_token(""))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::EmptyArgument),
    )?;
    let taken = lease(h, &id, "w").await?;
    let other = create(h).await?.execution_id;
    expect_error(
        h.store
            .acquire_lease(AcquireLease::new(&other, "w", TTL).with_lease_token(&taken.lease_token))
            .await,
        CONFLICT,
        Some(Reason::LeaseTokenInUse),
    )?;
    let done = create(h).await?.execution_id;
    h.store
        .finish(FinishExecution::new(&done, ExecutionOutcome::Completed))
        .await?;
    expect_error(lease(h, &done, "w").await, STATE, Some(Reason::Finished))?;
    Ok(())
}

/// Renewal extends from the store clock's now; at expiry the lease is dead for renew,
/// release and acquire (recovery, not takeover).
pub async fn lease_expires_by_the_store_clock_and_is_never_taken_over(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    advance(h, TTL - Duration::from_secs(1));
    let renewed = h.store.renew_lease(&held.to_ref(), TTL).await?;
    ensure!(
        renewed.expires_at == start_time() + TTL - Duration::from_secs(1) + TTL,
        "renewed to {}",
        renewed.expires_at
    );
    advance(h, TTL);
    expect_error(
        h.store.renew_lease(&held.to_ref(), TTL).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    expect_error(
        lease(h, &id, "worker-b").await,
        CONFLICT,
        Some(Reason::RecoveryRequired),
    )?;
    expect_error(
        h.peer.release_lease(&held.to_ref()).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    Ok(())
}

/// Renew and release need the exact stored owner and token.
pub async fn renew_and_release_refuse_a_wrong_owner_or_token(h: &ExecutionHarness) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    let wrong_owner = ExecutionLeaseRef::new(&id, "worker-b", &held.lease_token);
    let wrong_token = ExecutionLeaseRef::new(&id, "worker-a", "lease-other");
    for bad in [&wrong_owner, &wrong_token] {
        expect_error(
            h.store.renew_lease(bad, TTL).await,
            CONFLICT,
            Some(Reason::LeaseNotHeld),
        )?;
        expect_error(
            h.store.release_lease(bad).await,
            CONFLICT,
            Some(Reason::LeaseNotHeld),
        )?;
    }
    expect_error(
        h.store.renew_lease(&held.to_ref(), Duration::ZERO).await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidLeaseDuration),
    )?;
    expect_error(
        h.store
            .renew_lease(&ExecutionLeaseRef::new("missing", "w", "t"), TTL)
            .await,
        NOT_FOUND,
        None,
    )?;
    ensure!(
        read(h, &id).await?.lease == Some(held),
        "the real lease changed"
    );
    Ok(())
}

/// After release anyone may acquire; the released token is dead.
pub async fn a_released_lease_can_be_acquired_again_and_the_old_token_is_dead(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    let first = lease(h, &id, "worker-a").await?;
    h.store.release_lease(&first.to_ref()).await?;
    ensure!(
        read(h, &id).await?.lease.is_none(),
        "released lease still stored"
    );
    let second = lease(h, &id, "worker-b").await?;
    ensure!(second.lease_token != first.lease_token, "token reused");
    expect_error(
        h.store.renew_lease(&first.to_ref(), TTL).await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    Ok(())
}

/// The fence: a leased execution takes writes only with its live lease; an expired lease
/// leaves it to recovery.
pub async fn leased_writes_need_the_live_lease_and_unleased_writes_need_none(
    h: &ExecutionHarness,
) -> CaseResult {
    let s = &h.store;
    let id = create(h).await?.execution_id;
    s.transition(&id, ExecutionStatus::Queued, None).await?;
    let fence = lease(h, &id, "worker-a").await?.to_ref();
    let required = Some(Reason::LeaseRequired);
    expect_error(
        s.transition(&id, ExecutionStatus::Starting, None).await,
        CONFLICT,
        required,
    )?;
    expect_error(
        s.append_event(AppendEvent::new(&id, "diagnostic", json!({})))
            .await,
        CONFLICT,
        required,
    )?;
    expect_error(
        s.finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
            .await,
        CONFLICT,
        required,
    )?;
    let wrong = ExecutionLeaseRef::new(&id, "worker-a", "lease-wrong");
    expect_error(
        s.transition(&id, ExecutionStatus::Starting, Some(&wrong))
            .await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    s.transition(&id, ExecutionStatus::Starting, Some(&fence))
        .await?;
    s.transition(&id, ExecutionStatus::RunningTurn, Some(&fence))
        .await?;
    let event = s
        .append_event(
            AppendEvent::new(
                &id,
                crate::EVENT_ELICITATION_REQUEST,
                json!({"round_id": "r1"}),
            )
            .with_lease(fence.clone()),
        )
        .await?;
    ensure!(event.sequence == 4, "sequence {}", event.sequence);
    advance(h, TTL);
    let expired = Some(Reason::LeaseExpired);
    expect_error(
        s.transition(&id, ExecutionStatus::WaitingForInput, Some(&fence))
            .await,
        CONFLICT,
        expired,
    )?;
    expect_error(
        s.append_event(AppendEvent::new(&id, "diagnostic", json!({})).with_lease(fence.clone()))
            .await,
        CONFLICT,
        expired,
    )?;
    expect_error(
        s.finish(FinishExecution::new(&id, ExecutionOutcome::Completed).with_lease(fence.clone()))
            .await,
        CONFLICT,
        expired,
    )?;
    expect_error(
        s.finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
            .await,
        CONFLICT,
        Some(Reason::RecoveryRequired),
    )?;
    Ok(())
}

/// `finish` ends the lease; releasing it afterwards succeeds; renewing is a state error.
pub async fn finish_with_the_lease_ends_it_and_release_afterwards_succeeds(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    let finished = h
        .store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Completed).with_lease(held.to_ref()))
        .await?;
    ensure!(finished.lease.is_none(), "finish must end the lease");
    h.store.release_lease(&held.to_ref()).await?;
    expect_error(
        h.store.renew_lease(&held.to_ref(), TTL).await,
        STATE,
        Some(Reason::Finished),
    )?;
    advance(h, TTL * 10);
    ensure!(
        h.store.list_expired_leases().await?.is_empty(),
        "no expired lease after finish"
    );
    Ok(())
}
