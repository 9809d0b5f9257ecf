//! Concurrent writers through two independent store objects on the same data.

use m3_types::ManagedInputStatus;

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status, one_winner};
use super::fixture::other_address;
use super::fixture::{
    EXECUTION, LEASE, OWNER, TOKEN, accept_address, address_round, advance, create_request, lease,
    pending, reload, round_ref, submission, validated,
};
use super::{CaseResult, Harness};
use crate::CreateRound;

const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";

/// Two identical submissions racing from two store objects both succeed with identical
/// records: one commit, the other a replay.
pub async fn concurrent_identical_submissions_both_succeed_with_one_write(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    let round = round_ref();
    let lease = lease();
    let (a, b) = tokio::join!(
        h.store
            .submit_responses(&round, &lease, submission("key-1")),
        h.peer.submit_responses(&round, &lease, submission("key-1")),
    );
    let (a, b) = (a?, b?);
    expect_status(&a, ManagedInputStatus::ResponseValidated)?;
    expect_same(&a, &b, "the two racing submissions")?;
    expect_same(&a, &reload(h).await?, "stored")?;
    Ok(())
}

/// Two different submissions racing: exactly one wins, the other conflicts, and the stored
/// responses are the winner's.
pub async fn concurrent_different_submissions_have_one_winner(h: &Harness) -> CaseResult {
    pending(h).await?;
    let round = round_ref();
    let lease = lease();
    let other = other_address("key-2");
    let (a, b) = tokio::join!(
        h.store
            .submit_responses(&round, &lease, submission("key-1")),
        h.peer.submit_responses(&round, &lease, other.clone()),
    );
    let stored = reload(h).await?;
    let (winner, error) = one_winner(a, b, "different submissions")?;
    ensure!(
        error.code() == CONFLICT,
        "the loser must conflict, got {}: {error}",
        error.code()
    );
    expect_same(&winner, &stored, "winner vs stored")?;
    let expected_first = stored.response_idempotency_key.as_deref() == Some("key-1")
        && stored.responses.as_ref() == Some(&accept_address());
    let expected_second = stored.response_idempotency_key.as_deref() == Some("key-2")
        && stored.responses.as_ref() == Some(&other.responses);
    ensure!(
        expected_first || expected_second,
        "stored responses and key must belong to one submission"
    );
    Ok(())
}

/// A response replay racing a recovery failure on an expired lease: the round ends failed
/// with `recovery_unavailable`, keeps its responses, and the replay either succeeded first or
/// met the failed round (state error). Nothing else is possible.
pub async fn submit_replay_races_fail_recovery_safely(h: &Harness) -> CaseResult {
    let accepted = validated(h).await?;
    advance(&h.clock, LEASE.as_secs() + 1);
    let round = round_ref();
    let lease = lease();
    let (submitted, recovered) = tokio::join!(
        h.store
            .submit_responses(&round, &lease, submission("key-1")),
        h.peer.fail_recovery(&round, TOKEN, "worker lost"),
    );
    let recovered = recovered?;
    expect_status(&recovered, ManagedInputStatus::Failed)?;
    match submitted {
        Ok(record) => expect_same(&record, &accepted, "replay before the recovery decision")?,
        Err(error) => ensure!(
            error.code() == STATE,
            "a late replay must be a state error, got {}: {error}",
            error.code()
        ),
    }
    let stored = reload(h).await?;
    ensure!(
        stored.failure_code.as_deref() == Some("recovery_unavailable"),
        "recovery_unavailable"
    );
    ensure!(
        stored.responses == accepted.responses,
        "responses kept as diagnostics"
    );
    Ok(())
}

/// A first response racing a recovery failure: with a live lease the response wins and the
/// recovery is refused; with an expired lease the recovery wins and the response is refused.
pub async fn pending_submit_races_fail_recovery_safely(h: &Harness) -> CaseResult {
    pending(h).await?;
    let round = round_ref();
    let lease = lease();
    let (submitted, recovered) = tokio::join!(
        h.store
            .submit_responses(&round, &lease, submission("key-1")),
        h.peer.fail_recovery(&round, TOKEN, "worker lost"),
    );
    expect_status(&submitted?, ManagedInputStatus::ResponseValidated)?;
    expect_error(recovered, CONFLICT, Some(Reason::LeaseLive))?;

    let second = h
        .store
        .create_round(
            crate::CreateRound::new(
                super::fixture::address_round("exec-2", "round-1"),
                super::fixture::OWNER,
                LEASE,
            )
            .with_lease_token(TOKEN),
        )
        .await?;
    let second_ref = crate::RoundRef::of(&second);
    advance(&h.clock, LEASE.as_secs());
    let (submitted, recovered) = tokio::join!(
        h.peer
            .submit_responses(&second_ref, &lease, submission("key-1")),
        h.store.fail_recovery(&second_ref, TOKEN, "worker lost"),
    );
    expect_status(&recovered?, ManagedInputStatus::Failed)?;
    let error = match submitted {
        Ok(record) => {
            return Err(super::CaseFailure::new(format!(
                "an expired pending round accepted a response: {record:?}"
            )));
        }
        Err(error) => error,
    };
    ensure!(
        error.code() == CONFLICT || error.code() == STATE,
        "the refused response must be a conflict or a state error, got {}: {error}",
        error.code()
    );
    let stored = h.store.get_round(&second_ref).await?;
    ensure!(
        stored.as_ref().is_some_and(|r| r.responses.is_none()),
        "no responses may be stored"
    );
    Ok(())
}

/// Two `start_delivery` calls racing count one delivery attempt.
pub async fn concurrent_start_delivery_counts_one_attempt(h: &Harness) -> CaseResult {
    validated(h).await?;
    let round = round_ref();
    let lease = lease();
    let (a, b) = tokio::join!(
        h.store.start_delivery(&round, &lease),
        h.peer.start_delivery(&round, &lease),
    );
    let (a, b) = (a?, b?);
    expect_same(&a, &b, "the two racing starts")?;
    ensure!(
        a.delivery_attempts == 1,
        "expected one attempt, got {}",
        a.delivery_attempts
    );
    Ok(())
}

/// Two identical `create_round` calls racing return the same single round.
pub async fn concurrent_identical_creates_return_one_round(h: &Harness) -> CaseResult {
    let (a, b) = tokio::join!(
        h.store.create_round(create_request()),
        h.peer.create_round(create_request()),
    );
    let (a, b) = (a?, b?);
    expect_same(&a, &b, "the two racing creates")?;
    let listed = h.store.list_rounds(super::fixture::EXECUTION).await?;
    ensure!(listed.len() == 1, "exactly one round, got {}", listed.len());
    Ok(())
}

/// Two creates of different rounds at one `round_index` of one execution, racing from two
/// store objects: one is stored, the other is a `round_index_taken` conflict.
pub async fn concurrent_creates_at_one_round_index_store_one(h: &Harness) -> CaseResult {
    let at_zero = |round_id: &str| {
        CreateRound::new(address_round(EXECUTION, round_id), OWNER, LEASE).with_round_limit(3)
    };
    let (a, b) = tokio::join!(
        h.store.create_round(at_zero("round-a")),
        h.peer.create_round(at_zero("round-b")),
    );
    let (_, refused) = one_winner(a, b, "creates at one index")?;
    expect_error(
        Err::<(), _>(refused),
        CONFLICT,
        Some(Reason::RoundIndexTaken),
    )?;
    let listed = h.store.list_rounds(EXECUTION).await?;
    ensure!(listed.len() == 1, "exactly one round, got {}", listed.len());
    Ok(())
}
