//! Sample rounds and responses, and shortcuts that bring a round to a given status.

use std::collections::BTreeMap;
use std::time::Duration;

use m3_types::{
    ElicitationRequest, ElicitationResponse, FormElicitationRequest, ManagedInputRecord,
    ManualClock, OperationKind, PendingElicitationRound, ResponseMap, UrlElicitationRequest,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::Harness;
use super::check::{CaseFailure, ensure};
use crate::{CreateRound, LeaseRef, ResponseSubmission, RoundFailure, RoundRef};

/// Creates `round-1` of a fresh execution in `store`, leased to `worker-1` for `lease`
/// (for a backend's own tests beside the suite).
///
/// # Errors
/// The store's.
pub async fn create_fresh_round(
    store: &dyn crate::ManagedInputStore,
    lease: Duration,
) -> m3_types::Result<ManagedInputRecord> {
    let execution = m3_types::new_id();
    store
        .create_round(CreateRound::new(
            sample_round(&execution, "round-1"),
            "worker-1",
            lease,
        ))
        .await
}

/// The time every case starts at: 2026-01-01T00:00:00Z.
pub fn start_time() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

pub(crate) const EXECUTION: &str = "exec-1";
pub(crate) const ROUND: &str = "round-1";
pub(crate) const OWNER: &str = "worker-a";
pub(crate) const TOKEN: &str = "lease-fixed-token";
pub(crate) const LEASE: Duration = Duration::from_secs(30);
pub(crate) const ADDRESS: &str = "shipping_address";

pub(crate) type Step<T> = Result<T, CaseFailure>;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub(crate) fn address_schema() -> Map<String, Value> {
    object(json!({
        "type": "object",
        "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        "required": ["street", "city"]
    }))
}

/// A one-request form round (`shipping_address`) with an opaque request state.
pub(crate) fn address_round(execution_id: &str, round_id: &str) -> PendingElicitationRound {
    let request =
        FormElicitationRequest::new(ADDRESS, "Enter the delivery address.", address_schema());
    let mut requests = BTreeMap::new();
    requests.insert(ADDRESS.to_owned(), ElicitationRequest::Form(request));
    PendingElicitationRound {
        round_id: round_id.to_owned(),
        execution_id: execution_id.to_owned(),
        logical_operation_id: "tool-call-1".to_owned(),
        server: "shipping".to_owned(),
        operation_kind: OperationKind::Tool,
        operation_name: "book_shipment".to_owned(),
        request_state: Some("opaque-state".to_owned()),
        requests,
        created_at: start_time(),
        deadline: None,
    }
}

/// The suites' sample round for other tests and benchmarks: one form request
/// (`shipping_address`, street and city required) of round `round_id` of `execution_id`.
pub fn sample_round(execution_id: &str, round_id: &str) -> PendingElicitationRound {
    address_round(execution_id, round_id)
}

/// A valid answer to [`sample_round`] (1 Main Street, Pune) under `idempotency_key`.
pub fn sample_submission(idempotency_key: &str) -> ResponseSubmission {
    submission(idempotency_key)
}

/// A two-request round: a form (`address`) and a URL (`payment`).
pub(crate) fn form_and_url_round() -> PendingElicitationRound {
    let mut pending = address_round(EXECUTION, ROUND);
    let form = FormElicitationRequest::new("address", "Where to?", address_schema());
    let url = UrlElicitationRequest::new(
        "payment",
        "Authorize the payment.",
        "https://pay.example/authorize?session=abc",
    );
    pending.requests = BTreeMap::from([
        ("address".to_owned(), ElicitationRequest::Form(form)),
        ("payment".to_owned(), ElicitationRequest::Url(url)),
    ]);
    pending
}

pub(crate) fn address_content(street: &str) -> Map<String, Value> {
    object(json!({"street": street, "city": "Pune"}))
}

pub(crate) fn accept_address() -> ResponseMap {
    BTreeMap::from([(
        ADDRESS.to_owned(),
        ElicitationResponse::accept(address_content("1 Main Street")),
    )])
}

pub(crate) fn submission(key: &str) -> ResponseSubmission {
    ResponseSubmission::new(accept_address(), key)
}

/// A valid submission of [`sample_round`]'s form with another address than
/// [`sample_submission`]'s, under `key`.
pub fn other_address(key: &str) -> ResponseSubmission {
    ResponseSubmission::single(
        ADDRESS,
        ElicitationResponse::accept(address_content("2 Side Road")),
        key,
    )
}

/// The failure the cases use: `cancelled`, "operation cancelled".
pub(crate) fn cancelled() -> RoundFailure {
    RoundFailure::new("cancelled", "operation cancelled")
}

pub(crate) fn round_ref() -> RoundRef {
    RoundRef::new(EXECUTION, ROUND)
}

pub(crate) fn lease() -> LeaseRef {
    LeaseRef::new(OWNER, TOKEN)
}

/// The standard create request (explicit token, so it can be replayed).
pub(crate) fn create_request() -> CreateRound {
    CreateRound::new(address_round(EXECUTION, ROUND), OWNER, LEASE)
        .with_round_index(0)
        .with_round_limit(3)
        .with_lease_token(TOKEN)
}

pub(crate) fn advance(clock: &ManualClock, seconds: u64) {
    clock.advance_std(Duration::from_secs(seconds));
}

/// A `pending` round.
pub(crate) async fn pending(h: &Harness) -> Step<ManagedInputRecord> {
    Ok(h.store.create_round(create_request()).await?)
}

/// A `response_validated` round (key `key-1`).
pub(crate) async fn validated(h: &Harness) -> Step<ManagedInputRecord> {
    pending(h).await?;
    Ok(h.store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?)
}

/// A `delivery_started` round.
pub(crate) async fn delivery_started(h: &Harness) -> Step<ManagedInputRecord> {
    validated(h).await?;
    Ok(h.store.start_delivery(&round_ref(), &lease()).await?)
}

/// A `delivered` round.
pub(crate) async fn delivered(h: &Harness) -> Step<ManagedInputRecord> {
    delivery_started(h).await?;
    Ok(h.store.mark_delivered(&round_ref(), &lease()).await?)
}

/// A `resolved` round.
pub(crate) async fn resolved(h: &Harness) -> Step<ManagedInputRecord> {
    delivered(h).await?;
    Ok(h.store.resolve(&round_ref(), &lease()).await?)
}

/// Reads the standard round, which must exist.
pub(crate) async fn reload(h: &Harness) -> Step<ManagedInputRecord> {
    let record = h.store.get_round(&round_ref()).await?;
    ensure!(record.is_some(), "the round disappeared");
    record.ok_or_else(|| CaseFailure::new("the round disappeared"))
}
