//! On-disk compatibility with the Python original (sf-m3 0.3.1), both directions, driving the
//! real Python package through `tests/peers/m3_store_peer.py`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use m3_store::{
    ClaimRound, CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundFailure,
    RoundRef, SqliteManagedInputStore, SqliteStoreOptions,
};
use m3_tests::store_support::{address_response, address_round, normalize_timestamps, store_peer};
use m3_types::{
    Actor, ActorSurface, Clock, DeliveryState, ElicitationRequest, ElicitationResponse,
    ManagedInputStatus, ManualClock, SystemClock, UrlElicitationRequest,
};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn record_json(record: &m3_types::ManagedInputRecord) -> Value {
    normalize_timestamps(
        serde_json::to_value(record)
            .unwrap_or_else(|e| Value::String(format!("unserializable record: {e}"))),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_written_rounds_open_list_and_accept_rust_responses() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let db = path.to_str().ok_or("utf-8 path")?;
    let written = store_peer(&["write", db])?;

    let store = SqliteManagedInputStore::open(&path).await?;
    // Every Python record loads in Rust and serializes to the same JSON.
    for (execution, key) in [
        ("py-exec-pending", "pending"),
        ("py-exec-resolved", "resolved"),
        ("py-exec-failed", "failed"),
    ] {
        let rounds = store.list_rounds(execution).await?;
        assert_eq!(rounds.len(), 1, "{execution}");
        assert_eq!(
            record_json(&rounds[0]),
            normalize_timestamps(written[key].clone()),
            "{execution} differs"
        );
    }
    let resolved_projection = store
        .redacted_responses(&RoundRef::new("py-exec-resolved", "py-round-1"))
        .await?;
    assert_eq!(
        resolved_projection.map(Value::Object),
        Some(written["resolved_redacted"].clone())
    );
    let failed = store
        .get_round(&RoundRef::new("py-exec-failed", "py-round-1"))
        .await?
        .ok_or("failed round")?;
    assert_eq!(failed.status, ManagedInputStatus::Failed);
    assert!(
        failed.responses.is_some(),
        "failed rounds keep their responses"
    );

    // Rust answers the Python round with the Python worker's lease, and replays it.
    let round = RoundRef::new("py-exec-pending", "py-round-1");
    let lease = LeaseRef::new("py-worker", "lease-python-token");
    let mut responses = address_response("1 Main Street");
    responses.insert("payment".into(), ElicitationResponse::accept_url());
    let submission = ResponseSubmission::new(responses.clone(), "rust-key-1");
    let accepted = store
        .submit_responses(&round, &lease, submission.clone())
        .await?;
    assert_eq!(accepted.status, ManagedInputStatus::ResponseValidated);
    let replay = store.submit_responses(&round, &lease, submission).await?;
    assert_eq!(accepted, replay);
    let conflict = store
        .submit_responses(
            &round,
            &lease,
            ResponseSubmission::new(address_response("other"), "rust-key-1"),
        )
        .await;
    assert!(conflict.is_err(), "a different payload must be refused");

    // Python reads the Rust answer with strict validation.
    let read = store_peer(&["read", db, "py-exec-pending"])?;
    let seen = &read["py-exec-pending"][0];
    assert_eq!(
        normalize_timestamps(seen["record"].clone()),
        record_json(&accepted)
    );
    assert_eq!(seen["record"]["status"], "response_validated");
    assert_eq!(seen["record"]["response_idempotency_key"], "rust-key-1");
    let projection = store.redacted_responses(&round).await?.map(Value::Object);
    assert_eq!(Some(seen["redacted"].clone()), projection);

    // Rust drives the lifecycle to the end; Python sees the resolved round.
    store.start_delivery(&round, &lease).await?;
    store.mark_delivered(&round, &lease).await?;
    let done = store.resolve(&round, &lease).await?;
    let read = store_peer(&["read", db, "py-exec-pending"])?;
    assert_eq!(
        normalize_timestamps(read["py-exec-pending"][0]["record"].clone()),
        record_json(&done)
    );
    assert_eq!(read["py-exec-pending"][0]["record"]["delivery_attempts"], 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_written_rounds_load_in_python_and_python_answers_them() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("nested/dir/m3.sqlite");
    let db = path.to_str().ok_or("utf-8 path")?;
    // A clock on a whole second (Python writes no microseconds then) and one with them.
    let start = SystemClock.now().replace_nanosecond(0)?;
    let clock = ManualClock::new(start);
    let store = SqliteManagedInputStore::open_with(
        &path,
        SqliteStoreOptions::new().clock(Arc::new(clock.clone())),
    )
    .await?;
    let lease_for = Duration::from_secs(3600);
    let mut executions = Vec::new();

    // pending with every optional field, a URL request and non-ASCII text.
    let mut rich = address_round("rs-pending", "round-1", start);
    rich.request_state = Some("état opaque ✓".into());
    rich.deadline = Some(start + time::Duration::minutes(10));
    let mut url = UrlElicitationRequest::new(
        "payment",
        "Authorize the payment.",
        "https://pay.example/authorize?session=abc",
    );
    url.elicitation_id = Some("elicit-1".into());
    rich.requests
        .insert("payment".into(), ElicitationRequest::Url(url));
    let mut parameters = serde_json::Map::new();
    parameters.insert("quantity".into(), json!(2));
    parameters.insert("weight".into(), json!(1.25));
    parameters.insert("tags".into(), json!(["fragile", "größe", {"x": null}]));
    store
        .create_round(
            CreateRound::new(rich, "rs-worker", lease_for)
                .with_lease_token("lease-rust-token")
                .with_harness_session_id("harness-1")
                .with_native_resume_token("resume-1")
                .with_delivery_idempotency_key("delivery-1")
                .with_session_id("session-1")
                .with_turn_id("turn-1")
                .with_operation_parameters(parameters),
        )
        .await?;
    executions.push("rs-pending");

    clock.advance_std(Duration::from_micros(123_457));
    // one round in every later status
    for (execution, steps) in [
        ("rs-validated", 1),
        ("rs-started", 2),
        ("rs-delivered", 3),
        ("rs-resolved", 4),
    ] {
        let record = store
            .create_round(
                CreateRound::new(
                    address_round(execution, "round-1", start),
                    "rs-worker",
                    lease_for,
                )
                .with_round_limit(2),
            )
            .await?;
        let round = RoundRef::of(&record);
        let lease = LeaseRef::of(&record.lease);
        let mut responses = address_response("1 Main Street");
        if let Some(response) = responses.get_mut("shipping_address") {
            response.meta = Some(serde_json::Map::from_iter([(
                "client".to_owned(),
                json!("rust"),
            )]));
        }
        store
            .submit_responses(
                &round,
                &lease,
                ResponseSubmission::new(responses, format!("key-{execution}"))
                    .with_actor(Actor::new("rust-user", ActorSurface::Cli)?),
            )
            .await?;
        if steps >= 2 {
            store.start_delivery(&round, &lease).await?;
        }
        if steps >= 3 {
            store.mark_delivered(&round, &lease).await?;
        }
        if steps >= 4 {
            store.resolve(&round, &lease).await?;
        }
        executions.push(execution);
    }
    // failed with responses, and a recovery failure after a takeover
    let record = store
        .create_round(CreateRound::new(
            address_round("rs-failed", "round-1", start),
            "rs-worker",
            lease_for,
        ))
        .await?;
    let (round, lease) = (RoundRef::of(&record), LeaseRef::of(&record.lease));
    store
        .submit_responses(
            &round,
            &lease,
            ResponseSubmission::new(
                BTreeMap::from([("shipping_address".to_owned(), ElicitationResponse::cancel())]),
                "k",
            ),
        )
        .await?;
    store
        .fail(
            &round,
            &lease,
            RoundFailure::new("cancelled", "operation cancelled"),
        )
        .await?;
    executions.push("rs-failed");
    let record = store
        .create_round(CreateRound::new(
            address_round("rs-recovery", "round-1", start),
            "rs-worker",
            Duration::from_secs(1),
        ))
        .await?;
    clock.advance_std(Duration::from_secs(2));
    let claimed = store
        .claim_round(
            &RoundRef::of(&record),
            ClaimRound::new("rs-worker-2", Duration::from_secs(1))
                .with_expected_lease_token(record.lease.lease_token.clone())
                .with_delivery_state(DeliveryState::NotStarted),
        )
        .await?;
    clock.advance_std(Duration::from_secs(2));
    store
        .fail_recovery(
            &RoundRef::of(&claimed),
            &claimed.lease.lease_token,
            "worker lost",
        )
        .await?;
    executions.push("rs-recovery");

    // Python loads every round with strict validation and sees the same JSON.
    let mut args = vec!["read", db];
    args.extend(executions.iter().copied());
    let read = store_peer(&args)?;
    for execution in &executions {
        let rust = store.list_rounds(execution).await?;
        let python = read[*execution].as_array().ok_or("python rounds")?;
        assert_eq!(rust.len(), python.len(), "{execution}");
        for (r, p) in rust.iter().zip(python) {
            assert_eq!(
                normalize_timestamps(p["record"].clone()),
                record_json(r),
                "{execution}: python sees another record"
            );
            let projection = store
                .redacted_responses(&RoundRef::of(r))
                .await?
                .map(Value::Object);
            assert_eq!(
                projection.unwrap_or(Value::Null),
                p["redacted"],
                "{execution}: projection"
            );
        }
    }

    // Who answered stays beside the rounds Python read (the original never sees it).
    for execution in ["rs-validated", "rs-started", "rs-delivered", "rs-resolved"] {
        let actor = store
            .answered_by(&RoundRef::new(execution, "round-1"))
            .await?
            .ok_or("the actor is gone")?;
        assert_eq!(actor.principal, "rust-user", "{execution}");
    }

    // Python answers the Rust pending round (real time: the lease lasts an hour from `start`).
    let answered = store_peer(&[
        "answer",
        db,
        "rs-pending",
        "round-1",
        "rs-worker",
        "lease-rust-token",
        "py-key",
    ]);
    // The round has a URL request too, which the peer does not answer: Python must refuse it
    // exactly like Rust does, leaving the round pending.
    assert!(
        answered.is_err(),
        "python accepted a response without the URL key"
    );
    let still = store
        .get_round(&RoundRef::new("rs-pending", "round-1"))
        .await?
        .ok_or("round")?;
    assert_eq!(still.status, ManagedInputStatus::Pending);

    let single = store
        .create_round(
            CreateRound::new(
                address_round("rs-answer", "round-1", start),
                "rs-worker",
                lease_for,
            )
            .with_lease_token("lease-answer"),
        )
        .await?;
    let answered = store_peer(&[
        "answer",
        db,
        "rs-answer",
        "round-1",
        "rs-worker",
        "lease-answer",
        "py-key",
    ])?;
    let round = RoundRef::of(&single);
    let seen = store.get_round(&round).await?.ok_or("answered round")?;
    assert_eq!(seen.status, ManagedInputStatus::ResponseValidated);
    assert_eq!(seen.response_idempotency_key.as_deref(), Some("py-key"));
    assert_eq!(seen.responses, Some(address_response("7 Python Lane")));
    assert_eq!(record_json(&seen), normalize_timestamps(answered));
    // Rust replays the Python submission: same record, nothing written.
    let replay = store
        .submit_responses(
            &round,
            &LeaseRef::new("rs-worker", "lease-answer"),
            ResponseSubmission::new(address_response("7 Python Lane"), "py-key"),
        )
        .await?;
    assert_eq!(replay, seen);
    assert!(store.redacted_responses(&round).await?.is_some());
    // Python's answer names nobody, and the replay keeps it so.
    assert_eq!(store.answered_by(&round).await?, None);
    Ok(())
}

/// Rounds the Python original writes on a file that has the change feed appear in the feed
/// (the database's triggers append them in Python's own transactions), with their states
/// and store times, never an answer; the original keeps working on such a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_writes_on_a_store_with_the_feed_appear_in_the_feed() -> TestResult {
    use m3_store::{ExecutionStore, SqliteExecutionStore};
    use m3_types::Cursor;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m3.sqlite");
    let db = path.to_str().ok_or("utf-8 path")?;
    let store = SqliteExecutionStore::open(&path).await?;
    // The managed-input tables and their triggers, before the original writes.
    store
        .managed_input_store()
        .await?
        .list_rounds("none")
        .await?;
    let written = store_peer(&["write", db])?;

    let records = store.read_changes(Cursor::START, 100).await?.records;
    let seen: Vec<(String, &str)> = records
        .iter()
        .map(|r| (r.execution_id.clone(), r.kind.as_str()))
        .collect();
    let expected = [
        ("py-exec-pending", "round.pending"),
        ("py-exec-resolved", "round.pending"),
        ("py-exec-resolved", "round.answered"),
        ("py-exec-resolved", "round.delivery_started"),
        ("py-exec-resolved", "round.delivered"),
        ("py-exec-resolved", "round.resolved"),
        ("py-exec-failed", "round.pending"),
        ("py-exec-failed", "round.answered"),
        ("py-exec-failed", "round.failed"),
    ];
    let expected: Vec<(String, &str)> = expected
        .iter()
        .map(|(execution, kind)| ((*execution).to_owned(), *kind))
        .collect();
    assert_eq!(seen, expected);
    let resolved = records
        .iter()
        .find(|r| r.execution_id == "py-exec-resolved" && r.kind.as_str() == "round.resolved")
        .ok_or("resolved record")?;
    let state = resolved.round.as_ref().ok_or("round state")?;
    assert_eq!(state.status, ManagedInputStatus::Resolved);
    assert_eq!(
        Some(state.server.as_str()),
        written["resolved"]["pending"]["server"].as_str()
    );
    let stored_at = m3_types::timestamp::parse(
        written["resolved"]["updated_at"]
            .as_str()
            .ok_or("updated_at")?,
    )?;
    assert_eq!(resolved.at, stored_at);
    let failed = records
        .last()
        .and_then(|r| r.round.as_ref())
        .ok_or("failed state")?;
    assert_eq!(failed.failure_code.as_deref(), Some("cancelled"));
    let text = serde_json::to_string(&records)?;
    assert!(
        !text.contains("1 Main Street"),
        "the feed carries an answer"
    );

    // The original still reads this file.
    let read = store_peer(&["read", db, "py-exec-pending"])?;
    assert_eq!(read["py-exec-pending"][0]["record"]["status"], "pending");
    Ok(())
}
