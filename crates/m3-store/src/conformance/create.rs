//! `create_round`, `get_round`, `list_rounds` and construction rules.

use std::collections::BTreeMap;
use std::time::Duration;

use m3_types::{Clock, ManagedInputStatus};
use serde_json::json;
use time::UtcOffset;

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status};
use super::fixture::{
    EXECUTION, LEASE, OWNER, ROUND, TOKEN, accept_address, address_round, create_request, lease,
    pending, round_ref, start_time, submission,
};
use super::{CaseResult, Harness, StoreFactory};
use crate::{CreateRound, RoundRef};

const INVALID: &str = "managed_input_invalid";
const CONFLICT: &str = "managed_input_conflict";

/// Creates `request`, expects `managed_input_invalid` with `reason`, and checks that
/// nothing was stored.
async fn expect_create_refused(h: &Harness, request: CreateRound, reason: Reason) -> CaseResult {
    expect_error(h.store.create_round(request).await, INVALID, Some(reason))?;
    ensure!(
        h.store.list_rounds(EXECUTION).await?.is_empty(),
        "a refused round must not be stored"
    );
    Ok(())
}

/// A new round is `pending`, without responses, with the lease and timestamps from the clock.
pub async fn create_round_persists_a_pending_round(h: &Harness) -> CaseResult {
    let record = pending(h).await?;
    expect_status(&record, ManagedInputStatus::Pending)?;
    ensure!(
        record.pending == address_round(EXECUTION, ROUND),
        "pending round changed"
    );
    ensure!(
        record.round_index == 0 && record.round_limit == 3,
        "round numbers changed"
    );
    ensure!(
        record.lease.owner_id == OWNER && record.lease.lease_token == TOKEN,
        "lease credentials changed"
    );
    ensure!(
        record.lease.expires_at == start_time() + time::Duration::seconds(30),
        "lease must expire at now + 30 s, got {}",
        record.lease.expires_at
    );
    ensure!(
        record.created_at == start_time() && record.updated_at == start_time(),
        "timestamps must come from the clock"
    );
    ensure!(
        record.responses.is_none() && record.response_idempotency_key.is_none(),
        "a new round has no responses"
    );
    ensure!(
        record.delivery_attempts == 0,
        "a new round has no delivery attempts"
    );
    ensure!(
        record.response_validated_at.is_none()
            && record.delivery_started_at.is_none()
            && record.delivered_at.is_none()
            && record.resolved_at.is_none()
            && record.failed_at.is_none()
            && record.failure_code.is_none(),
        "a new round has no lifecycle timestamps or failure"
    );
    let stored = h.store.get_round(&round_ref()).await?;
    ensure!(
        stored.as_ref() == Some(&record),
        "get_round must return the created record"
    );
    Ok(())
}

/// Optional interaction metadata and the opaque request state survive storage exactly.
pub async fn create_round_preserves_optional_metadata(h: &Harness) -> CaseResult {
    let mut parameters = serde_json::Map::new();
    parameters.insert("quantity".into(), json!(2));
    parameters.insert("price".into(), json!(1.5));
    parameters.insert("tags".into(), json!(["a", "ü", {"nested": null}]));
    let mut round = address_round(EXECUTION, ROUND);
    round.request_state = Some(String::new());
    round.deadline = Some(start_time() + time::Duration::minutes(5));
    let request = CreateRound::new(round.clone(), OWNER, LEASE)
        .with_lease_token(TOKEN)
        .with_harness_session_id("harness-session")
        .with_native_resume_token("resume-token")
        .with_delivery_idempotency_key("delivery-key")
        .with_session_id("session-1")
        .with_turn_id("turn-1")
        .with_operation_parameters(parameters.clone());
    let record = h.store.create_round(request).await?;
    let reloaded = h.peer.get_round(&round_ref()).await?;
    ensure!(
        reloaded.as_ref() == Some(&record),
        "a second store must read the same record"
    );
    ensure!(
        record.pending == round,
        "pending round (with empty request state and deadline) changed"
    );
    ensure!(
        record.harness_session_id.as_deref() == Some("harness-session"),
        "harness_session_id lost"
    );
    ensure!(
        record.native_resume_token.as_deref() == Some("resume-token"),
        "native_resume_token lost"
    );
    ensure!(
        record.delivery_idempotency_key.as_deref() == Some("delivery-key"),
        "delivery_idempotency_key lost"
    );
    ensure!(
        record.session_id.as_deref() == Some("session-1"),
        "session_id lost"
    );
    ensure!(record.turn_id.as_deref() == Some("turn-1"), "turn_id lost");
    ensure!(
        record.operation_parameters == parameters,
        "operation parameters changed: {:?}",
        record.operation_parameters
    );
    Ok(())
}

/// A round created without operation parameters stores `{}`, and a second store reads `{}`.
pub async fn create_round_operation_parameters_default_to_an_empty_object(
    h: &Harness,
) -> CaseResult {
    let record = h.store.create_round(create_request()).await?;
    ensure!(
        record.operation_parameters.is_empty(),
        "operation parameters must default to {{}}, got {:?}",
        record.operation_parameters
    );
    let reloaded = h.peer.get_round(&round_ref()).await?;
    ensure!(
        reloaded.is_some_and(|r| r.operation_parameters.is_empty()),
        "a second store must read {{}} as the operation parameters"
    );
    Ok(())
}

/// `round_index == round_limit` is refused and nothing is stored.
pub async fn create_round_rejects_round_index_at_the_limit(h: &Harness) -> CaseResult {
    let request = create_request().with_round_index(3).with_round_limit(3);
    expect_create_refused(h, request, Reason::RoundIndexOutOfRange).await
}

/// A zero round budget is refused.
pub async fn create_round_rejects_a_zero_round_limit(h: &Harness) -> CaseResult {
    let request = create_request().with_round_index(0).with_round_limit(0);
    expect_create_refused(h, request, Reason::RoundIndexOutOfRange).await
}

/// A round without requests is refused.
pub async fn create_round_rejects_an_empty_round(h: &Harness) -> CaseResult {
    let mut round = address_round(EXECUTION, ROUND);
    round.requests = BTreeMap::new();
    let request = CreateRound::new(round, OWNER, LEASE);
    expect_create_refused(h, request, Reason::InvalidRound).await
}

/// An empty owner id is refused.
pub async fn create_round_rejects_an_empty_owner(h: &Harness) -> CaseResult {
    let request = CreateRound::new(address_round(EXECUTION, ROUND), "", LEASE);
    expect_error(
        h.store.create_round(request).await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    Ok(())
}

/// A zero lease is refused.
pub async fn create_round_rejects_a_zero_lease(h: &Harness) -> CaseResult {
    let request = CreateRound::new(address_round(EXECUTION, ROUND), OWNER, Duration::ZERO);
    expect_error(
        h.store.create_round(request).await,
        INVALID,
        Some(Reason::InvalidLeaseDuration),
    )?;
    Ok(())
}

/// Optional strings, when given, must be non-empty.
pub async fn create_round_rejects_empty_optional_strings(h: &Harness) -> CaseResult {
    let cases = [
        (
            "harness_session_id",
            create_request().with_harness_session_id(""),
        ),
        (
            "native_resume_token",
            create_request().with_native_resume_token(""),
        ),
        (
            "delivery_idempotency_key",
            create_request().with_delivery_idempotency_key(""),
        ),
        ("session_id", create_request().with_session_id("")),
        ("turn_id", create_request().with_turn_id("")),
        ("lease_token", create_request().with_lease_token("")),
    ];
    for (label, request) in cases {
        expect_error(
            h.store.create_round(request).await,
            INVALID,
            Some(Reason::EmptyArgument),
        )
        .map_err(|f| super::CaseFailure::new(format!("{label}: {f}")))?;
    }
    ensure!(
        h.store.list_rounds(EXECUTION).await?.is_empty(),
        "nothing may be stored"
    );
    Ok(())
}

/// Replaying `create_round` with identical data returns the stored record unchanged.
pub async fn create_round_replay_with_identical_data_returns_the_stored_record(
    h: &Harness,
) -> CaseResult {
    let first = pending(h).await?;
    super::fixture::advance(&h.clock, 5);
    let replay = h.store.create_round(create_request()).await?;
    expect_same(&first, &replay, "replay")?;
    let from_peer = h.peer.create_round(create_request()).await?;
    expect_same(&first, &from_peer, "replay through a second store")?;
    Ok(())
}

/// A replay after the round moved on returns its current state.
pub async fn create_round_replay_after_progress_returns_the_current_record(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    let validated = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    let replay = h.store.create_round(create_request()).await?;
    expect_same(&validated, &replay, "replay after a response")?;
    expect_status(&replay, ManagedInputStatus::ResponseValidated)?;
    Ok(())
}

/// Without the explicit token, a replay gets a fresh token and therefore conflicts.
pub async fn create_round_replay_without_the_explicit_token_conflicts(h: &Harness) -> CaseResult {
    let request = CreateRound::new(address_round(EXECUTION, ROUND), OWNER, LEASE);
    h.store.create_round(request.clone()).await?;
    expect_error(
        h.store.create_round(request).await,
        CONFLICT,
        Some(Reason::IdConflict),
    )?;
    Ok(())
}

/// A different request state is different data.
pub async fn create_round_with_different_request_state_conflicts(h: &Harness) -> CaseResult {
    let original = pending(h).await?;
    let mut round = address_round(EXECUTION, ROUND);
    round.request_state = Some("other-state".to_owned());
    let request = CreateRound::new(round, OWNER, LEASE)
        .with_round_limit(3)
        .with_lease_token(TOKEN);
    expect_error(
        h.store.create_round(request).await,
        CONFLICT,
        Some(Reason::IdConflict),
    )?;
    let stored = super::fixture::reload(h).await?;
    expect_same(
        &original,
        &stored,
        "the stored round after a conflicting create",
    )?;
    Ok(())
}

/// Harness session id, native resume token, delivery key, session, turn, owner, limits and
/// parameters are all part of the round's identity.
pub async fn create_round_identity_includes_interaction_metadata(h: &Harness) -> CaseResult {
    pending(h).await?;
    let mut parameters = serde_json::Map::new();
    parameters.insert("x".into(), json!(1));
    let variants = [
        create_request().with_harness_session_id("h"),
        create_request().with_native_resume_token("r"),
        create_request().with_delivery_idempotency_key("d"),
        create_request().with_session_id("s"),
        create_request().with_turn_id("t"),
        create_request().with_operation_parameters(parameters),
        create_request().with_round_limit(4),
        CreateRound::new(address_round(EXECUTION, ROUND), "worker-b", LEASE)
            .with_round_limit(3)
            .with_lease_token(TOKEN),
    ];
    for (index, request) in variants.into_iter().enumerate() {
        let result = h.store.create_round(request).await;
        expect_error(result, CONFLICT, Some(Reason::IdConflict))
            .map_err(|f| super::CaseFailure::new(format!("variant {index}: {f}")))?;
    }
    Ok(())
}

/// Two rounds of one execution cannot share a `round_index`.
pub async fn create_round_with_a_taken_round_index_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    let request =
        CreateRound::new(address_round(EXECUTION, "round-2"), OWNER, LEASE).with_round_limit(3);
    expect_error(
        h.store.create_round(request).await,
        CONFLICT,
        Some(Reason::RoundIndexTaken),
    )?;
    ensure!(
        h.store
            .get_round(&RoundRef::new(EXECUTION, "round-2"))
            .await?
            .is_none(),
        "the conflicting round must not be stored"
    );
    let other_execution = CreateRound::new(address_round("exec-2", "round-2"), OWNER, LEASE);
    h.store.create_round(other_execution).await?;
    Ok(())
}

/// Generated lease tokens are non-empty and distinct.
pub async fn create_round_generates_distinct_lease_tokens(h: &Harness) -> CaseResult {
    let a = h
        .store
        .create_round(CreateRound::new(
            address_round("exec-a", ROUND),
            OWNER,
            LEASE,
        ))
        .await?;
    let b = h
        .store
        .create_round(CreateRound::new(
            address_round("exec-b", ROUND),
            OWNER,
            LEASE,
        ))
        .await?;
    ensure!(!a.lease.lease_token.is_empty(), "generated token is empty");
    ensure!(
        a.lease.lease_token != b.lease.lease_token,
        "generated tokens must differ"
    );
    Ok(())
}

/// A missing round reads as `None`.
pub async fn get_round_returns_none_for_a_missing_round(h: &Harness) -> CaseResult {
    ensure!(
        h.store.get_round(&round_ref()).await?.is_none(),
        "missing round must read as None"
    );
    ensure!(
        h.store.redacted_responses(&round_ref()).await?.is_none(),
        "missing round has no projection"
    );
    Ok(())
}

/// Empty identifiers are validation errors, for reads too.
pub async fn reads_reject_empty_identifiers(h: &Harness) -> CaseResult {
    expect_error(
        h.store.get_round(&RoundRef::new("", ROUND)).await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    expect_error(
        h.store.get_round(&RoundRef::new(EXECUTION, "")).await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    expect_error(
        h.store.list_rounds("").await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    expect_error(
        h.store
            .redacted_responses(&RoundRef::new(EXECUTION, ""))
            .await,
        INVALID,
        Some(Reason::EmptyArgument),
    )?;
    Ok(())
}

/// `list_rounds` returns one execution's rounds ordered by `round_index`.
pub async fn list_rounds_orders_by_round_index_within_one_execution(h: &Harness) -> CaseResult {
    for (index, round_id) in [(2_u32, "c"), (0, "a"), (1, "b")] {
        let request = CreateRound::new(address_round(EXECUTION, round_id), OWNER, LEASE)
            .with_round_index(index)
            .with_round_limit(3);
        h.store.create_round(request).await?;
    }
    h.store
        .create_round(CreateRound::new(
            address_round("exec-other", "z"),
            OWNER,
            LEASE,
        ))
        .await?;
    let rounds = h.store.list_rounds(EXECUTION).await?;
    let ids: Vec<&str> = rounds.iter().map(|r| r.pending.round_id.as_str()).collect();
    ensure!(
        ids == ["a", "b", "c"],
        "expected rounds a, b, c in index order, got {ids:?}"
    );
    ensure!(
        h.store.list_rounds("exec-none").await?.is_empty(),
        "unknown execution has no rounds"
    );
    Ok(())
}

/// A second store object (a reopened database) reads the same round, and accepts the
/// response retry with the same key.
pub async fn a_second_store_reads_the_same_round(h: &Harness) -> CaseResult {
    let record = pending(h).await?;
    let seen = h.peer.get_round(&round_ref()).await?;
    ensure!(
        seen.as_ref() == Some(&record),
        "the peer store must read the same record"
    );
    let listed = h.peer.list_rounds(EXECUTION).await?;
    ensure!(
        listed == vec![record],
        "the peer store must list the same record"
    );
    let accepted = h
        .peer
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    ensure!(
        accepted.responses.as_ref() == Some(&accept_address()),
        "peer accepted other responses"
    );
    Ok(())
}

/// A round that breaks its own invariants (a request filed under another key than its
/// `request_key`, an empty `server` or `logical_operation_id`) is refused before anything is
/// written, and the execution's other rounds stay listable.
pub async fn create_round_validates_the_whole_round_before_writing(h: &Harness) -> CaseResult {
    let good = h
        .store
        .create_round(CreateRound::new(
            address_round(EXECUTION, "round-0"),
            OWNER,
            LEASE,
        ))
        .await?;
    let mut misfiled = address_round(EXECUTION, ROUND);
    if let Some(request) = misfiled.requests.remove(super::fixture::ADDRESS) {
        misfiled.requests.insert("another_key".to_owned(), request);
    }
    let mut no_server = address_round(EXECUTION, ROUND);
    no_server.server = String::new();
    let mut no_operation = address_round(EXECUTION, ROUND);
    no_operation.logical_operation_id = String::new();
    for (what, round) in [
        ("misfiled request", misfiled),
        ("empty server", no_server),
        ("empty logical_operation_id", no_operation),
    ] {
        let request = CreateRound::new(round, OWNER, LEASE).with_round_index(1);
        expect_error(
            h.store.create_round(request).await,
            INVALID,
            Some(Reason::InvalidRound),
        )
        .map_err(|f| super::CaseFailure::new(format!("{what}: {f}")))?;
    }
    ensure!(
        h.store.get_round(&round_ref()).await?.is_none(),
        "a refused round must not be stored"
    );
    let listed = h.store.list_rounds(EXECUTION).await?;
    ensure!(
        listed == vec![good],
        "the execution's rounds changed: {listed:?}"
    );
    Ok(())
}

/// A timezone-aware clock in another offset is accepted; the store keeps UTC times of the
/// same instant.
pub async fn non_utc_clock_is_normalized_to_utc(factory: &dyn StoreFactory) -> CaseResult {
    let offset =
        UtcOffset::from_hms(5, 30, 0).map_err(|e| super::CaseFailure::new(e.to_string()))?;
    let clock = OffsetClock(start_time().to_offset(offset));
    let backend = factory.create(std::sync::Arc::new(clock)).await?;
    let record = backend.store.create_round(create_request()).await?;
    ensure!(
        record.created_at == start_time() && record.created_at.offset() == UtcOffset::UTC,
        "created_at {} is not the clock's instant in UTC",
        record.created_at
    );
    ensure!(
        record.lease.expires_at == start_time() + LEASE,
        "lease expiry {} is not start + lease",
        record.lease.expires_at
    );
    let read = backend.peer.get_round(&round_ref()).await?;
    ensure!(
        read.as_ref() == Some(&record),
        "the stored round reads back differently"
    );
    Ok(())
}

/// A clock that reports a fixed time in a non-UTC offset.
#[derive(Debug)]
struct OffsetClock(time::OffsetDateTime);

impl Clock for OffsetClock {
    fn now(&self) -> time::OffsetDateTime {
        self.0
    }
}
