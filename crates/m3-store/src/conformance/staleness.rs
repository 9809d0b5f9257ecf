//! Writes decide from the stored row, never from what this store object saw last: another
//! store object on the same data changes the round between this store's read and its write.
//! (A backend that caches rows, as the SQLite backend does for its one-round-trip writes,
//! must notice the change and answer as if it had read the row afresh.)

use std::time::Duration;

use m3_types::{ElicitationResponse, ManagedInputStatus};

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status};
use super::fixture::{advance, lease, pending, reload, round_ref, submission, validated};
use super::fixture::{cancelled, other_address};
use super::{CaseResult, Harness};
use crate::ResponseSubmission;

const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";

/// The peer renews the lease after this store's last write; this store's transitions then
/// succeed past the old expiry and return the renewed lease.
pub async fn transitions_after_a_peer_renewed_see_the_renewed_lease(h: &Harness) -> CaseResult {
    validated(h).await?;
    advance(&h.clock, 10);
    let renewed = h
        .peer
        .renew(&round_ref(), &lease(), Duration::from_secs(60))
        .await?;
    advance(&h.clock, 25);
    let started = h.store.start_delivery(&round_ref(), &lease()).await?;
    expect_status(&started, ManagedInputStatus::DeliveryStarted)?;
    ensure!(
        started.lease.expires_at == renewed.lease.expires_at,
        "start_delivery must return the renewed expiry {}, got {}",
        renewed.lease.expires_at,
        started.lease.expires_at
    );
    expect_same(&started, &reload(h).await?, "returned vs stored")?;
    let delivered = h.store.mark_delivered(&round_ref(), &lease()).await?;
    expect_status(&delivered, ManagedInputStatus::Delivered)
}

/// The peer fails the round after this store validated the responses; this store's
/// `start_delivery` is a state error and the round stays failed.
pub async fn a_transition_after_a_peer_failed_the_round_is_a_state_error(
    h: &Harness,
) -> CaseResult {
    validated(h).await?;
    h.peer.fail(&round_ref(), &lease(), cancelled()).await?;
    expect_error(
        h.store.start_delivery(&round_ref(), &lease()).await,
        STATE,
        Some(Reason::WrongStatus),
    )?;
    expect_status(&reload(h).await?, ManagedInputStatus::Failed)
}

/// The peer accepts responses after this store created the round: the same key and payload
/// through this store is a replay of the peer's record, another key a conflict.
pub async fn a_submission_after_a_peer_accepted_is_a_replay_or_a_conflict(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    let accepted = h
        .peer
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    let replay = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_same(&replay, &accepted, "replay vs the peer's record")?;
    let other = other_address("key-2");
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), other)
            .await,
        CONFLICT,
        Some(Reason::IdempotencyKeyReused),
    )?;
    Ok(())
}

/// The peer fails the round after this store created it: even responses that do not
/// validate are answered with the state error a fresh read gives ("failed ... cannot accept
/// responses"), not with the validation error the old pending round would give.
pub async fn a_submission_after_a_peer_failed_the_round_is_a_state_error(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    h.peer.fail(&round_ref(), &lease(), cancelled()).await?;
    let invalid =
        ResponseSubmission::single("not_requested", ElicitationResponse::decline(), "key-1");
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), invalid)
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), submission("key-1"))
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    Ok(())
}
