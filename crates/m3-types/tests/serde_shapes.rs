//! JSON shapes equal the reference's (snake_case, every optional field `null`), and
//! deserialization enforces the invariants.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns"
)]

use std::collections::BTreeMap;

use m3_types::{
    DeliveryState, ElicitationAction, ElicitationRequest, ElicitationResponse, ErrorCode,
    ErrorInfo, ExecutionOutcome, ExecutionResult, ExecutionState, ExecutionStatus,
    FormElicitationRequest, HumanInput, ManagedInputLease, ManagedInputRecord, ManagedInputStatus,
    OperationKind, PendingElicitationRound, StdioServer, ToolSelection, UrlElicitationRequest,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use time::macros::datetime;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    value: &T,
    shape: Value,
) {
    let json = serde_json::to_value(value).unwrap();
    assert_eq!(json, shape);
    let back: T = serde_json::from_value(shape).unwrap();
    assert_eq!(&back, value);
}

fn pending_json() -> Value {
    json!({
        "round_id": "round-1",
        "execution_id": "exec-1",
        "logical_operation_id": "op-1",
        "server": "shipping",
        "operation_kind": "tool",
        "operation_name": "book_shipment",
        "request_state": null,
        "requests": {
            "consent": {
                "mode": "url", "request_key": "consent", "message": "Agree", "url": "https://example.com/c",
                "elicitation_id": null, "meta": null, "task": null, "server": null,
                "operation_kind": null, "operation_name": null
            },
            "shipping_address": {
                "mode": "form", "request_key": "shipping_address", "message": "Address?",
                "requested_schema": {"type": "object"},
                "meta": null, "task": null, "server": "shipping",
                "operation_kind": "tool", "operation_name": "book_shipment"
            }
        },
        "created_at": "2026-01-01T00:00:00.000000+00:00",
        "deadline": null
    })
}

fn pending() -> PendingElicitationRound {
    let requests = PendingElicitationRound::request_map([
        FormElicitationRequest::new(
            "shipping_address",
            "Address?",
            json!({"type": "object"}).as_object().unwrap().clone(),
        )
        .with_operation("shipping", OperationKind::Tool, "book_shipment")
        .into(),
        UrlElicitationRequest::new("consent", "Agree", "https://example.com/c").into(),
    ])
    .unwrap();
    PendingElicitationRound::new(
        "round-1",
        "exec-1",
        "op-1",
        "shipping",
        OperationKind::Tool,
        "book_shipment",
        requests,
        datetime!(2026-01-01 00:00:00 UTC),
    )
    .unwrap()
}

#[test]
fn responses_always_carry_action_content_and_meta() {
    round_trip(
        &ElicitationResponse::accept(json!({"city": "Pune"}).as_object().unwrap().clone()),
        json!({"action": "accept", "content": {"city": "Pune"}, "meta": null}),
    );
    round_trip(
        &ElicitationResponse::accept_url(),
        json!({"action": "accept", "content": null, "meta": null}),
    );
    round_trip(
        &ElicitationResponse::decline(),
        json!({"action": "decline", "content": null, "meta": null}),
    );
    round_trip(
        &ElicitationResponse::cancel().with_meta(json!({"k": 1}).as_object().unwrap().clone()),
        json!({"action": "cancel", "content": null, "meta": {"k": 1}}),
    );
    // Python payloads may omit optional keys.
    let r: ElicitationResponse = serde_json::from_value(json!({"action": "decline"})).unwrap();
    assert_eq!(r, ElicitationResponse::decline());
}

#[test]
fn responses_reject_content_on_decline_and_cancel_and_unknown_input() {
    for action in ["decline", "cancel"] {
        let err =
            serde_json::from_value::<ElicitationResponse>(json!({"action": action, "content": {}}))
                .unwrap_err();
        assert!(err.to_string().contains("cannot contain content"), "{err}");
        let err =
            ElicitationResponse::try_new(action.parse().unwrap(), Some(Default::default()), None)
                .unwrap_err();
        assert_eq!(err.code(), "managed_input_invalid");
    }
    assert!(serde_json::from_value::<ElicitationResponse>(json!({"action": "maybe"})).is_err());
    assert!(
        serde_json::from_value::<ElicitationResponse>(json!({"action": "accept", "extra": 1}))
            .is_err()
    );
    assert!(
        serde_json::from_value::<ElicitationResponse>(json!({"action": "accept", "content": [1]}))
            .is_err()
    );
    assert!(
        ElicitationResponse::try_new(ElicitationAction::Accept, Some(Default::default()), None)
            .is_ok()
    );
}

#[test]
fn pending_round_has_the_reference_shape() {
    round_trip(&pending(), pending_json());
    let with = pending()
        .with_request_state("")
        .with_deadline(datetime!(2026-01-01 00:00:30.5 UTC));
    let mut shape = pending_json();
    shape["request_state"] = json!("");
    shape["deadline"] = json!("2026-01-01T00:00:30.500000+00:00");
    round_trip(&with, shape);
}

#[test]
fn pending_round_reads_python_timestamps_and_missing_optionals() {
    let mut shape = pending_json();
    shape["created_at"] = json!("2026-01-01T00:00:00+00:00");
    shape.as_object_mut().unwrap().remove("deadline");
    shape.as_object_mut().unwrap().remove("request_state");
    let round: PendingElicitationRound = serde_json::from_value(shape).unwrap();
    assert_eq!(round, pending());
}

type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn pending_round_rejects_broken_invariants() {
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "empty round id",
            Box::new(|v| v["round_id"] = json!("")),
            "round_id",
        ),
        (
            "empty execution id",
            Box::new(|v| v["execution_id"] = json!("")),
            "execution_id",
        ),
        (
            "empty logical id",
            Box::new(|v| v["logical_operation_id"] = json!("")),
            "logical_operation_id",
        ),
        (
            "empty server",
            Box::new(|v| v["server"] = json!("")),
            "server",
        ),
        (
            "empty operation name",
            Box::new(|v| v["operation_name"] = json!("")),
            "operation_name",
        ),
        (
            "no requests",
            Box::new(|v| v["requests"] = json!({})),
            "requires requests",
        ),
        (
            "key mismatch",
            Box::new(|v| {
                let r = v["requests"]["consent"].clone();
                v["requests"]
                    .as_object_mut()
                    .unwrap()
                    .insert("other".into(), r);
            }),
            "request_key",
        ),
        (
            "request_state not text",
            Box::new(|v| v["request_state"] = json!({"a": 1})),
            "string",
        ),
        (
            "unknown field",
            Box::new(|v| v["lease_token"] = json!("x")),
            "lease_token",
        ),
        (
            "bad kind",
            Box::new(|v| v["operation_kind"] = json!("sampling")),
            "sampling",
        ),
        (
            "bad mode",
            Box::new(|v| v["requests"]["consent"]["mode"] = json!("voice")),
            "voice",
        ),
        (
            "naive timestamp",
            Box::new(|v| v["created_at"] = json!("2026-01-01T00:00:00")),
            "timezone-aware",
        ),
    ];
    for (case, edit, word) in cases {
        let mut v = pending_json();
        edit(&mut v);
        let err = serde_json::from_value::<PendingElicitationRound>(v).unwrap_err();
        assert!(err.to_string().contains(word), "{case}: {err}");
    }
    let err = PendingElicitationRound::new(
        "",
        "e",
        "o",
        "s",
        OperationKind::Tool,
        "n",
        BTreeMap::new(),
        datetime!(2026-01-01 0:00 UTC),
    )
    .unwrap_err();
    assert_eq!(err.code(), "managed_input_invalid");
    let mut requests = BTreeMap::new();
    requests.insert(
        "a".to_owned(),
        ElicitationRequest::from(UrlElicitationRequest::new("b", "m", "https://x")),
    );
    let err = PendingElicitationRound::new(
        "r",
        "e",
        "o",
        "s",
        OperationKind::Tool,
        "n",
        requests,
        datetime!(2026-01-01 0:00 UTC),
    )
    .unwrap_err();
    assert!(err.message().contains("must match their request_key"));
    let dup = PendingElicitationRound::request_map([
        UrlElicitationRequest::new("a", "m", "https://x").into(),
        UrlElicitationRequest::new("a", "m", "https://y").into(),
    ])
    .unwrap_err();
    assert!(dup.message().contains("duplicate"));
}

fn record_json() -> Value {
    json!({
        "pending": pending_json(),
        "round_index": 0,
        "round_limit": 10,
        "status": "pending",
        "lease": {"owner_id": "worker", "lease_token": "lease-abc", "expires_at": "2026-01-01T00:00:30.000000+00:00"},
        "responses": null,
        "response_idempotency_key": null,
        "harness_session_id": null,
        "native_resume_token": null,
        "delivery_idempotency_key": null,
        "session_id": null,
        "turn_id": null,
        "operation_parameters": {},
        "delivery_attempts": 0,
        "created_at": "2026-01-01T00:00:00.000000+00:00",
        "updated_at": "2026-01-01T00:00:00.000000+00:00",
        "response_validated_at": null,
        "delivery_started_at": null,
        "delivered_at": null,
        "resolved_at": null,
        "failed_at": null,
        "failure_code": null,
        "failure_message": null
    })
}

fn record() -> ManagedInputRecord {
    ManagedInputRecord::new_pending(
        pending(),
        0,
        10,
        ManagedInputLease::new("worker", "lease-abc", datetime!(2026-01-01 00:00:30 UTC)),
        datetime!(2026-01-01 00:00:00 UTC),
    )
    .unwrap()
}

#[test]
fn record_has_every_reference_field() {
    round_trip(&record(), record_json());
    assert_eq!(record().execution_id(), "exec-1");
    assert_eq!(record().round_id(), "round-1");
    assert_eq!(record().lease_token(), "lease-abc");
    assert_eq!(record().owner_id(), "worker");
    assert_eq!(record().request_state(), None);
}

#[test]
fn record_invariants_are_enforced() {
    let validated = {
        let mut v = record_json();
        v["status"] = json!("response_validated");
        v["responses"] = json!({"consent": {"action": "accept", "content": null, "meta": null},
                                 "shipping_address": {"action": "decline", "content": null, "meta": null}});
        v["response_idempotency_key"] = json!("key-1");
        v
    };
    let r: ManagedInputRecord = serde_json::from_value(validated.clone()).unwrap();
    assert_eq!(r.status, ManagedInputStatus::ResponseValidated);

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "index equals limit",
            {
                let mut v = record_json();
                v["round_index"] = json!(10);
                v
            },
            "below the round limit",
        ),
        (
            "index above limit",
            {
                let mut v = record_json();
                v["round_index"] = json!(11);
                v
            },
            "below the round limit",
        ),
        (
            "zero limit",
            {
                let mut v = record_json();
                v["round_limit"] = json!(0);
                v
            },
            "positive",
        ),
        (
            "negative index",
            {
                let mut v = record_json();
                v["round_index"] = json!(-1);
                v
            },
            "invalid value",
        ),
        (
            "pending with responses",
            {
                let mut v = validated.clone();
                v["status"] = json!("pending");
                v
            },
            "pending rounds",
        ),
        (
            "pending with attempts",
            {
                let mut v = record_json();
                v["delivery_attempts"] = json!(1);
                v
            },
            "delivery attempts",
        ),
        (
            "validated without key",
            {
                let mut v = validated.clone();
                v["response_idempotency_key"] = json!(null);
                v
            },
            "require validated responses",
        ),
        (
            "resolved without responses",
            {
                let mut v = record_json();
                v["status"] = json!("resolved");
                v
            },
            "require validated responses",
        ),
        (
            "failed without code",
            {
                let mut v = record_json();
                v["status"] = json!("failed");
                v
            },
            "failure code",
        ),
        (
            "empty owner",
            {
                let mut v = record_json();
                v["lease"]["owner_id"] = json!("");
                v
            },
            "owner_id",
        ),
        (
            "empty token",
            {
                let mut v = record_json();
                v["lease"]["lease_token"] = json!("");
                v
            },
            "lease_token",
        ),
        (
            "corrupt status",
            {
                let mut v = record_json();
                v["status"] = json!("corrupt");
                v
            },
            "corrupt",
        ),
        (
            "empty session id",
            {
                let mut v = record_json();
                v["session_id"] = json!("");
                v
            },
            "session_id",
        ),
    ];
    for (case, v, word) in cases {
        let err = serde_json::from_value::<ManagedInputRecord>(v).unwrap_err();
        assert!(err.to_string().contains(word), "{case}: {err}");
    }
    let mut failed = record_json();
    failed["status"] = json!("failed");
    failed["failure_code"] = json!("recovery_unavailable");
    failed["failed_at"] = json!("2026-01-01T00:01:00+00:00");
    let r: ManagedInputRecord = serde_json::from_value(failed.clone()).unwrap();
    assert!(r.status.is_terminal());
    assert!(r.is_recovery_failed());
    failed["failure_code"] = json!("timeout");
    let r: ManagedInputRecord = serde_json::from_value(failed).unwrap();
    assert!(!r.is_recovery_failed());
    assert!(
        !serde_json::from_value::<ManagedInputRecord>(record_json())
            .unwrap()
            .is_recovery_failed()
    );
}

#[test]
fn wire_enums_round_trip_every_variant() {
    fn check<T>(all: &[T])
    where
        T: Serialize
            + DeserializeOwned
            + std::str::FromStr
            + PartialEq
            + std::fmt::Debug
            + std::fmt::Display
            + Copy,
        <T as std::str::FromStr>::Err: std::fmt::Debug,
    {
        for v in all {
            let text = v.to_string();
            assert_eq!(serde_json::to_value(v).unwrap(), json!(text));
            assert_eq!(serde_json::from_value::<T>(json!(text)).unwrap(), *v);
            assert_eq!(text.parse::<T>().unwrap(), *v);
        }
        assert!("Nope".parse::<T>().is_err());
    }
    check(&ElicitationAction::ALL);
    check(&OperationKind::ALL);
    check(&ManagedInputStatus::ALL);
    check(&DeliveryState::ALL);
    check(&HumanInput::ALL);
    check(&ExecutionStatus::ALL);
    check(&ExecutionOutcome::ALL);
    check(&m3_types::ActorSurface::ALL);
    check(&m3_types::ServerEra::ALL);
    check(&ErrorCode::ALL);
    check(&m3_types::ElicitationMode::ALL);
    check(&m3_types::ActivityHealth::ALL);
    let texts: Vec<String> = ManagedInputStatus::ALL
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    assert_eq!(
        texts,
        [
            "pending",
            "response_validated",
            "delivery_started",
            "delivered",
            "resolved",
            "failed"
        ]
    );
    assert_eq!(
        ExecutionStatus::WaitingForInput.as_str(),
        "waiting_for_input"
    );
    assert_eq!(ExecutionOutcome::TimedOut.as_str(), "timed_out");
    assert_eq!(DeliveryState::NotDelivered.as_str(), "not_delivered");
    let err = "x".parse::<ManagedInputStatus>().unwrap_err();
    assert!(err.message().contains("'x'"));
}

#[test]
fn execution_values_have_reference_shapes() {
    let mut state = ExecutionState::new("exec-1", datetime!(2026-01-01 00:00:00 UTC));
    state.transition(ExecutionStatus::Queued).unwrap();
    state.transition(ExecutionStatus::Starting).unwrap();
    state
        .finish(ExecutionOutcome::Failed, datetime!(2026-01-01 00:00:01 UTC))
        .unwrap();
    state.validate().unwrap();
    let state_json = json!({
        "execution_id": "exec-1", "project_id": null, "run_id": null, "suite_id": null,
        "suite_name": null, "lifecycle": "finished", "outcome": "failed", "sequence": 0,
        "tool_call_count": 0, "created_at": "2026-01-01T00:00:00.000000+00:00",
        "finished_at": "2026-01-01T00:00:01.000000+00:00", "provenance": null, "agent": null
    });
    round_trip(&state, state_json.clone());
    let info = ErrorInfo::new(
        ErrorCode::ManagedInputRecoveryUnavailable,
        "managed input recovery is unavailable",
    );
    let result = ExecutionResult::new(state.clone())
        .unwrap()
        .with_error(info);
    round_trip(
        &result,
        json!({
            "snapshot": state_json, "turns": [], "trace": null, "direct_result": null,
            "evaluations": [], "artifacts": [], "activity_health": "no_calls",
            "error": {"code": "managed_input_recovery_unavailable",
                      "message": "managed input recovery is unavailable", "retryable": false, "details": {}},
            "provenance": null
        }),
    );
    assert!(
        ExecutionResult::new(ExecutionState::new("e", datetime!(2026-01-01 0:00 UTC))).is_err()
    );
    let mut broken = state;
    broken.outcome = None;
    assert!(broken.validate().is_err());
}

#[test]
fn servers_and_selections_have_json_shapes() {
    let server = StdioServer::new("shipping", "m3-fixtures")
        .with_args(["serve"])
        .with_env("K", "v")
        .with_cwd("/tmp");
    round_trip(
        &server,
        json!({"name": "shipping", "command": "m3-fixtures", "args": ["serve"],
               "environment": {"K": "v"}, "cwd": "/tmp"}),
    );
    let alias: StdioServer =
        serde_json::from_value(json!({"name": "s", "command": "c", "env": {"A": "b"}})).unwrap();
    assert_eq!(alias.env["A"], "b");
    assert!(alias.validate().is_ok());
    assert!(StdioServer::new("a:b", "c").validate().is_err());
    assert!(StdioServer::new("a", "").validate().is_err());
    let selection = ToolSelection::parse(&["shipping:book_shipment", "a:b"]).unwrap();
    round_trip(&selection, json!(["a:b", "shipping:book_shipment"]));
    assert!(serde_json::from_value::<ToolSelection>(json!(["a:b", "a:b"])).is_err());
}

#[test]
fn every_public_value_type_has_a_schema() {
    let schemas = m3_types::value_schemas();
    assert_eq!(schemas.len(), 27);
    let names: Vec<&str> = schemas.iter().map(|(n, _)| *n).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(m3_types::value_schema("change-record").is_some());
    let round = m3_types::value_schema("PendingElicitationRound").unwrap();
    let props = round.as_value()["properties"].as_object().unwrap();
    for field in [
        "round_id",
        "requests",
        "created_at",
        "deadline",
        "request_state",
    ] {
        assert!(props.contains_key(field), "{field}");
    }
    let record = m3_types::value_schema("ManagedInputRecord").unwrap();
    assert!(
        record.as_value()["properties"]
            .as_object()
            .unwrap()
            .contains_key("lease")
    );
    assert!(m3_types::value_schema("Nope").is_none());
    // A plan file validates against the plan schema.
    let plan = m3_types::value_schema("ElicitationPlan").unwrap();
    let plan_validator = jsonschema::validator_for(plan.as_value()).unwrap();
    assert!(
        plan_validator.is_valid(&serde_json::json!({"version": 1, "entries": [
        {"request_key": "k", "server": "s", "operation_kind": "tool",
         "response": {"action": "accept", "content": {"x": 1}}, "uses": 2}]}))
    );
    assert!(!plan_validator.is_valid(&serde_json::json!({"entries": [{"server": "s"}]})));
    // The schemas validate real values.
    let validator = jsonschema::validator_for(round.as_value()).unwrap();
    assert!(validator.is_valid(&pending_json()));
}

/// Output of sf-m3 0.3.1 (`ManagedInputRecord.model_dump(mode="json")`, pydantic writes `Z`).
const PYTHON_RECORD: &str = r#"{"created_at": "2026-01-01T00:00:00Z", "delivered_at": null, "delivery_attempts": 0, "delivery_idempotency_key": null, "delivery_started_at": null, "failed_at": null, "failure_code": null, "failure_message": null, "harness_session_id": null, "lease": {"expires_at": "2026-01-01T00:00:00Z", "lease_token": "t", "owner_id": "w"}, "native_resume_token": null, "operation_parameters": {}, "pending": {"created_at": "2026-01-01T00:00:00Z", "deadline": "2026-01-01T00:00:30.000500+05:30", "execution_id": "e1", "logical_operation_id": "o", "operation_kind": "tool", "operation_name": "n", "request_state": null, "requests": {"a": {"message": "m", "meta": null, "mode": "form", "operation_kind": null, "operation_name": null, "request_key": "a", "requested_schema": {"type": "object"}, "server": null, "task": null}, "b": {"elicitation_id": null, "message": "m", "meta": null, "mode": "url", "operation_kind": null, "operation_name": null, "request_key": "b", "server": null, "task": null, "url": "https://x"}}, "round_id": "r1", "server": "s"}, "resolved_at": null, "response_idempotency_key": "k", "response_validated_at": null, "responses": {"a": {"action": "accept", "content": {"x": 1}, "meta": null}, "b": {"action": "decline", "content": null, "meta": null}}, "round_index": 0, "round_limit": 10, "session_id": null, "status": "response_validated", "turn_id": null, "updated_at": "2026-01-01T00:00:00Z"}"#;

fn same_keys(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            // The same set of keys: struct fields serialize in declaration order, Python's
            // dump sorts them.
            let ka: std::collections::BTreeSet<&String> = a.keys().collect();
            let kb: std::collections::BTreeSet<&String> = b.keys().collect();
            assert_eq!(ka, kb, "keys at {path}");
            for (k, v) in a {
                same_keys(v, &b[k], &format!("{path}.{k}"));
            }
        }
        (a, b) => assert_eq!(a.is_null(), b.is_null(), "nullness at {path}"),
    }
}

#[test]
fn records_written_by_python_m3_read_and_write_back_with_the_same_shape() {
    let python: Value = serde_json::from_str(PYTHON_RECORD).unwrap();
    let record: ManagedInputRecord = serde_json::from_value(python.clone()).unwrap();
    assert_eq!(record.status, ManagedInputStatus::ResponseValidated);
    assert_eq!(
        record.pending.deadline,
        Some(datetime!(2026-01-01 00:00:30.0005 +05:30))
    );
    let ours = serde_json::to_value(&record).unwrap();
    same_keys(&python, &ours, "$");
    assert_eq!(
        ours["pending"]["deadline"],
        json!("2025-12-31T18:30:30.000500+00:00")
    );
    assert_eq!(
        ours["created_at"],
        json!("2026-01-01T00:00:00.000000+00:00")
    );
    assert_eq!(ours["responses"], python["responses"]);
    assert_eq!(ours["pending"]["requests"], python["pending"]["requests"]);
}
