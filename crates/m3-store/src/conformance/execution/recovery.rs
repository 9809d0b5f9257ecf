//! Recovery: expired leases by the store clock, `terminalize_expired`, and the rounds of the
//! same backend's managed-input store.

use std::time::Duration;

use m3_types::{ExecutionOutcome, ExecutionStatus, ManagedInputRecord, ManagedInputStatus, Reason};

use super::ExecutionHarness;
use super::support::{
    CONFLICT, INVALID_ARGUMENT, NOT_FOUND, STATE, TTL, advance, create, create_managed, lease,
    recovery_error,
};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::fixture::address_round;
use crate::conformance::{CaseResult, start_time};
use crate::execution::rules::ROUND_CLOSED_AT_FINISH;
use crate::{
    AcquireLease, CreateRound, EVENT_EXECUTION_FINISHED, ExecutionLeaseRef, FinishExecution,
    LeaseRef, ManagedInputStore, ManagedInputStoreExt, RoundRef, TerminalizeExpired,
};

/// Only unfinished executions whose lease expired by the store clock are listed, oldest
/// expiry first.
pub async fn expired_leases_are_listed_in_expiry_order(h: &ExecutionHarness) -> CaseResult {
    let a = create(h).await?.execution_id;
    let b = create_managed(h).await?.execution_id;
    let unleased = create(h).await?.execution_id;
    let finished = create(h).await?.execution_id;
    let la = h
        .store
        .acquire_lease(AcquireLease::new(&a, "w", Duration::from_secs(60)))
        .await?;
    let lb = lease(h, &b, "w").await?;
    let lf = lease(h, &finished, "w").await?;
    h.store
        .finish(
            FinishExecution::new(&finished, ExecutionOutcome::Completed).with_lease(lf.to_ref()),
        )
        .await?;
    ensure!(
        h.store.list_expired_leases().await?.is_empty(),
        "nothing expired at the start"
    );
    advance(h, TTL);
    let at_ttl = h.peer.list_expired_leases().await?;
    ensure!(
        at_ttl.len() == 1 && at_ttl[0].execution_id == b && at_ttl[0].lease == Some(lb),
        "at the ttl only b expired: {at_ttl:?}"
    );
    advance(h, Duration::from_secs(31));
    let later = h.store.list_expired_leases().await?;
    let ids: Vec<&str> = later.iter().map(|r| r.execution_id.as_str()).collect();
    ensure!(ids == [b.as_str(), a.as_str()], "expiry order: {ids:?}");
    ensure!(later[1].lease == Some(la), "a's lease");
    ensure!(!ids.contains(&unleased.as_str()), "unleased listed");
    Ok(())
}

/// Recovery finishes an expired execution exactly once, with the partial-capture event.
pub async fn terminalize_finishes_an_expired_execution_once(h: &ExecutionHarness) -> CaseResult {
    let id = create_managed(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    h.store
        .transition(&id, ExecutionStatus::Starting, Some(&held.to_ref()))
        .await?;
    let request = TerminalizeExpired::new(
        held.to_ref(),
        ExecutionOutcome::Failed,
        "worker lease expired",
    )
    .with_error(recovery_error());
    expect_error(
        h.store.terminalize_expired(request.clone()).await,
        CONFLICT,
        Some(Reason::LeaseLive),
    )?;
    advance(h, TTL);
    let wrong = TerminalizeExpired::new(
        ExecutionLeaseRef::new(&id, "worker-a", "lease-other"),
        ExecutionOutcome::Failed,
        "x",
    );
    expect_error(
        h.store.terminalize_expired(wrong).await,
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )?;
    let done = h.store.terminalize_expired(request.clone()).await?;
    let record = &done.record;
    ensure!(
        done.rounds_failed == 0
            && record.lifecycle == ExecutionStatus::Finished
            && record.outcome == Some(ExecutionOutcome::Failed)
            && record.error == Some(recovery_error())
            && record.lease.is_none()
            && record.finished_at == Some(start_time() + TTL),
        "unexpected terminalized record {done:?}"
    );
    let events = h.store.list_events(&id, None).await?;
    let last = events.last();
    ensure!(
        last.is_some_and(|e| e.kind == EVENT_EXECUTION_FINISHED
            && e.payload["reason"] == "worker lease expired"
            && e.payload["completeness"] == "partial"
            && e.payload["limitations"][0] == "capture_incomplete"
            && e.payload["error"]["code"] == "managed_input_recovery_unavailable"),
        "unexpected finished event {last:?}"
    );
    ensure!(
        h.store.list_expired_leases().await?.is_empty(),
        "still listed as expired"
    );
    expect_error(
        h.peer.terminalize_expired(request).await,
        STATE,
        Some(Reason::Finished),
    )?;
    expect_error(
        h.store
            .transition(&id, ExecutionStatus::RunningTurn, Some(&held.to_ref()))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidTransition),
    )?;
    expect_error(
        h.store
            .terminalize_expired(TerminalizeExpired::new(
                ExecutionLeaseRef::new("missing", "w", "t"),
                ExecutionOutcome::Interrupted,
                "x",
            ))
            .await,
        NOT_FOUND,
        None,
    )?;
    Ok(())
}

/// Recovery fails every unresolved round of the execution in the backend's own
/// managed-input store, without the round leases, and leaves resolved rounds and other
/// executions alone; a late answer is then a state error.
pub async fn terminalize_fails_the_unresolved_rounds_of_the_same_backend(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create_managed(h).await?.execution_id;
    let other = create_managed(h).await?.execution_id;
    let held = h
        .store
        .acquire_lease(AcquireLease::new(&id, "worker-a", Duration::from_secs(5)))
        .await?;
    let rounds = h.store.managed_input_store().await?;
    // Round leases outlive the execution lease: recovery must not need them.
    let long = Duration::from_secs(600);
    let done_ref = resolved_round(rounds.as_ref(), &id, long).await?;
    let open = rounds
        .create_round(
            CreateRound::new(address_round(&id, "r1"), "worker-a", long).with_round_index(1),
        )
        .await?;
    let bystander = rounds
        .create_round(CreateRound::new(
            address_round(&other, "r0"),
            "worker-b",
            long,
        ))
        .await?;
    advance(h, Duration::from_secs(5));
    let done = h
        .store
        .terminalize_expired(
            TerminalizeExpired::new(
                held.to_ref(),
                ExecutionOutcome::Failed,
                "worker lease expired",
            )
            .with_error(recovery_error()),
        )
        .await?;
    ensure!(
        done.rounds_failed == 1,
        "rounds_failed {}",
        done.rounds_failed
    );
    ensure_only_the_open_round_failed(h, &open, &done_ref, &bystander, "worker lease expired")
        .await?;
    expect_error(
        rounds
            .submit_responses(
                &RoundRef::of(&open),
                &LeaseRef::of(&open.lease),
                crate::conformance::fixture::submission("late"),
            )
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    Ok(())
}

/// `finish` closes the execution's unresolved rounds in the same step (the worker could not
/// record their failure, e.g. while its database restarted): a round of a finished
/// execution accepts no response, and a resolved round and other executions' rounds are
/// left as they were.
pub async fn finish_fails_the_unresolved_rounds_so_none_accepts_an_answer(
    h: &ExecutionHarness,
) -> CaseResult {
    let id = create_managed(h).await?.execution_id;
    let other = create_managed(h).await?.execution_id;
    let held = lease(h, &id, "worker-a").await?;
    let rounds = h.store.managed_input_store().await?;
    let long = Duration::from_secs(600);
    let done_ref = resolved_round(rounds.as_ref(), &id, long).await?;
    let open = rounds
        .create_round(
            CreateRound::new(address_round(&id, "r1"), "worker-a", long).with_round_index(1),
        )
        .await?;
    let bystander = rounds
        .create_round(CreateRound::new(
            address_round(&other, "r0"),
            "worker-b",
            long,
        ))
        .await?;
    let request = FinishExecution::new(&id, ExecutionOutcome::Failed)
        .with_error(recovery_error())
        .with_lease(held.to_ref());
    h.store.finish(request.clone()).await?;
    ensure_only_the_open_round_failed(h, &open, &done_ref, &bystander, ROUND_CLOSED_AT_FINISH)
        .await?;
    // The round's lease is still live and its owner's: only the finished execution stops it.
    expect_error(
        rounds
            .submit_responses(
                &RoundRef::of(&open),
                &LeaseRef::of(&open.lease),
                crate::conformance::fixture::submission("late"),
            )
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    // An idempotent repeat of the finish changes nothing.
    h.store.finish(request).await?;
    ensure_only_the_open_round_failed(h, &open, &done_ref, &bystander, ROUND_CLOSED_AT_FINISH)
        .await?;
    Ok(())
}

/// Creates round `r0` of execution `id` and walks it to `resolved` (answered,
/// delivered); returns its reference.
async fn resolved_round(
    rounds: &dyn ManagedInputStore,
    id: &str,
    lease_ttl: Duration,
) -> m3_types::Result<RoundRef> {
    let round = rounds
        .create_round(CreateRound::new(
            address_round(id, "r0"),
            "worker-a",
            lease_ttl,
        ))
        .await?;
    let round_ref = RoundRef::of(&round);
    let lease = LeaseRef::of(&round.lease);
    rounds
        .submit_responses(
            &round_ref,
            &lease,
            crate::conformance::fixture::submission("k0"),
        )
        .await?;
    rounds.start_delivery(&round_ref, &lease).await?;
    rounds.mark_delivered(&round_ref, &lease).await?;
    rounds.resolve(&round_ref, &lease).await?;
    Ok(round_ref)
}

/// Checks, through the peer store, that recovery failed the `open` round as
/// `recovery_unavailable` and left the resolved round and the `bystander` alone.
async fn ensure_only_the_open_round_failed(
    h: &ExecutionHarness,
    open: &ManagedInputRecord,
    resolved: &RoundRef,
    bystander: &ManagedInputRecord,
    message: &str,
) -> CaseResult {
    let peer_rounds = h.peer.managed_input_store().await?;
    let failed = peer_rounds.require_round(&RoundRef::of(open)).await?;
    ensure!(
        failed.status == ManagedInputStatus::Failed
            && failed.failure_code.as_deref() == Some("recovery_unavailable")
            && failed.failure_message.as_deref() == Some(message),
        "the open round must fail recovery_unavailable: {failed:?}"
    );
    let resolved = peer_rounds.require_round(resolved).await?;
    ensure!(
        resolved.status == ManagedInputStatus::Resolved,
        "resolved round changed"
    );
    let untouched = peer_rounds.require_round(&RoundRef::of(bystander)).await?;
    ensure!(&untouched == bystander, "another execution's round changed");
    Ok(())
}
