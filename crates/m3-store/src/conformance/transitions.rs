//! `start_delivery`, `mark_delivered`, `resolve`.

use m3_types::ManagedInputStatus;

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status};
use super::fixture::{
    LEASE, OWNER, advance, delivered, delivery_started, lease, pending, resolved, round_ref,
    start_time, validated,
};
use super::{CaseResult, Harness};
use crate::{LeaseRef, RoundRef};

const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";
const NOT_FOUND: &str = "not_found";

/// `response_validated → delivery_started`, one delivery attempt, `delivery_started_at` set.
pub async fn start_delivery_counts_one_attempt(h: &Harness) -> CaseResult {
    validated(h).await?;
    advance(&h.clock, 1);
    let record = h.store.start_delivery(&round_ref(), &lease()).await?;
    expect_status(&record, ManagedInputStatus::DeliveryStarted)?;
    ensure!(
        record.delivery_attempts == 1,
        "expected one delivery attempt, got {}",
        record.delivery_attempts
    );
    let now = start_time() + time::Duration::seconds(1);
    ensure!(
        record.delivery_started_at == Some(now) && record.updated_at == now,
        "delivery_started_at must come from the clock"
    );
    ensure!(record.responses.is_some(), "responses must be kept");
    Ok(())
}

/// A pending round cannot start delivery.
pub async fn start_delivery_requires_validated_responses(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_error(
        h.store.start_delivery(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    expect_status(
        &super::fixture::reload(h).await?,
        ManagedInputStatus::Pending,
    )
}

/// Starting twice returns the record unchanged (no second attempt).
pub async fn start_delivery_is_idempotent(h: &Harness) -> CaseResult {
    let first = delivery_started(h).await?;
    advance(&h.clock, 1);
    let again = h.store.start_delivery(&round_ref(), &lease()).await?;
    expect_same(&first, &again, "second start_delivery")?;
    ensure!(
        again.delivery_attempts == 1,
        "a repeated start must not count an attempt"
    );
    Ok(())
}

/// `mark_delivered` needs `delivery_started`.
pub async fn mark_delivered_requires_delivery_started(h: &Harness) -> CaseResult {
    validated(h).await?;
    expect_error(
        h.store.mark_delivered(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    Ok(())
}

/// Marking twice returns the record unchanged.
pub async fn mark_delivered_is_idempotent(h: &Harness) -> CaseResult {
    let first = delivered(h).await?;
    advance(&h.clock, 1);
    let again = h.store.mark_delivered(&round_ref(), &lease()).await?;
    expect_same(&first, &again, "second mark_delivered")
}

/// `resolve` needs `delivered`.
pub async fn resolve_requires_delivered(h: &Harness) -> CaseResult {
    delivery_started(h).await?;
    expect_error(
        h.store.resolve(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    Ok(())
}

/// Resolving twice returns the record unchanged.
pub async fn resolve_is_idempotent(h: &Harness) -> CaseResult {
    let first = resolved(h).await?;
    advance(&h.clock, 1);
    let again = h.store.resolve(&round_ref(), &lease()).await?;
    expect_same(&first, &again, "second resolve")
}

/// Every lifecycle step stamps its own timestamp and keeps the earlier ones.
pub async fn full_lifecycle_records_every_timestamp(h: &Harness) -> CaseResult {
    pending(h).await?;
    let t = |s: i64| start_time() + time::Duration::seconds(s);
    advance(&h.clock, 1);
    h.store
        .submit_responses(&round_ref(), &lease(), super::fixture::submission("key-1"))
        .await?;
    advance(&h.clock, 1);
    h.store.start_delivery(&round_ref(), &lease()).await?;
    advance(&h.clock, 1);
    h.store.mark_delivered(&round_ref(), &lease()).await?;
    advance(&h.clock, 1);
    let done = h.store.resolve(&round_ref(), &lease()).await?;
    expect_status(&done, ManagedInputStatus::Resolved)?;
    ensure!(done.created_at == t(0), "created_at");
    ensure!(
        done.response_validated_at == Some(t(1)),
        "response_validated_at"
    );
    ensure!(
        done.delivery_started_at == Some(t(2)),
        "delivery_started_at"
    );
    ensure!(done.delivered_at == Some(t(3)), "delivered_at");
    ensure!(
        done.resolved_at == Some(t(4)) && done.updated_at == t(4),
        "resolved_at / updated_at"
    );
    ensure!(
        done.failed_at.is_none() && done.failure_code.is_none(),
        "no failure"
    );
    ensure!(done.delivery_attempts == 1, "one delivery attempt");
    ensure!(
        done.pending.request_state.as_deref() == Some("opaque-state"),
        "request state kept"
    );
    Ok(())
}

/// Transitions need a live lease.
pub async fn transitions_reject_an_expired_lease(h: &Harness) -> CaseResult {
    validated(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_error(
        h.store.start_delivery(&round_ref(), &lease()).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    expect_status(
        &super::fixture::reload(h).await?,
        ManagedInputStatus::ResponseValidated,
    )
}

/// Transitions need the owner and token.
pub async fn transitions_reject_a_foreign_lease(h: &Harness) -> CaseResult {
    delivery_started(h).await?;
    let stranger = LeaseRef::new(OWNER, "lease-other");
    expect_error(
        h.store.mark_delivered(&round_ref(), &stranger).await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    let other_owner = LeaseRef::new("worker-b", super::fixture::TOKEN);
    expect_error(
        h.store.mark_delivered(&round_ref(), &other_owner).await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    Ok(())
}

/// A resolved round refuses earlier transitions.
pub async fn transitions_after_resolve_are_state_errors(h: &Harness) -> CaseResult {
    resolved(h).await?;
    expect_error(
        h.store.start_delivery(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    expect_error(
        h.store.mark_delivered(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    Ok(())
}

/// A missing round conflicts.
pub async fn transitions_on_a_missing_round_conflict(h: &Harness) -> CaseResult {
    let missing = RoundRef::new("exec-x", "round-x");
    expect_error(
        h.store.start_delivery(&missing, &lease()).await,
        NOT_FOUND,
        None,
    )?;
    expect_error(
        h.store.mark_delivered(&missing, &lease()).await,
        NOT_FOUND,
        None,
    )?;
    expect_error(h.store.resolve(&missing, &lease()).await, NOT_FOUND, None)?;
    Ok(())
}
