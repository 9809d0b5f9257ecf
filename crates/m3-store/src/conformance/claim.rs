//! `claim_round`: replacement-owner takeover with delivery-state evidence.

use m3_types::{DeliveryState, ManagedInputStatus};

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status};
use super::fixture::cancelled;
use super::fixture::{
    LEASE, OWNER, TOKEN, advance, delivery_started, lease, pending, reload, resolved, round_ref,
    start_time, submission, validated,
};
use super::{CaseResult, Harness};
use crate::{ClaimRound, LeaseRef, RoundRef};

const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";
const RECOVERY: &str = "managed_input_recovery_unavailable";
const NOT_FOUND: &str = "not_found";

fn claim(state: DeliveryState) -> ClaimRound {
    ClaimRound::new("worker-b", LEASE)
        .with_expected_lease_token(TOKEN)
        .with_delivery_state(state)
}

/// Claims the case's round with `claim` and expects the error `code` with `reason`.
async fn expect_claim_error(
    h: &Harness,
    claim: ClaimRound,
    code: &str,
    reason: Option<Reason>,
) -> CaseResult {
    expect_error(h.store.claim_round(&round_ref(), claim).await, code, reason)?;
    Ok(())
}

/// Without delivery-state evidence, no claim.
pub async fn claim_requires_delivery_state_evidence(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    let bare = ClaimRound::new("worker-b", LEASE).with_expected_lease_token(TOKEN);
    expect_claim_error(h, bare, RECOVERY, Some(Reason::MissingEvidence)).await?;
    Ok(())
}

/// A live lease cannot be taken over.
pub async fn claim_of_a_live_lease_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_claim_error(
        h,
        claim(DeliveryState::NotStarted),
        CONFLICT,
        Some(Reason::LeaseLive),
    )
    .await?;
    let stored = reload(h).await?;
    ensure!(
        stored.lease.owner_id == OWNER && stored.lease.lease_token == TOKEN,
        "the lease must not change"
    );
    Ok(())
}

/// After expiry, a pending round is handed over: new owner, new token, old owner locked out.
pub async fn claim_of_an_expired_pending_round_hands_the_lease_over(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs() + 1);
    let claimed = h
        .peer
        .claim_round(&round_ref(), claim(DeliveryState::NotStarted))
        .await?;
    expect_status(&claimed, ManagedInputStatus::Pending)?;
    ensure!(claimed.lease.owner_id == "worker-b", "new owner");
    ensure!(
        claimed.lease.lease_token != TOKEN && !claimed.lease.lease_token.is_empty(),
        "a new token"
    );
    let now = start_time() + time::Duration::seconds(LEASE.as_secs() as i64 + 1);
    ensure!(
        claimed.lease.expires_at == now + time::Duration::seconds(LEASE.as_secs() as i64),
        "new expiry"
    );
    ensure!(claimed.delivery_attempts == 0, "attempts unchanged");
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), submission("key-1"))
            .await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    let new_lease = LeaseRef::of(&claimed.lease);
    h.store
        .submit_responses(&round_ref(), &new_lease, submission("key-1"))
        .await?;
    h.store.start_delivery(&round_ref(), &new_lease).await?;
    h.store.mark_delivered(&round_ref(), &new_lease).await?;
    let done = h.store.resolve(&round_ref(), &new_lease).await?;
    expect_status(&done, ManagedInputStatus::Resolved)?;
    ensure!(done.delivery_attempts == 1, "one delivery attempt");
    ensure!(
        done.pending.request_state.as_deref() == Some("opaque-state"),
        "request state kept"
    );
    expect_error(
        h.store.start_delivery(&round_ref(), &new_lease).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    Ok(())
}

/// The expected token must be the current one.
pub async fn claim_with_a_wrong_expected_token_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    let wrong = ClaimRound::new("worker-b", LEASE)
        .with_expected_lease_token("lease-other")
        .with_delivery_state(DeliveryState::NotStarted);
    expect_claim_error(h, wrong, CONFLICT, Some(Reason::LeaseTokenMismatch)).await?;
    let none = ClaimRound::new("worker-b", LEASE).with_delivery_state(DeliveryState::NotStarted);
    expect_claim_error(h, none, CONFLICT, Some(Reason::LeaseTokenMismatch)).await?;
    Ok(())
}

/// Validated responses are only re-claimed with idempotent-delivery proof.
pub async fn claim_of_validated_responses_requires_idempotent_proof(h: &Harness) -> CaseResult {
    let before = validated(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_claim_error(
        h,
        claim(DeliveryState::NotDelivered),
        RECOVERY,
        Some(Reason::IdempotentDeliveryRequired),
    )
    .await?;
    expect_same(&before, &reload(h).await?, "round after a refused claim")?;
    let claimed = h
        .store
        .claim_round(
            &round_ref(),
            claim(DeliveryState::NotDelivered).with_idempotent_delivery(true),
        )
        .await?;
    expect_status(&claimed, ManagedInputStatus::ResponseValidated)?;
    ensure!(claimed.responses == before.responses, "responses kept");
    Ok(())
}

/// `delivery_started` + `not_delivered` needs proof, then reverts to `response_validated`.
pub async fn claim_of_started_delivery_not_delivered_requires_proof_and_reverts(
    h: &Harness,
) -> CaseResult {
    let before = delivery_started(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_claim_error(
        h,
        claim(DeliveryState::NotDelivered),
        RECOVERY,
        Some(Reason::IdempotentDeliveryRequired),
    )
    .await?;
    expect_same(&before, &reload(h).await?, "round after a refused claim")?;
    let claimed = h
        .store
        .claim_round(
            &round_ref(),
            claim(DeliveryState::NotDelivered).with_idempotent_delivery(true),
        )
        .await?;
    expect_status(&claimed, ManagedInputStatus::ResponseValidated)?;
    ensure!(claimed.delivery_attempts == 1, "attempts unchanged");
    Ok(())
}

/// `delivery_started` + `not_started` is ambiguous.
pub async fn claim_of_started_delivery_not_started_is_ambiguous(h: &Harness) -> CaseResult {
    delivery_started(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_error(
        h.store
            .claim_round(
                &round_ref(),
                claim(DeliveryState::NotStarted).with_idempotent_delivery(true),
            )
            .await,
        RECOVERY,
        Some(Reason::EvidenceMismatch),
    )?;
    Ok(())
}

/// `delivery_started` + `delivered` becomes `delivered` with `delivered_at = now`.
pub async fn claim_of_started_delivery_delivered_marks_delivered(h: &Harness) -> CaseResult {
    let before = delivery_started(h).await?;
    advance(&h.clock, LEASE.as_secs() + 5);
    let claimed = h
        .store
        .claim_round(&round_ref(), claim(DeliveryState::Delivered))
        .await?;
    expect_status(&claimed, ManagedInputStatus::Delivered)?;
    let now = start_time() + time::Duration::seconds(LEASE.as_secs() as i64 + 5);
    ensure!(
        claimed.delivered_at == Some(now),
        "delivered_at must be the claim time"
    );
    ensure!(claimed.responses == before.responses, "responses kept");
    let new_lease = LeaseRef::of(&claimed.lease);
    expect_status(
        &h.store.resolve(&round_ref(), &new_lease).await?,
        ManagedInputStatus::Resolved,
    )
}

/// Evidence must match the persisted status.
pub async fn claim_with_mismatched_evidence_is_refused(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_claim_error(
        h,
        claim(DeliveryState::Delivered),
        RECOVERY,
        Some(Reason::EvidenceMismatch),
    )
    .await?;
    expect_error(
        h.store
            .claim_round(
                &round_ref(),
                claim(DeliveryState::NotDelivered).with_idempotent_delivery(true),
            )
            .await,
        RECOVERY,
        Some(Reason::EvidenceMismatch),
    )?;
    let other = h
        .store
        .create_round(
            crate::CreateRound::new(super::fixture::address_round("exec-2", "r"), OWNER, LEASE)
                .with_lease_token(TOKEN),
        )
        .await?;
    let other_ref = RoundRef::of(&other);
    h.store
        .submit_responses(&other_ref, &lease(), submission("k"))
        .await?;
    h.store.start_delivery(&other_ref, &lease()).await?;
    h.store.mark_delivered(&other_ref, &lease()).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_error(
        h.store
            .claim_round(&other_ref, claim(DeliveryState::NotStarted))
            .await,
        RECOVERY,
        Some(Reason::EvidenceMismatch),
    )?;
    let claimed = h
        .store
        .claim_round(&other_ref, claim(DeliveryState::Delivered))
        .await?;
    expect_status(&claimed, ManagedInputStatus::Delivered)
}

/// A recovery failure can never be claimed, whatever the evidence and token.
pub async fn claim_of_a_recovery_failure_is_a_recovery_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    h.store
        .fail_recovery(&round_ref(), TOKEN, "worker lost")
        .await?;
    let error = expect_error(
        h.store
            .claim_round(&round_ref(), claim(DeliveryState::NotStarted))
            .await,
        RECOVERY,
        Some(Reason::RecoveryUnavailable),
    )?;
    ensure!(error.code() == RECOVERY, "recovery code");
    let any = ClaimRound::new("worker-c", LEASE).with_expected_lease_token("whatever");
    expect_error(
        h.peer.claim_round(&round_ref(), any).await,
        RECOVERY,
        Some(Reason::RecoveryUnavailable),
    )?;
    Ok(())
}

/// Other failures and resolved rounds are state errors.
pub async fn claim_of_other_failures_and_resolved_rounds_are_state_errors(
    h: &Harness,
) -> CaseResult {
    resolved(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_claim_error(
        h,
        claim(DeliveryState::Delivered),
        STATE,
        Some(Reason::Terminal),
    )
    .await?;
    let other = h
        .store
        .create_round(
            crate::CreateRound::new(super::fixture::address_round("exec-2", "r"), OWNER, LEASE)
                .with_lease_token(TOKEN),
        )
        .await?;
    let other_ref = RoundRef::of(&other);
    h.store.fail(&other_ref, &lease(), cancelled()).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_error(
        h.store
            .claim_round(&other_ref, claim(DeliveryState::NotStarted))
            .await,
        STATE,
        Some(Reason::Terminal),
    )?;
    Ok(())
}

/// A missing round conflicts.
pub async fn claim_of_a_missing_round_conflicts(h: &Harness) -> CaseResult {
    expect_claim_error(h, claim(DeliveryState::NotStarted), NOT_FOUND, None).await?;
    Ok(())
}
