//! `renew_leases`: a batch of worker leases renewed in one call, each item decided as
//! `renew_lease` decides it.

use std::time::Duration;

use m3_types::{ExecutionOutcome, Reason};

use super::ExecutionHarness;
use super::support::{
    CONFLICT, INVALID_ARGUMENT, NOT_FOUND, STATE, TTL, advance, create, lease, read,
};
use crate::conformance::check::{ensure, expect_batch, expect_error};
use crate::conformance::{CaseResult, start_time};
use crate::{ExecutionLeaseRef, FinishExecution, RenewLeases};

/// A mixed batch: the live lease is renewed (stored, from the store clock's now), and the
/// expired, foreign, finished and unknown items are refused with `renew_lease`'s code and
/// reason, without stopping the others or changing their executions.
pub async fn renew_leases_decides_each_item_like_renew_lease(h: &ExecutionHarness) -> CaseResult {
    let expired_id = create(h).await?.execution_id;
    let expired = lease(h, &expired_id, "worker-a").await?;
    advance(h, Duration::from_secs(20));
    let live_id = create(h).await?.execution_id;
    let live = lease(h, &live_id, "worker-a").await?;
    let finished_id = create(h).await?.execution_id;
    let finished = lease(h, &finished_id, "worker-a").await?;
    h.store
        .finish(
            FinishExecution::new(&finished_id, ExecutionOutcome::Completed)
                .with_lease(finished.to_ref()),
        )
        .await?;
    advance(h, Duration::from_secs(15));
    let foreign = ExecutionLeaseRef::new(&live_id, "worker-b", "lease-other");
    let batch = vec![
        live.to_ref(),
        expired.to_ref(),
        foreign,
        finished.to_ref(),
        ExecutionLeaseRef::new("missing", "worker-a", "t"),
    ];
    let refusals = [
        (CONFLICT, Some(Reason::LeaseExpired)),
        (CONFLICT, Some(Reason::LeaseNotHeld)),
        (STATE, Some(Reason::Finished)),
        (NOT_FOUND, None),
    ];
    let renewed = expect_batch(
        h.store.renew_leases(RenewLeases::new(batch, TTL)).await?,
        &refusals,
    )?;
    let now = start_time() + Duration::from_secs(35);
    ensure!(
        renewed.expires_at == now + TTL,
        "the live lease must expire at now + ttl, got {renewed:?}"
    );
    ensure!(
        read(h, &live_id).await?.lease.map(|l| l.expires_at) == Some(now + TTL),
        "the renewal of the live lease is not stored"
    );
    ensure!(
        read(h, &expired_id).await?.lease == Some(expired),
        "the expired lease changed"
    );
    Ok(())
}

/// An empty batch renews nothing; a zero ttl refuses the whole batch and changes nothing.
pub async fn renew_leases_accepts_an_empty_batch_and_refuses_a_zero_ttl(
    h: &ExecutionHarness,
) -> CaseResult {
    ensure!(
        h.store
            .renew_leases(RenewLeases::new(vec![], TTL))
            .await?
            .is_empty(),
        "an empty batch has no outcomes"
    );
    let id = create(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    advance(h, Duration::from_secs(5));
    expect_error(
        h.store
            .renew_leases(RenewLeases::new(vec![held.to_ref()], Duration::ZERO))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidLeaseDuration),
    )?;
    ensure!(read(h, &id).await?.lease == Some(held), "the lease changed");
    Ok(())
}
