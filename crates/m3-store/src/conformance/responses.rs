//! `submit_responses`: validation, idempotency and the redacted projection.

use std::collections::BTreeMap;

use m3_types::{ElicitationResponse, ManagedInputStatus};
use serde_json::json;

use m3_types::Reason;

use super::check::{ensure, expect_error, expect_same, expect_status};
use super::fixture::{
    ADDRESS, EXECUTION, LEASE, OWNER, ROUND, TOKEN, accept_address, address_content, advance,
    form_and_url_round, lease, pending, reload, resolved, round_ref, start_time, submission,
    validated,
};
use super::fixture::{cancelled, other_address};
use super::{CaseResult, Harness};
use crate::{CreateRound, LeaseRef, ResponseSubmission, RoundRef};

const INVALID: &str = "managed_input_invalid";
const CONFLICT: &str = "managed_input_conflict";
const STATE: &str = "managed_input_state";
const NOT_FOUND: &str = "not_found";

/// Submits `submission` under `lease` to the case's round and expects the error `code`
/// with `reason`.
async fn expect_submit_error(
    h: &Harness,
    lease: &LeaseRef,
    submission: ResponseSubmission,
    code: &str,
    reason: Option<Reason>,
) -> CaseResult {
    let result = h
        .store
        .submit_responses(&round_ref(), lease, submission)
        .await;
    expect_error(result, code, reason)?;
    Ok(())
}

/// A valid first submission moves `pending → response_validated` with its key.
pub async fn submit_moves_pending_to_response_validated(h: &Harness) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, 2);
    let record = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_status(&record, ManagedInputStatus::ResponseValidated)?;
    ensure!(
        record.responses.as_ref() == Some(&accept_address()),
        "responses not stored exactly"
    );
    ensure!(
        record.response_idempotency_key.as_deref() == Some("key-1"),
        "idempotency key not stored"
    );
    let now = start_time() + time::Duration::seconds(2);
    ensure!(
        record.response_validated_at == Some(now) && record.updated_at == now,
        "response timestamps must come from the clock"
    );
    ensure!(
        record.created_at == start_time(),
        "created_at must not change"
    );
    ensure!(
        record.pending.request_state.as_deref() == Some("opaque-state"),
        "request state lost"
    );
    let stored = reload(h).await?;
    expect_same(&record, &stored, "returned vs stored")?;
    Ok(())
}

async fn expect_still_pending(h: &Harness) -> CaseResult {
    let stored = reload(h).await?;
    expect_status(&stored, ManagedInputStatus::Pending)?;
    ensure!(
        stored.responses.is_none(),
        "a refused response must not be stored"
    );
    ensure!(
        h.store.redacted_responses(&round_ref()).await?.is_none(),
        "a refused response has no projection"
    );
    Ok(())
}

/// A response map without every request key is refused; the round stays pending.
pub async fn submit_rejects_missing_keys_and_keeps_the_round_pending(h: &Harness) -> CaseResult {
    pending(h).await?;
    let empty = ResponseSubmission::new(BTreeMap::new(), "key-1");
    expect_submit_error(h, &lease(), empty, INVALID, Some(Reason::InvalidResponse)).await?;
    expect_still_pending(h).await
}

/// Extra keys are refused.
pub async fn submit_rejects_unexpected_keys(h: &Harness) -> CaseResult {
    pending(h).await?;
    let mut responses = accept_address();
    responses.insert("other".into(), ElicitationResponse::decline());
    let extra = ResponseSubmission::new(responses, "key-1");
    expect_submit_error(h, &lease(), extra, INVALID, Some(Reason::InvalidResponse)).await?;
    expect_still_pending(h).await
}

/// Content that violates the request schema is refused; the round stays pending, and a
/// valid response is accepted afterwards.
pub async fn submit_rejects_schema_violations_and_keeps_the_round_pending(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    let mut content = serde_json::Map::new();
    content.insert("street".into(), json!(42));
    let bad = ResponseSubmission::single(ADDRESS, ElicitationResponse::accept(content), "key-1");
    expect_submit_error(h, &lease(), bad, INVALID, Some(Reason::InvalidResponse)).await?;
    expect_still_pending(h).await?;
    let record = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_status(&record, ManagedInputStatus::ResponseValidated)
}

/// A form acceptance needs content.
pub async fn submit_rejects_form_acceptance_without_content(h: &Harness) -> CaseResult {
    pending(h).await?;
    let bare = ResponseSubmission::single(ADDRESS, ElicitationResponse::accept_url(), "key-1");
    expect_submit_error(h, &lease(), bare, INVALID, Some(Reason::InvalidResponse)).await?;
    expect_still_pending(h).await
}

/// A URL response carries no form content.
pub async fn submit_rejects_url_content(h: &Harness) -> CaseResult {
    h.store
        .create_round(CreateRound::new(form_and_url_round(), OWNER, LEASE).with_lease_token(TOKEN))
        .await?;
    let responses = BTreeMap::from([
        (
            "address".to_owned(),
            ElicitationResponse::accept(address_content("1 Main Street")),
        ),
        (
            "payment".to_owned(),
            ElicitationResponse::accept(address_content("x")),
        ),
    ]);
    let with_content = ResponseSubmission::new(responses, "key-1");
    expect_submit_error(
        h,
        &lease(),
        with_content,
        INVALID,
        Some(Reason::InvalidResponse),
    )
    .await?;
    expect_still_pending(h).await
}

/// Decline, cancel and URL consent are valid responses.
pub async fn submit_accepts_decline_cancel_and_url_consent(h: &Harness) -> CaseResult {
    h.store
        .create_round(CreateRound::new(form_and_url_round(), OWNER, LEASE).with_lease_token(TOKEN))
        .await?;
    let responses = BTreeMap::from([
        ("address".to_owned(), ElicitationResponse::decline()),
        ("payment".to_owned(), ElicitationResponse::accept_url()),
    ]);
    let record = h
        .store
        .submit_responses(
            &round_ref(),
            &lease(),
            ResponseSubmission::new(responses.clone(), "key-1"),
        )
        .await?;
    ensure!(
        record.responses.as_ref() == Some(&responses),
        "decline + URL consent not stored exactly"
    );
    let other = h
        .store
        .create_round(CreateRound::new(
            super::fixture::address_round("exec-2", ROUND),
            OWNER,
            LEASE,
        ))
        .await?;
    let cancel = ResponseSubmission::single(ADDRESS, ElicitationResponse::cancel(), "key-2");
    let cancelled = h
        .store
        .submit_responses(&RoundRef::of(&other), &LeaseRef::of(&other.lease), cancel)
        .await?;
    expect_status(&cancelled, ManagedInputStatus::ResponseValidated)
}

/// The idempotency key must be non-empty.
pub async fn submit_rejects_an_empty_idempotency_key(h: &Harness) -> CaseResult {
    pending(h).await?;
    expect_submit_error(
        h,
        &lease(),
        submission(""),
        INVALID,
        Some(Reason::EmptyArgument),
    )
    .await?;
    expect_still_pending(h).await
}

/// A missing round is a conflict at store level.
pub async fn submit_to_a_missing_round_conflicts(h: &Harness) -> CaseResult {
    expect_submit_error(h, &lease(), submission("key-1"), NOT_FOUND, None).await?;
    Ok(())
}

/// Another owner or token cannot submit.
pub async fn submit_with_a_foreign_lease_conflicts(h: &Harness) -> CaseResult {
    pending(h).await?;
    let wrong_token = LeaseRef::new(OWNER, "lease-other");
    let wrong_owner = LeaseRef::new("worker-b", TOKEN);
    expect_submit_error(
        h,
        &wrong_token,
        submission("key-1"),
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )
    .await?;
    expect_submit_error(
        h,
        &wrong_owner,
        submission("key-1"),
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )
    .await?;
    expect_still_pending(h).await
}

/// Once the lease expired, a pending round refuses responses.
pub async fn submit_after_lease_expiry_conflicts_and_keeps_the_round_pending(
    h: &Harness,
) -> CaseResult {
    pending(h).await?;
    advance(&h.clock, LEASE.as_secs() + 1);
    expect_submit_error(
        h,
        &lease(),
        submission("key-1"),
        CONFLICT,
        Some(Reason::LeaseExpired),
    )
    .await?;
    expect_still_pending(h).await
}

/// Same key and same payload: the stored record comes back and nothing is written.
pub async fn submit_replay_with_same_key_and_payload_returns_the_stored_record(
    h: &Harness,
) -> CaseResult {
    let first = validated(h).await?;
    advance(&h.clock, 3);
    let replay = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_same(&first, &replay, "replay")?;
    let stored = reload(h).await?;
    expect_same(
        &first,
        &stored,
        "stored after replay (updated_at must not move)",
    )?;
    Ok(())
}

/// Same key, other payload: conflict (decline vs cancel too).
pub async fn submit_replay_with_same_key_and_other_payload_conflicts(h: &Harness) -> CaseResult {
    let first = validated(h).await?;
    let other = other_address("key-1");
    expect_submit_error(
        h,
        &lease(),
        other,
        CONFLICT,
        Some(Reason::IdempotencyKeyReused),
    )
    .await?;
    let decline = ResponseSubmission::single(ADDRESS, ElicitationResponse::decline(), "key-1");
    expect_submit_error(
        h,
        &lease(),
        decline,
        CONFLICT,
        Some(Reason::IdempotencyKeyReused),
    )
    .await?;
    expect_same(
        &first,
        &reload(h).await?,
        "stored after a conflicting replay",
    )
}

/// Another key, even with the same payload: conflict.
pub async fn submit_with_another_key_conflicts(h: &Harness) -> CaseResult {
    validated(h).await?;
    expect_submit_error(
        h,
        &lease(),
        submission("key-2"),
        CONFLICT,
        Some(Reason::IdempotencyKeyReused),
    )
    .await?;
    Ok(())
}

/// A replay is accepted even after the lease expired (the round is no longer pending).
pub async fn submit_replay_succeeds_after_lease_expiry(h: &Harness) -> CaseResult {
    let first = validated(h).await?;
    advance(&h.clock, LEASE.as_secs() * 10);
    let replay = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_same(&first, &replay, "replay after expiry")
}

/// A replay is accepted after the round resolved, returning the resolved record.
pub async fn submit_replay_succeeds_after_resolve(h: &Harness) -> CaseResult {
    let done = resolved(h).await?;
    let replay = h
        .store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_same(&done, &replay, "replay after resolve")?;
    expect_status(&replay, ManagedInputStatus::Resolved)
}

/// A replay still needs the owner and token.
pub async fn submit_replay_still_requires_the_lease_credentials(h: &Harness) -> CaseResult {
    validated(h).await?;
    let stranger = LeaseRef::new("worker-b", "lease-other");
    expect_submit_error(
        h,
        &stranger,
        submission("key-1"),
        CONFLICT,
        Some(Reason::LeaseNotHeld),
    )
    .await?;
    Ok(())
}

/// An invalid replay is a validation error, not a conflict.
pub async fn submit_replay_validates_before_comparing(h: &Harness) -> CaseResult {
    validated(h).await?;
    let empty = ResponseSubmission::new(BTreeMap::new(), "key-1");
    expect_submit_error(h, &lease(), empty, INVALID, Some(Reason::InvalidResponse)).await?;
    Ok(())
}

/// A failed round refuses responses with a state error, whatever the key.
pub async fn submit_to_a_failed_round_is_a_state_error(h: &Harness) -> CaseResult {
    validated(h).await?;
    h.store.fail(&round_ref(), &lease(), cancelled()).await?;
    expect_submit_error(
        h,
        &lease(),
        submission("key-1"),
        STATE,
        Some(Reason::RoundFailed),
    )
    .await?;
    expect_submit_error(
        h,
        &lease(),
        submission("key-9"),
        STATE,
        Some(Reason::RoundFailed),
    )
    .await?;
    let other = h
        .store
        .create_round(CreateRound::new(
            super::fixture::address_round("exec-2", ROUND),
            OWNER,
            LEASE,
        ))
        .await?;
    let other_ref = RoundRef::of(&other);
    let other_lease = LeaseRef::of(&other.lease);
    h.store.fail(&other_ref, &other_lease, cancelled()).await?;
    expect_error(
        h.store
            .submit_responses(&other_ref, &other_lease, submission("key-1"))
            .await,
        STATE,
        Some(Reason::RoundFailed),
    )?;
    Ok(())
}

/// The retry after a lost acknowledgement works on a reopened store.
pub async fn submit_replay_on_a_reopened_store_returns_the_stored_record(
    h: &Harness,
) -> CaseResult {
    let first = validated(h).await?;
    let replay = h
        .peer
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    expect_same(&first, &replay, "replay through a second store")
}

/// The redacted projection masks secrets and keeps the response shape.
pub async fn redacted_responses_mask_secrets(h: &Harness) -> CaseResult {
    h.store
        .create_round(CreateRound::new(form_and_url_round(), OWNER, LEASE).with_lease_token(TOKEN))
        .await?;
    let mut content = address_content("1 Main Street");
    content.insert("token".into(), json!("super-secret"));
    let responses = BTreeMap::from([
        ("address".to_owned(), ElicitationResponse::accept(content)),
        ("payment".to_owned(), ElicitationResponse::accept_url()),
    ]);
    let record = h
        .store
        .submit_responses(
            &round_ref(),
            &lease(),
            ResponseSubmission::new(responses, "key-1"),
        )
        .await?;
    let stored_secret = record
        .responses
        .as_ref()
        .and_then(|r| r.get("address"))
        .and_then(|r| r.content.as_ref())
        .and_then(|c| c.get("token"))
        .cloned();
    ensure!(
        stored_secret == Some(json!("super-secret")),
        "operational responses must stay unredacted"
    );
    let projection = h.store.redacted_responses(&round_ref()).await?;
    let expected = json!({
        "address": {"action": "accept", "content": {"city": "Pune", "street": "1 Main Street", "token": "[REDACTED]"}, "meta": null},
        "payment": {"action": "accept", "content": null, "meta": null}
    });
    ensure!(
        projection.clone().map(serde_json::Value::Object) == Some(expected),
        "unexpected projection {projection:?}"
    );
    Ok(())
}

/// Before a response there is no projection.
pub async fn redacted_responses_are_absent_before_a_response(h: &Harness) -> CaseResult {
    pending(h).await?;
    ensure!(
        h.store.redacted_responses(&round_ref()).await?.is_none(),
        "no projection before a response"
    );
    ensure!(
        h.peer
            .redacted_responses(&RoundRef::new(EXECUTION, "missing"))
            .await?
            .is_none(),
        "no projection for a missing round"
    );
    Ok(())
}
