//! The response validation table and its never-panic property.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns"
)]

use std::collections::BTreeMap;

use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, FormElicitationRequest,
    OperationKind, PendingElicitationRound, ResponseMap, UrlElicitationRequest, validate_responses,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use time::macros::datetime;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn round(requests: Vec<ElicitationRequest>) -> PendingElicitationRound {
    let map = PendingElicitationRound::request_map(requests).unwrap();
    PendingElicitationRound::new(
        "round-1",
        "exec-1",
        "op-1",
        "shipping",
        OperationKind::Tool,
        "book_shipment",
        map,
        datetime!(2026-01-01 00:00:00 UTC),
    )
    .unwrap()
}

fn form(key: &str, schema: Value) -> ElicitationRequest {
    FormElicitationRequest::new(key, "question", obj(schema)).into()
}

fn url(key: &str) -> ElicitationRequest {
    UrlElicitationRequest::new(key, "visit", "https://example.com/consent").into()
}

fn address_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string"}
        },
        "required": ["street", "city"]
    })
}

fn rich_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "day": {"type": "string", "format": "date"},
            "site": {"type": "string", "format": "uri"},
            "age": {"type": "integer", "minimum": 0},
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "geo": {
                        "type": "object",
                        "properties": {"lat": {"type": "number"}},
                        "required": ["lat"]
                    }
                },
                "required": ["street"],
                "additionalProperties": false
            },
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "choice": {"type": "string", "enum": ["a", "b"]}
        }
    })
}

fn accept(v: Value) -> ElicitationResponse {
    ElicitationResponse::accept(obj(v))
}

fn responses(items: Vec<(&str, ElicitationResponse)>) -> ResponseMap {
    items.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// `None` = valid; `Some(word)` = rejected with `managed_input_invalid` whose message has `word`.
fn check(
    case: &str,
    pending: &PendingElicitationRound,
    given: ResponseMap,
    expected: Option<&str>,
) {
    let result = validate_responses(pending, &given);
    match (result, expected) {
        (Ok(()), None) => {}
        (Err(e), Some(word)) => {
            assert_eq!(e.code(), "managed_input_invalid", "{case}: {e}");
            assert!(e.message().contains(word), "{case}: '{e}' lacks '{word}'");
        }
        (Ok(()), Some(word)) => panic!("{case}: accepted, expected error with '{word}'"),
        (Err(e), None) => panic!("{case}: rejected: {e} {:?}", e.details()),
    }
}

#[test]
fn validation_table() {
    let addr = round(vec![form("address", address_schema())]);
    let two = round(vec![form("address", address_schema()), url("consent")]);
    let rich = round(vec![form("profile", rich_schema())]);
    let consent = round(vec![url("consent")]);
    let good_addr = || accept(json!({"street": "1 Main Street", "city": "Pune"}));

    let cases: Vec<(&str, &PendingElicitationRound, ResponseMap, Option<&str>)> = vec![
        (
            "exact keys, valid form",
            &addr,
            responses(vec![("address", good_addr())]),
            None,
        ),
        (
            "exact keys, two requests",
            &two,
            responses(vec![
                ("address", good_addr()),
                ("consent", ElicitationResponse::accept_url()),
            ]),
            None,
        ),
        ("empty map", &addr, ResponseMap::new(), Some("exactly")),
        (
            "missing one of two keys",
            &two,
            responses(vec![("address", good_addr())]),
            Some("exactly"),
        ),
        (
            "extra key",
            &addr,
            responses(vec![
                ("address", good_addr()),
                ("other", ElicitationResponse::decline()),
            ]),
            Some("unexpected"),
        ),
        (
            "wrong key only",
            &addr,
            responses(vec![("adress", good_addr())]),
            Some("unexpected"),
        ),
        (
            "form accept without content",
            &addr,
            responses(vec![("address", ElicitationResponse::accept_url())]),
            Some("requires content"),
        ),
        (
            "missing required property",
            &addr,
            responses(vec![("address", accept(json!({"street": "x"})))]),
            Some("schema"),
        ),
        (
            "wrong content type",
            &addr,
            responses(vec![(
                "address",
                accept(json!({"street": 5, "city": "Pune"})),
            )]),
            Some("schema"),
        ),
        (
            "content null property",
            &addr,
            responses(vec![(
                "address",
                accept(json!({"street": null, "city": "Pune"})),
            )]),
            Some("schema"),
        ),
        (
            "decline form",
            &addr,
            responses(vec![("address", ElicitationResponse::decline())]),
            None,
        ),
        (
            "cancel form",
            &addr,
            responses(vec![("address", ElicitationResponse::cancel())]),
            None,
        ),
        (
            "decline with meta",
            &addr,
            responses(vec![(
                "address",
                ElicitationResponse::decline().with_meta(obj(json!({"why": "later"}))),
            )]),
            None,
        ),
        (
            "decline with content (built unchecked)",
            &addr,
            responses(vec![(
                "address",
                ElicitationResponse {
                    action: ElicitationAction::Decline,
                    content: Some(Map::new()),
                    meta: None,
                },
            )]),
            Some("cannot contain content"),
        ),
        (
            "cancel with content (built unchecked)",
            &consent,
            responses(vec![(
                "consent",
                ElicitationResponse {
                    action: ElicitationAction::Cancel,
                    content: Some(obj(json!({"a": 1}))),
                    meta: None,
                },
            )]),
            Some("cannot contain content"),
        ),
        (
            "URL accept",
            &consent,
            responses(vec![("consent", ElicitationResponse::accept_url())]),
            None,
        ),
        (
            "URL decline",
            &consent,
            responses(vec![("consent", ElicitationResponse::decline())]),
            None,
        ),
        (
            "URL with content",
            &consent,
            responses(vec![("consent", accept(json!({"ok": true})))]),
            Some("URL"),
        ),
        (
            "URL with empty content",
            &consent,
            responses(vec![("consent", accept(json!({})))]),
            Some("URL"),
        ),
        (
            "nested content valid",
            &rich,
            responses(vec![(
                "profile",
                accept(json!({
                    "email": "a@example.com", "day": "2026-11-29", "site": "https://example.com/x",
                    "age": 3, "address": {"street": "s", "geo": {"lat": 1.5}},
                    "tags": ["x", "y"], "choice": "a"
                })),
            )]),
            None,
        ),
        (
            "nested object missing required",
            &rich,
            responses(vec![(
                "profile",
                accept(json!({"address": {"geo": {"lat": 1}}})),
            )]),
            Some("schema"),
        ),
        (
            "nested object wrong deep type",
            &rich,
            responses(vec![(
                "profile",
                accept(json!({"address": {"street": "s", "geo": {"lat": "north"}}})),
            )]),
            Some("schema"),
        ),
        (
            "nested additional property",
            &rich,
            responses(vec![(
                "profile",
                accept(json!({"address": {"street": "s", "extra": 1}})),
            )]),
            Some("schema"),
        ),
        (
            "array item wrong type",
            &rich,
            responses(vec![("profile", accept(json!({"tags": ["x", 2]})))]),
            Some("schema"),
        ),
        (
            "array too long",
            &rich,
            responses(vec![(
                "profile",
                accept(json!({"tags": ["a", "b", "c", "d"]})),
            )]),
            Some("schema"),
        ),
        (
            "email format violation",
            &rich,
            responses(vec![("profile", accept(json!({"email": "nope"})))]),
            Some("schema"),
        ),
        (
            "date format violation",
            &rich,
            responses(vec![("profile", accept(json!({"day": "2026-13-45"})))]),
            Some("schema"),
        ),
        (
            "uri format violation",
            &rich,
            responses(vec![("profile", accept(json!({"site": "not a uri"})))]),
            Some("schema"),
        ),
        (
            "integer given as float",
            &rich,
            responses(vec![("profile", accept(json!({"age": 1.5})))]),
            Some("schema"),
        ),
        (
            "minimum violated",
            &rich,
            responses(vec![("profile", accept(json!({"age": -1})))]),
            Some("schema"),
        ),
        (
            "enum violated",
            &rich,
            responses(vec![("profile", accept(json!({"choice": "c"})))]),
            Some("schema"),
        ),
    ];
    assert!(cases.len() >= 25);
    for (case, pending, given, expected) in cases {
        check(case, pending, given, expected);
    }
}

#[test]
fn schema_problems_are_validation_errors() {
    let content = || responses(vec![("q", accept(json!({"a": 1})))]);
    let bad_schemas = [
        (
            "property schema is not an object",
            json!({"type": "object", "properties": {"a": 5}}),
        ),
        ("unknown type name", json!({"type": "objekt"})),
        (
            "remote $ref",
            json!({"$ref": "https://example.com/schema.json"}),
        ),
        (
            "remote $ref nested",
            json!({"properties": {"a": {"$ref": "http://127.0.0.1:1/s.json"}}}),
        ),
        ("file $ref", json!({"$ref": "file:///etc/passwd"})),
        ("dangling local $ref", json!({"$ref": "#/$defs/missing"})),
        (
            "invalid pattern",
            json!({"properties": {"a": {"type": "string", "pattern": "("}}}),
        ),
        ("type is a number", json!({"type": 5})),
        (
            "remote $ref inside $defs",
            json!({"$defs": {"x": {"$ref": "https://example.com/x.json"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}),
        ),
    ];
    for (case, schema) in bad_schemas {
        let pending = round(vec![form("q", schema)]);
        check(case, &pending, content(), Some("schema"));
    }
}

#[test]
fn a_schema_that_is_not_an_object_cannot_be_a_form_request() {
    let text = r#"{"mode":"form","request_key":"q","message":"m","requested_schema":"string"}"#;
    assert!(serde_json::from_str::<ElicitationRequest>(text).is_err());
    let text = r#"{"mode":"form","request_key":"q","message":"m","requested_schema":[1]}"#;
    assert!(serde_json::from_str::<ElicitationRequest>(text).is_err());
}

#[test]
fn deeply_nested_schema_and_content_are_refused_not_crashed() {
    let mut schema = json!({"type": "object"});
    for _ in 0..1_000 {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    let pending = round(vec![form("q", schema)]);
    check(
        "deep schema",
        &pending,
        responses(vec![("q", accept(json!({})))]),
        Some("schema"),
    );

    let mut content = json!(1);
    for _ in 0..1_000 {
        content = json!({"a": content});
    }
    let pending = round(vec![form("q", json!({"type": "object"}))]);
    check(
        "deep content",
        &pending,
        responses(vec![("q", accept(content))]),
        // Refused by the nesting bound of `m3_types::limits`, which names itself.
        Some("nested deeper than the bound"),
    );
}

#[test]
fn older_drafts_named_by_schema_are_honoured() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "exclusiveMaximum": 5}}
    });
    let pending = round(vec![form("q", schema)]);
    check(
        "draft-07 ok",
        &pending,
        responses(vec![("q", accept(json!({"n": 4})))]),
        None,
    );
    check(
        "draft-07 bad",
        &pending,
        responses(vec![("q", accept(json!({"n": 5})))]),
        Some("schema"),
    );
}

#[test]
fn catastrophic_pattern_is_bounded() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+(?=b)$"}}});
    let pending = round(vec![form("q", schema)]);
    let evil = format!("{}!", "a".repeat(40));
    // Must return (bounded backtracking), and must not accept the content.
    check(
        "catastrophic",
        &pending,
        responses(vec![("q", accept(json!({"a": evil})))]),
        Some("schema"),
    );
}

#[test]
fn recursive_local_refs_validate() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
        "$ref": "#/$defs/node"
    });
    let pending = round(vec![form("q", schema)]);
    check(
        "recursive ok",
        &pending,
        responses(vec![("q", accept(json!({"v": 1, "next": {"v": 2}})))]),
        None,
    );
    check(
        "recursive bad",
        &pending,
        responses(vec![("q", accept(json!({"v": 1, "next": {"v": "x"}})))]),
        Some("schema"),
    );
}

#[test]
fn schema_errors_list_the_failing_paths() {
    let pending = round(vec![form("address", address_schema())]);
    let err = validate_responses(
        &pending,
        &responses(vec![("address", accept(json!({"street": 1, "city": "x"})))]),
    )
    .unwrap_err();
    assert_eq!(err.details()["request_key"], json!("address"));
    let errors = err.details()["errors"].as_array().unwrap();
    assert_eq!(errors[0]["path"], json!("/street"));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z$#/:.]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("object"),
            Just("string"),
            Just("integer"),
            Just("array"),
            Just("#"),
            Just("#/$defs/a"),
            Just("email"),
            Just("date"),
            Just("uri"),
            Just("^a+$"),
            Just("(")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("type".to_owned()),
                    Just("properties".to_owned()),
                    Just("items".to_owned()),
                    Just("required".to_owned()),
                    Just("$ref".to_owned()),
                    Just("$defs".to_owned()),
                    Just("format".to_owned()),
                    Just("pattern".to_owned()),
                    Just("enum".to_owned()),
                    Just("allOf".to_owned()),
                    Just("not".to_owned()),
                    Just("$schema".to_owned()),
                    Just("a".to_owned()),
                    "[a-z]{1,4}".prop_map(|s| s),
                ],
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_object() -> impl Strategy<Value = Map<String, Value>> {
    arb_json().prop_map(|v| match v {
        Value::Object(m) => m,
        other => {
            let mut m = Map::new();
            m.insert("type".into(), other);
            m
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn validate_responses_never_panics(
        schema in arb_object(),
        content in arb_object(),
        action in prop_oneof![Just(ElicitationAction::Accept), Just(ElicitationAction::Decline), Just(ElicitationAction::Cancel)],
        with_content in any::<bool>(),
        key in prop_oneof![Just("q"), Just("other")],
        is_url in any::<bool>(),
    ) {
        let request = if is_url { url("q") } else { form("q", Value::Object(schema)) };
        let pending = round(vec![request]);
        let response = ElicitationResponse {
            action,
            content: with_content.then_some(content),
            meta: None,
        };
        let mut given = BTreeMap::new();
        given.insert(key.to_owned(), response);
        if let Err(e) = validate_responses(&pending, &given) {
            prop_assert_eq!(e.code(), "managed_input_invalid");
        }
    }
}

/// A refused value is never echoed by the error (secret-named or not): the messages are
/// written from the schema's keywords and limits.
#[test]
fn schema_errors_never_echo_a_secret_named_value() {
    let schema = json!({
        "type": "object",
        "properties": {
            "user": {"type": "string", "maxLength": 3},
            "password": {"type": "string", "maxLength": 4},
            "login": {"type": "object", "properties": {"apiKey": {"type": "integer"}}},
        },
        "not": {"required": ["forbidden"]},
    });
    let pending = round(vec![form("login", schema)]);
    let answer = accept(json!({
        "user": "adalovelace",
        "password": "hunter2-secret",
        "login": {"apiKey": "sk-live-123"},
        "forbidden": 1,
    }));
    let error = validate_responses(&pending, &responses(vec![("login", answer)])).unwrap_err();
    let shown = format!("{error} {}", Value::Object(error.details().clone()));
    assert!(!shown.contains("hunter2-secret"), "{shown}");
    assert!(!shown.contains("sk-live-123"), "{shown}");
    assert!(!shown.contains("adalovelace"), "{shown}");
    let errors = error.details()["errors"].as_array().unwrap();
    let user = errors.iter().find(|e| e["path"] == "/user").unwrap();
    assert_eq!(user["keyword"], "maxLength", "{shown}");
    assert_eq!(user["message"], "must have at most 3 characters", "{shown}");
    assert!(
        shown.contains("/password"),
        "the path still says where: {shown}"
    );
}
