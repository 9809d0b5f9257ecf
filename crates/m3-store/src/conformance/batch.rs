//! `renew_leases`: a batch of round leases renewed in one call, each item decided as
//! `renew` decides it.

use std::time::Duration;

use m3_types::{ManagedInputRecord, Reason};

use super::check::{ensure, expect_batch, expect_error};
use super::fixture::{
    LEASE, OWNER, Step, address_round, advance, cancelled, lease, pending, reload, round_ref,
    start_time,
};
use super::{CaseResult, Harness};
use crate::{CreateRound, LeaseRef, RenewRoundLeases, RoundRef};

const INVALID: &str = "managed_input_invalid";
const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";
const NOT_FOUND: &str = "not_found";

/// A fresh `pending` round `round_id` of `execution_id` with a generated token.
async fn other_round(h: &Harness, execution_id: &str, round_id: &str) -> Step<ManagedInputRecord> {
    let request = CreateRound::new(address_round(execution_id, round_id), OWNER, LEASE);
    Ok(h.store.create_round(request).await?)
}

/// A mixed batch: the live lease is renewed (stored, from the store clock's now), and the
/// expired, foreign, terminal, unknown and empty-id items are refused with `renew`'s code
/// and reason, without stopping the others or changing their rounds.
pub async fn renew_leases_decides_each_item_like_renew(h: &Harness) -> CaseResult {
    let expired = other_round(h, "exec-2", "expired").await?;
    advance(&h.clock, 20);
    pending(h).await?;
    let failed = other_round(h, "exec-3", "failed").await?;
    let failed_ref = RoundRef::of(&failed);
    let failed_lease = LeaseRef::of(&failed.lease);
    h.store
        .fail(&failed_ref, &failed_lease, cancelled())
        .await?;
    advance(&h.clock, 15);
    let batch = vec![
        (round_ref(), lease()),
        (RoundRef::of(&expired), LeaseRef::of(&expired.lease)),
        (round_ref(), LeaseRef::new(OWNER, "lease-other")),
        (failed_ref, failed_lease),
        (RoundRef::new("exec-9", "unknown"), lease()),
        (RoundRef::new("", "round-1"), lease()),
    ];
    let duration = Duration::from_secs(60);
    let outcomes = h
        .store
        .renew_leases(RenewRoundLeases::new(batch, duration))
        .await?;
    let refusals = [
        (CONFLICT, Some(Reason::LeaseExpired)),
        (CONFLICT, Some(Reason::LeaseNotHeld)),
        (STATE, Some(Reason::Terminal)),
        (NOT_FOUND, None),
        (INVALID, Some(Reason::EmptyArgument)),
    ];
    let renewed = expect_batch(outcomes, &refusals)?;
    let now = start_time() + Duration::from_secs(35);
    ensure!(
        renewed.lease.expires_at == now + duration,
        "the live lease must expire at now + 60 s, got {:?}",
        renewed.lease
    );
    let stored = reload(h).await?;
    ensure!(
        stored.lease.expires_at == now + duration && stored.updated_at == now,
        "the renewal of the live lease is not stored: {:?}",
        stored.lease
    );
    let expired_now = h.store.get_round(&RoundRef::of(&expired)).await?;
    ensure!(
        expired_now.map(|r| r.lease) == Some(expired.lease),
        "the expired lease changed"
    );
    Ok(())
}

/// An empty batch renews nothing; a zero duration refuses the whole batch and changes
/// nothing.
pub async fn renew_leases_accepts_an_empty_batch_and_refuses_a_zero_duration(
    h: &Harness,
) -> CaseResult {
    ensure!(
        h.store
            .renew_leases(RenewRoundLeases::new(vec![], LEASE))
            .await?
            .is_empty(),
        "an empty batch has no outcomes"
    );
    let created = pending(h).await?;
    advance(&h.clock, 5);
    expect_error(
        h.store
            .renew_leases(RenewRoundLeases::new(
                vec![(round_ref(), lease())],
                Duration::ZERO,
            ))
            .await,
        INVALID,
        Some(Reason::InvalidLeaseDuration),
    )?;
    ensure!(reload(h).await? == created, "the round changed");
    Ok(())
}
