//! `renew`, `fail` and `fail_recovery`, and lease expiry by the store's clock.

use std::time::Duration;

use m3_types::{ManagedInputRecord, ManagedInputStatus};

use m3_types::Reason;

use super::check::{CaseFailure, ensure, expect_error, expect_same, expect_status};
use super::fixture::cancelled;
use super::fixture::{
    LEASE, OWNER, Step, TOKEN, advance, delivered, delivery_started, lease, pending, reload,
    resolved, round_ref, start_time, submission, validated,
};
use super::{CaseResult, Harness};
use crate::{LeaseRef, RoundFailure};

const INVALID: &str = "managed_input_invalid";
const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";
const RECOVERY: &str = m3_types::RECOVERY_UNAVAILABLE;

/// Fails the case's round for recovery under `expected_lease_token` and expects the
/// error `code` with `reason`.
async fn expect_recovery_error(
    h: &Harness,
    expected_lease_token: &str,
    code: &str,
    reason: Option<Reason>,
) -> CaseResult {
    let result = h
        .store
        .fail_recovery(&round_ref(), expected_lease_token, "worker lost")
        .await;
    expect_error(result, code, reason)?;
    Ok(())
}

/// `renew` moves the expiry to now + duration and keeps the token.
pub async fn renew_extends_the_lease_and_keeps_the_token(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, 20);
    let renewed = h
        .store
        .renew(&round_ref(), &lease(), Duration::from_secs(60))
        .await?;
    ensure!(
        renewed.lease.lease_token == TOKEN && renewed.lease.owner_id == OWNER,
        "renew must keep the credentials"
    );
    let now = start_time() + time::Duration::seconds(20);
    ensure!(
        renewed.lease.expires_at == now + time::Duration::seconds(60),
        "renewed expiry must be now + 60 s, got {}",
        renewed.lease.expires_at
    );
    ensure!(renewed.updated_at == now, "renew must stamp updated_at");
    advance(&h.clock, 30);
    let record = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_status(&record, ManagedInputStatus::ResponseValidated)
}

/// An expired lease cannot be renewed.
pub async fn renew_rejects_an_expired_lease(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs() + 1);
    expect_error(
        h.store.renew(&round_ref(), &lease(), LEASE).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    Ok(())
}

/// `delivered` rounds are refused (the renewal loop stops there).
pub async fn renew_refuses_a_delivered_round(h: &Harness) -> CaseResult {
    delivered(h).await?;
    expect_error(
        h.store.renew(&round_ref(), &lease(), LEASE).await,
        STATE,
        Some(Reason::Terminal),
    )?;
    Ok(())
}

/// Terminal rounds are refused; rounds in delivery are renewed.
pub async fn renew_refuses_resolved_and_failed_rounds(h: &Harness) -> CaseResult {
    delivery_started(h).await?;
    h.store.renew(&round_ref(), &lease(), LEASE).await?;
    h.store.mark_delivered(&round_ref(), &lease()).await?;
    h.store.resolve(&round_ref(), &lease()).await?;
    expect_error(
        h.store.renew(&round_ref(), &lease(), LEASE).await,
        STATE,
        Some(Reason::Terminal),
    )?;
    let other = h
        .store
        .create_round(crate::CreateRound::new(
            super::fixture::address_round("exec-2", "r"),
            OWNER,
            LEASE,
        ))
        .await?;
    let other_ref = crate::RoundRef::of(&other);
    let other_lease = LeaseRef::of(&other.lease);
    h.store.fail(&other_ref, &other_lease, cancelled()).await?;
    expect_error(
        h.store.renew(&other_ref, &other_lease, LEASE).await,
        STATE,
        Some(Reason::Terminal),
    )?;
    Ok(())
}

/// A foreign token cannot renew.
pub async fn renew_rejects_a_foreign_token(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_error(
        h.store
            .renew(&round_ref(), &LeaseRef::new(OWNER, "lease-other"), LEASE)
            .await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    Ok(())
}

/// A zero lease duration is a validation error.
pub async fn renew_rejects_a_zero_lease(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_error(
        h.store.renew(&round_ref(), &lease(), Duration::ZERO).await,
        INVALID,
        Some(Reason::InvalidLeaseDuration),
    )?;
    Ok(())
}

/// The lease is live strictly before `expires_at` and expired from it on.
pub async fn lease_expiry_is_measured_by_the_store_clock(h: &Harness) -> CaseResult {
    pending(h).await?;
    h.clock.advance_std(LEASE - Duration::from_micros(1));
    h.store
        .renew(&round_ref(), &lease(), Duration::from_micros(1))
        .await?;
    // expires_at is now exactly start + 30 s; one more microsecond reaches it.
    h.clock.advance_std(Duration::from_micros(1));
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), submission("key-1"))
            .await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    expect_status(&reload(h).await?, ManagedInputStatus::Pending)
}

/// `fail` records the failure and keeps stored responses as diagnostics.
pub async fn fail_marks_the_round_failed_and_keeps_responses(h: &Harness) -> CaseResult {
    let accepted = validated(h).await?;
    advance(&h.clock, 1);
    let failed = h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    expect_status(&failed, ManagedInputStatus::Failed)?;
    ensure!(
        failed.failure_code.as_deref() == Some("cancelled"),
        "failure code"
    );
    ensure!(
        failed.failure_message.as_deref() == Some("operation cancelled"),
        "failure message"
    );
    let now = start_time() + time::Duration::seconds(1);
    ensure!(
        failed.failed_at == Some(now) && failed.updated_at == now,
        "failed_at from the clock"
    );
    ensure!(
        failed.responses == accepted.responses,
        "responses must be kept as diagnostics"
    );
    ensure!(
        failed.response_idempotency_key.as_deref() == Some("key-1"),
        "key kept"
    );
    ensure!(
        h.store.redacted_responses(&round_ref()).await?.is_some(),
        "projection kept"
    );
    Ok(())
}

/// Failing again with the same code and message is a no-op.
pub async fn fail_is_idempotent_for_the_same_code_and_message(h: &Harness) -> CaseResult {
    pending(h).await?;
    let first = h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    advance(&h.clock, 1);
    let again = h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    expect_same(&first, &again, "second fail")
}

/// Another failure on a failed round conflicts.
pub async fn fail_with_another_failure_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    expect_error(
        h.store
            .fail(
                &round_ref(),
                &lease(),
                RoundFailure::new("timeout", "timed out"),
            )
            .await,
        CONFLICT,
        Some(Reason::FailureRecorded),
    )?;
    expect_error(
        h.store
            .fail(
                &round_ref(),
                &lease(),
                RoundFailure::new("cancelled", "other message"),
            )
            .await,
        CONFLICT,
        Some(Reason::FailureRecorded),
    )?;
    Ok(())
}

/// A resolved round cannot fail.
pub async fn fail_on_a_resolved_round_is_a_state_error(h: &Harness) -> CaseResult {
    resolved(h).await?;
    expect_error(
        h.store.fail(&round_ref(), &lease(), cancelled()).await,
        STATE,
        Some(Reason::Terminal),
    )?;
    expect_status(&reload(h).await?, ManagedInputStatus::Resolved)
}

/// `fail` needs a live lease.
pub async fn fail_rejects_an_expired_lease(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_error(
        h.store.fail(&round_ref(), &lease(), cancelled()).await,
        CONFLICT,
        Some(Reason::LeaseExpired),
    )?;
    expect_status(&reload(h).await?, ManagedInputStatus::Pending)
}

/// Code and message must be non-empty.
pub async fn fail_rejects_an_empty_code_or_message(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_error(
        h.store
            .fail(&round_ref(), &lease(), RoundFailure::new("", "m"))
            .await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    expect_error(
        h.store
            .fail(&round_ref(), &lease(), RoundFailure::new("c", ""))
            .await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    Ok(())
}

/// While the lease is live, recovery failure is refused.
pub async fn fail_recovery_requires_an_expired_lease(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_recovery_error(h, TOKEN, CONFLICT, Some(Reason::LeaseLive)).await?;
    expect_status(&reload(h).await?, ManagedInputStatus::Pending)
}

async fn recover_from(h: &Harness, record: ManagedInputRecord) -> Step<()> {
    advance(&h.clock, LEASE.as_secs());
    let failed = h
        .peer
        .fail_recovery(&round_ref(), TOKEN, "worker lost")
        .await?;
    expect_status(&failed, ManagedInputStatus::Failed)?;
    ensure!(
        failed.failure_code.as_deref() == Some(RECOVERY),
        "failure code must be recovery_unavailable"
    );
    ensure!(
        failed.failure_message.as_deref() == Some("worker lost"),
        "failure message"
    );
    ensure!(failed.responses == record.responses, "responses kept");
    ensure!(
        failed.failed_at == Some(start_time() + time::Duration::seconds(LEASE.as_secs() as i64)),
        "failed_at from the clock"
    );
    Ok(())
}

/// Every unresolved status can be terminalized once the lease expired.
pub async fn fail_recovery_terminalizes_every_unresolved_state(h: &Harness) -> CaseResult {
    let record = delivered(h).await?;
    recover_from(h, record).await?;
    for (index, steps) in [0_usize, 1, 2].into_iter().enumerate() {
        let execution = format!("exec-r{index}");
        let created = h
            .store
            .create_round(
                crate::CreateRound::new(
                    super::fixture::address_round(&execution, "round-1"),
                    OWNER,
                    LEASE,
                )
                .with_lease_token(TOKEN),
            )
            .await?;
        let round = crate::RoundRef::of(&created);
        let mut current = created;
        if steps >= 1 {
            current = h
                .store
                .submit_responses(&round, &lease(), submission("key-1"))
                .await?;
        }
        if steps >= 2 {
            current = h.store.start_delivery(&round, &lease()).await?;
        }
        advance(&h.clock, LEASE.as_secs());
        let failed = h.store.fail_recovery(&round, TOKEN, "worker lost").await?;
        expect_status(&failed, ManagedInputStatus::Failed)
            .map_err(|f| CaseFailure::new(format!("from {}: {f}", current.status.as_str())))?;
        ensure!(
            failed.failure_code.as_deref() == Some(RECOVERY),
            "from {}: wrong code",
            current.status.as_str()
        );
    }
    Ok(())
}

/// Recording the recovery failure twice is a no-op.
pub async fn fail_recovery_is_idempotent(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    let first = h
        .store
        .fail_recovery(&round_ref(), TOKEN, "worker lost")
        .await?;
    advance(&h.clock, 1);
    let again = h
        .store
        .fail_recovery(&round_ref(), TOKEN, "another message")
        .await?;
    expect_same(&first, &again, "second fail_recovery")
}

/// The expected token must match.
pub async fn fail_recovery_with_a_wrong_token_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_recovery_error(h, "lease-other", CONFLICT, Some(Reason::LeaseTokenMismatch)).await?;
    expect_status(&reload(h).await?, ManagedInputStatus::Pending)
}

/// A round with another failure keeps it.
pub async fn fail_recovery_after_another_failure_is_a_state_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_recovery_error(h, TOKEN, STATE, Some(Reason::Terminal)).await?;
    Ok(())
}

/// A resolved round needs no recovery.
pub async fn fail_recovery_on_a_resolved_round_is_a_state_error(h: &Harness) -> CaseResult {
    resolved(h).await?;
    advance(&h.clock, LEASE.as_secs());
    expect_recovery_error(h, TOKEN, STATE, Some(Reason::Terminal)).await?;
    Ok(())
}

/// After recovery failure, a late response is a state error and the round stays failed.
pub async fn late_responses_after_recovery_failure_are_state_errors(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs());
    h.store
        .fail_recovery(&round_ref(), TOKEN, "worker lost")
        .await?;
    expect_error(
        h.peer
            .submit_responses(&round_ref(), &lease(), submission("key-1"))
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    let stored = reload(h).await?;
    expect_status(&stored, ManagedInputStatus::Failed)?;
    ensure!(
        stored.failure_code.as_deref() == Some(RECOVERY),
        "still recovery_unavailable"
    );
    Ok(())
}
