//! The bounds of `m3_types::limits` over real HTTP against a real SQLite store: an answer
//! nested past the bound is refused with its typed code and changes nothing, and the
//! largest answer a stored round allows fits the default body limit.

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use m3_types::limits::{MAX_ANSWER_BYTES, MAX_NESTING_DEPTH};
use m3_types::{ElicitationRequest, FormElicitationRequest};
use serde_json::{Value, json};
use support::{address_form, object, responses_path, serve};

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!({ "a": value });
    }
    value
}

fn round_path(round: &m3_types::PendingElicitationRound) -> String {
    format!(
        "/api/v1/executions/{}/rounds/{}",
        round.execution_id, round.round_id
    )
}

#[tokio::test]
async fn an_answer_nested_past_the_bound_is_refused_and_nothing_is_stored() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let path = responses_path(&round);
    let content = json!({"street": "1 Main Street", "city": "Pune"});
    // 120 levels of meta: readable JSON, but stored inside a row it would pass serde_json's
    // recursion limit of 128.
    let deep_meta = json!({
        "responses": {"shipping_address": {"action": "accept", "content": content, "meta": nested(120)}},
        "idempotency_key": "k-deep-meta"
    });
    let deep_content = json!({
        "responses": {"shipping_address": {"action": "accept",
            "content": {"street": "1 Main Street", "city": "Pune", "extra": nested(MAX_NESTING_DEPTH)}}},
        "idempotency_key": "k-deep-content"
    });
    for body in [deep_meta, deep_content] {
        let refused = served.post_json(&path, &body).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refused.body
        );
        let error = &refused.json()["error"];
        assert_eq!(error["code"], "managed_input_invalid", "{error}");
        assert_eq!(error["details"]["reason"], "limit_exceeded", "{error}");
        assert_eq!(error["details"]["limit"], "nesting_depth", "{error}");
        assert_eq!(error["details"]["max"], json!(MAX_NESTING_DEPTH), "{error}");
    }
    let still = served.get(&round_path(&round)).await;
    assert_eq!(still.status, StatusCode::OK, "{}", still.body);
    assert_eq!(still.json()["status"], "pending", "nothing changed");
    // The execution and every listing still read.
    let listed = served.get("/api/v1/executions").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.json().as_array().unwrap().len(), 1);
    // Meta exactly at the bound is accepted.
    let at_bound = json!({
        "responses": {"shipping_address": {"action": "accept", "content": content, "meta": nested(MAX_NESTING_DEPTH)}},
        "idempotency_key": "k-at-bound"
    });
    let accepted = served.post_json(&path, &at_bound).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
}

/// A form with one free-text field, so an answer can be as large as the bound allows.
fn note_form() -> ElicitationRequest {
    ElicitationRequest::Form(FormElicitationRequest::new(
        "note",
        "Paste the whole log.",
        object(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        })),
    ))
}

#[tokio::test]
async fn the_largest_answer_a_round_allows_fits_the_default_body_limit() {
    let served = serve(|b| b).await;
    let round = served.round(vec![note_form()]).await;
    let path = responses_path(&round);
    let answer = |text: String, key: &str| {
        json!({
            "responses": {"note": {"action": "accept", "content": {"text": text}}},
            "idempotency_key": key
        })
    };
    // One byte over the answer bound: refused by the store's rule, not by the body limit.
    let envelope = serde_json::to_vec(
        &json!({"note": {"action": "accept", "content": {"text": ""}, "meta": null}}),
    )
    .unwrap()
    .len();
    let over = served
        .post_json(
            &path,
            &answer("x".repeat(MAX_ANSWER_BYTES - envelope + 1), "k-over"),
        )
        .await;
    assert_eq!(
        over.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        over.body
    );
    assert_eq!(over.json()["error"]["details"]["limit"], "answer_bytes");
    // Exactly the bound, with every character escaped as `\u00XX` on the wire (six bytes
    // each): the body is far over the old 64 KiB limit and is accepted.
    let text = "x".repeat(MAX_ANSWER_BYTES - envelope);
    let verbose = answer(text, "k-largest")
        .to_string()
        .replace("xxxx", "\\u0078xxx");
    assert!(verbose.len() > 2 * MAX_ANSWER_BYTES);
    let accepted = served
        .send(
            hyper::Method::POST,
            &path,
            &[("content-type", "application/json")],
            verbose,
        )
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    assert_eq!(accepted.json()["status"], "response_validated");
}
