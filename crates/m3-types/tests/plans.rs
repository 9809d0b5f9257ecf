//! Elicitation plans: matching by what asks, uses, the closest entry on a miss, schema
//! digests that ignore key order, and plans stored before files existed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use m3_types::plan::{ElicitationPlan, PlanEntry, PlanQuestion, schema_digest};
use m3_types::{
    ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind, ResponseMap,
};
use serde_json::{Map, Value, json};

fn object(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn form(key: &str, message: &str, schema: Value) -> (String, ElicitationRequest) {
    let request = FormElicitationRequest::new(key, message, object(schema));
    (key.to_owned(), ElicitationRequest::Form(request))
}

fn question<'a>(
    name: &'a str,
    requests: &'a BTreeMap<String, ElicitationRequest>,
) -> PlanQuestion<'a> {
    PlanQuestion {
        server: "shipping",
        operation_kind: OperationKind::Tool,
        operation_name: name,
        requests,
    }
}

fn accept(value: Value) -> ElicitationResponse {
    ElicitationResponse::accept(object(value))
}

#[test]
fn each_request_gets_its_own_entry_in_any_order() {
    let plan = ElicitationPlan::builder()
        .entry(PlanEntry::new("b", accept(json!({"x": 2}))))
        .entry(PlanEntry::new("a", accept(json!({"x": 1}))).tool("first"))
        .build();
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    let requests = BTreeMap::from([form("a", "A?", schema.clone()), form("b", "B?", schema)]);
    let answers = plan
        .matcher()
        .answer(&question("first", &requests))
        .unwrap();
    assert_eq!(answers["a"].content.as_ref().unwrap()["x"], 1);
    assert_eq!(answers["b"].content.as_ref().unwrap()["x"], 2);
    // Scoped to the tool `first`: another tool's `a` has no entry.
    let error = plan
        .matcher()
        .answer(&question("second", &requests))
        .unwrap_err();
    assert_eq!(error.details()["reason"], "plan_no_match");
    assert_eq!(error.details()["differs_in"], json!(["operation_name"]));
}

#[test]
fn a_miss_uses_nothing_up_and_uses_zero_means_any_number() {
    let schema = json!({"type": "object"});
    let plan = ElicitationPlan::builder()
        .entry(PlanEntry::new("a", ElicitationResponse::decline()).uses(0))
        .entry(PlanEntry::new("b", ElicitationResponse::cancel()))
        .build();
    let mut matcher = plan.matcher();
    let both = BTreeMap::from([
        form("a", "A?", schema.clone()),
        form("c", "C?", schema.clone()),
    ]);
    assert!(matcher.answer(&question("t", &both)).is_err());
    let only_b = BTreeMap::from([form("b", "B?", schema.clone())]);
    assert!(matcher.answer(&question("t", &only_b)).is_ok());
    assert!(
        matcher.answer(&question("t", &only_b)).is_err(),
        "b is used up"
    );
    let only_a = BTreeMap::from([form("a", "A?", schema)]);
    for _ in 0..5 {
        let answers: ResponseMap = matcher.answer(&question("t", &only_a)).unwrap();
        assert_eq!(answers.len(), 1);
    }
}

#[test]
fn message_and_schema_digest_narrow_an_entry() {
    let schema =
        json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}});
    let reordered =
        json!({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "type": "object"});
    let digest = schema_digest(&object(schema.clone())).unwrap();
    assert_eq!(digest, schema_digest(&object(reordered)).unwrap());
    assert!(digest.starts_with("sha256:") && digest.len() == 7 + 64);
    let plan = ElicitationPlan::builder()
        .entry(
            PlanEntry::new("k", ElicitationResponse::decline())
                .message("Exactly this?")
                .schema_digest(digest),
        )
        .build();
    let same = BTreeMap::from([form("k", "Exactly this?", schema.clone())]);
    assert!(plan.matcher().answer(&question("t", &same)).is_ok());
    let other_message = BTreeMap::from([form("k", "Something else?", schema)]);
    let error = plan
        .matcher()
        .answer(&question("t", &other_message))
        .unwrap_err();
    assert_eq!(error.details()["differs_in"], json!(["message"]));
    let other_schema = BTreeMap::from([form("k", "Exactly this?", json!({"type": "object"}))]);
    let error = plan
        .matcher()
        .answer(&question("t", &other_schema))
        .unwrap_err();
    assert_eq!(error.details()["differs_in"], json!(["schema_digest"]));
}

#[test]
fn plans_round_trip_as_json_and_old_positional_plans_still_read() {
    let plan = ElicitationPlan::builder()
        .entry(PlanEntry::new("k", ElicitationResponse::decline()).server("s"))
        .build();
    let text = serde_json::to_string(&plan).unwrap();
    assert_eq!(
        text,
        r#"{"version":1,"entries":[{"request_key":"k","server":"s","response":{"action":"decline","content":null,"meta":null}}]}"#
    );
    assert_eq!(ElicitationPlan::from_json(&text).unwrap(), plan);
    // The form executions stored before plan files: one map per round, in order.
    let old = ElicitationPlan::from_json(r#"{"rounds": [{"k": {"action": "cancel"}}]}"#).unwrap();
    let requests = BTreeMap::from([form("anything", "?", json!({"type": "object"}))]);
    let mut matcher = old.matcher();
    assert!(
        matcher
            .answer(&question("t", &requests))
            .unwrap()
            .contains_key("k")
    );
    let error = matcher.answer(&question("t", &requests)).unwrap_err();
    assert_eq!(error.details()["reason"], "unexpected_elicitation");
    // Unknown fields in an entry are refused: a typo never widens a match.
    let typo =
        r#"{"entries": [{"request_key": "k", "sever": "s", "response": {"action": "decline"}}]}"#;
    assert_eq!(
        ElicitationPlan::from_json(typo).unwrap_err().code(),
        "invalid_argument"
    );
    assert!(m3_types::value_schema("elicitation-plan").is_some());
}
