//! Execution store: worker leases (acquire, renew, release, expiry by a manual
//! clock), lease fencing of writes, and recovery of expired leases.

mod store_execution_support;

use std::time::Duration;

use m3_store::{
    AcquireLease, EVENT_EXECUTION_FINISHED, ExecutionLeaseRef, ExecutionStore, FinishExecution,
    TerminalizeExpired,
};
use m3_types::{ErrorCode, ErrorInfo, ExecutionOutcome, ExecutionStatus};
use serde_json::json;
use store_execution_support::*;

#[tokio::test(flavor = "multi_thread")]
async fn acquire_sets_owner_token_and_expiry() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let record = create(&store).await?;
    let id = record.execution_id.as_str();
    let lease = lease(&store, id, "worker-a").await?;
    assert_eq!(lease.execution_id, id);
    assert_eq!(lease.owner_id, "worker-a");
    assert!(
        lease.lease_token.starts_with("lease-"),
        "{}",
        lease.lease_token
    );
    assert_eq!(lease.expires_at, START + TTL);
    let stored = store.get_execution(id).await?.ok_or("missing")?;
    assert_eq!(stored.lease, Some(lease));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn acquire_is_idempotent_for_same_owner_and_token_and_exclusive_otherwise() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let request = AcquireLease::new(&id, "worker-a", TTL).with_lease_token("lease-fixed");
    let first = store.acquire_lease(request.clone()).await?;
    fx.clock.advance_std(Duration::from_secs(1));
    assert_eq!(store.acquire_lease(request).await?, first);

    let err = assert_code(
        lease(&store, &id, "worker-b").await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_held");
    // Same owner, other token: also someone else's lease.
    assert_code(
        lease(&store, &id, "worker-a").await,
        "managed_input_conflict",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn acquire_validates_its_arguments_and_the_execution() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    assert_code(lease(&store, &id, " ").await, "invalid_argument");
    assert_code(
        store
            .acquire_lease(AcquireLease::new(&id, "w", Duration::ZERO))
            .await,
        "invalid_argument",
    );
    assert_code(
        store
            .acquire_lease(AcquireLease::new(&id, "w", TTL).with_lease_token(""))
            .await,
        "invalid_argument",
    );
    assert_code(
        lease(&store, "missing", "w").await,
        "managed_input_conflict",
    );

    let taken = lease(&store, &id, "w").await?;
    let other = create(&store).await?.execution_id;
    let err = assert_code(
        store
            .acquire_lease(AcquireLease::new(&other, "w", TTL).with_lease_token(&taken.lease_token))
            .await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_token_in_use");

    let done = create(&store).await?.execution_id;
    store
        .finish(FinishExecution::new(&done, ExecutionOutcome::Completed))
        .await?;
    assert_code(lease(&store, &done, "w").await, "managed_input_state");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn lease_expires_by_the_clock_and_is_never_taken_over() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;

    fx.clock.advance_std(TTL - Duration::from_secs(1));
    let renewed = store.renew_lease(&held.to_ref(), TTL).await?;
    assert_eq!(
        renewed.expires_at,
        START + TTL - Duration::from_secs(1) + TTL
    );

    fx.clock.advance_std(TTL);
    // Exactly at expiry the lease is expired.
    let err = assert_code(
        store.renew_lease(&held.to_ref(), TTL).await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_expired");
    let err = assert_code(
        lease(&store, &id, "worker-b").await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "recovery_required");
    let err = assert_code(
        store.release_lease(&held.to_ref()).await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_expired");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn renew_and_release_refuse_a_wrong_owner_or_token() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;
    let wrong_owner = ExecutionLeaseRef::new(&id, "worker-b", &held.lease_token);
    let wrong_token = ExecutionLeaseRef::new(&id, "worker-a", "lease-other");
    for bad in [&wrong_owner, &wrong_token] {
        let err = assert_code(store.renew_lease(bad, TTL).await, "managed_input_conflict");
        assert_eq!(err.details()["reason"], "lease_not_held");
        assert_code(store.release_lease(bad).await, "managed_input_conflict");
    }
    assert_code(
        store.renew_lease(&held.to_ref(), Duration::ZERO).await,
        "invalid_argument",
    );
    assert_code(
        store
            .renew_lease(&ExecutionLeaseRef::new("missing", "w", "t"), TTL)
            .await,
        "managed_input_conflict",
    );
    // The real lease is untouched.
    assert_eq!(
        store.get_execution(&id).await?.ok_or("missing")?.lease,
        Some(held)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn released_lease_can_be_acquired_again_and_old_token_is_dead() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let first = lease(&store, &id, "worker-a").await?;
    store.release_lease(&first.to_ref()).await?;
    assert_eq!(
        store.get_execution(&id).await?.ok_or("missing")?.lease,
        None
    );
    let second = lease(&store, &id, "worker-b").await?;
    assert_ne!(second.lease_token, first.lease_token);
    let err = assert_code(
        store.renew_lease(&first.to_ref(), TTL).await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_not_held");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn leased_writes_need_the_live_lease_and_unleased_writes_need_none() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    store.transition(&id, ExecutionStatus::Queued, None).await?;
    let held = lease(&store, &id, "worker-a").await?;
    let fence = held.to_ref();

    // Unleased writers are refused while a worker holds the lease.
    let err = assert_code(
        store.transition(&id, ExecutionStatus::Starting, None).await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_required");
    assert_code(
        store.append_event(&id, "diagnostic", json!({}), None).await,
        "managed_input_conflict",
    );
    assert_code(
        store
            .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
            .await,
        "managed_input_conflict",
    );

    // A wrong lease is refused.
    let wrong = ExecutionLeaseRef::new(&id, "worker-a", "lease-wrong");
    assert_code(
        store
            .transition(&id, ExecutionStatus::Starting, Some(&wrong))
            .await,
        "managed_input_conflict",
    );

    // The holder writes.
    store
        .transition(&id, ExecutionStatus::Starting, Some(&fence))
        .await?;
    store
        .transition(&id, ExecutionStatus::RunningTurn, Some(&fence))
        .await?;
    let event = store
        .append_event(
            &id,
            "elicitation.request",
            json!({"round_id": "r1"}),
            Some(&fence),
        )
        .await?;
    assert_eq!(event.sequence, 4);

    // After expiry even the holder is refused.
    fx.clock.advance_std(TTL);
    let err = assert_code(
        store
            .transition(&id, ExecutionStatus::WaitingForInput, Some(&fence))
            .await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_expired");
    assert_code(
        store
            .append_event(&id, "diagnostic", json!({}), Some(&fence))
            .await,
        "managed_input_conflict",
    );
    let err = assert_code(
        store
            .finish(
                FinishExecution::new(&id, ExecutionOutcome::Completed).with_lease(fence.clone()),
            )
            .await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_expired");
    // Unleased writers are refused too: only recovery may finish it now.
    let err = assert_code(
        store
            .finish(FinishExecution::new(&id, ExecutionOutcome::Cancelled))
            .await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "recovery_required");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn finish_with_the_lease_ends_it_and_release_afterwards_succeeds() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;
    let finished = store
        .finish(FinishExecution::new(&id, ExecutionOutcome::Completed).with_lease(held.to_ref()))
        .await?;
    assert_eq!(finished.lease, None);
    store.release_lease(&held.to_ref()).await?;
    assert_code(
        store.renew_lease(&held.to_ref(), TTL).await,
        "managed_input_state",
    );
    assert!(
        store
            .list_expired_leases(START + TTL * 10)
            .await?
            .is_empty()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_leases_are_listed_in_expiry_order() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let a = create(&store).await?.execution_id;
    let b = create_managed(&store).await?.execution_id;
    let unleased = create(&store).await?.execution_id;
    let finished = create(&store).await?.execution_id;
    let la = store
        .acquire_lease(AcquireLease::new(&a, "w", Duration::from_secs(60)))
        .await?;
    let lb = lease(&store, &b, "w").await?;
    let lf = lease(&store, &finished, "w").await?;
    store
        .finish(
            FinishExecution::new(&finished, ExecutionOutcome::Completed).with_lease(lf.to_ref()),
        )
        .await?;

    assert!(store.list_expired_leases(START).await?.is_empty());
    let at_30 = store.list_expired_leases(START + TTL).await?;
    assert_eq!(at_30.len(), 1);
    assert_eq!(at_30[0].execution_id, b);
    assert_eq!(at_30[0].lease, Some(lb));

    let later = store
        .list_expired_leases(START + Duration::from_secs(61))
        .await?;
    let ids: Vec<_> = later.iter().map(|r| r.execution_id.as_str()).collect();
    assert_eq!(ids, [b.as_str(), a.as_str()]);
    assert_eq!(later[1].lease, Some(la));
    assert!(!ids.contains(&unleased.as_str()));
    Ok(())
}

fn recovery_error() -> ErrorInfo {
    ErrorInfo::new(
        ErrorCode::ManagedInputRecoveryUnavailable,
        "managed input recovery is unavailable",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn terminalize_finishes_an_expired_execution_once() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create_managed(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;
    store
        .transition(&id, ExecutionStatus::Starting, Some(&held.to_ref()))
        .await?;

    let request = TerminalizeExpired::new(
        held.to_ref(),
        ExecutionOutcome::Failed,
        "worker lease expired",
    )
    .with_error(recovery_error());
    // Still live: refused.
    let err = assert_code(
        store.terminalize_expired(request.clone()).await,
        "managed_input_conflict",
    );
    assert_eq!(err.details()["reason"], "lease_live");
    // Wrong token: refused.
    let wrong = TerminalizeExpired::new(
        ExecutionLeaseRef::new(&id, "worker-a", "lease-other"),
        ExecutionOutcome::Failed,
        "x",
    );
    fx.clock.advance_std(TTL);
    assert_code(
        store.terminalize_expired(wrong).await,
        "managed_input_conflict",
    );

    let done = store.terminalize_expired(request.clone()).await?;
    assert_eq!(done.rounds_failed, 0);
    let record = done.record;
    assert_eq!(record.lifecycle, ExecutionStatus::Finished);
    assert_eq!(record.outcome, Some(ExecutionOutcome::Failed));
    assert_eq!(record.error, Some(recovery_error()));
    assert_eq!(record.lease, None);
    assert_eq!(record.finished_at, Some(START + TTL));

    let events = store.list_events(&id, None).await?;
    let last = events.last().ok_or("no events")?;
    assert_eq!(last.kind, EVENT_EXECUTION_FINISHED);
    assert_eq!(last.payload["reason"], "worker lease expired");
    assert_eq!(last.payload["completeness"], "partial");
    assert_eq!(
        last.payload["error"]["code"],
        "managed_input_recovery_unavailable"
    );
    assert!(store.list_expired_leases(START + TTL * 2).await?.is_empty());

    // Once finished: a state error, and the old worker cannot write anymore.
    assert_code(
        store.terminalize_expired(request).await,
        "managed_input_state",
    );
    assert_code(
        store
            .transition(&id, ExecutionStatus::RunningTurn, Some(&held.to_ref()))
            .await,
        "invalid_argument",
    );
    assert_code(
        store
            .terminalize_expired(TerminalizeExpired::new(
                ExecutionLeaseRef::new("missing", "w", "t"),
                ExecutionOutcome::Interrupted,
                "x",
            ))
            .await,
        "managed_input_conflict",
    );
    Ok(())
}
