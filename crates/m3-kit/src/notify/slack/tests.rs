//! The Slack body within Slack's documented limits, whatever the question.

use std::collections::BTreeMap;

use m3_types::{
    ChangeRecord, Cursor, ElicitationRequest, FormElicitationRequest, ManagedInputStatus,
    OperationKind, RoundChangeState,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::*;
use crate::notify::payload::Question;

fn record() -> ChangeRecord {
    let state = RoundChangeState::new(
        0,
        ManagedInputStatus::Pending,
        "shipping",
        Some(OperationKind::Tool),
        "book_shipment",
        None,
    );
    ChangeRecord::of_round(
        Cursor::new(7),
        "exec-1",
        "round-1",
        OffsetDateTime::UNIX_EPOCH,
        state,
    )
}

fn question(requests: usize, message: &str, fields: usize, field_text: &str) -> Question {
    let mut properties = Map::new();
    for n in 0..fields {
        properties.insert(
            format!("field_{n}"),
            json!({"type": "string", "title": field_text, "description": field_text}),
        );
    }
    let schema = json!({"type": "object", "properties": properties});
    let schema = schema.as_object().cloned().unwrap_or_default();
    let mut map = BTreeMap::new();
    for n in 0..requests {
        let key = format!("request_{n}");
        let request = FormElicitationRequest::new(key.clone(), message, schema.clone());
        map.insert(key, ElicitationRequest::Form(request));
    }
    Question {
        server: "shipping".into(),
        operation_kind: OperationKind::Tool,
        operation_name: "book_shipment".into(),
        requests: map,
        deadline: None,
    }
}

fn text_chars(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().count(),
        Value::Array(items) => items.iter().map(text_chars).sum(),
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| key.as_str() != "type" && key.as_str() != "style")
            .map(|(_, value)| text_chars(value))
            .sum(),
        _ => 0,
    }
}

/// Every documented limit, checked on a body.
fn assert_within_limits(body: &Value) {
    assert!(body["text"].as_str().unwrap().chars().count() <= MAX_TEXT);
    let blocks = body["blocks"].as_array().unwrap();
    assert!(blocks.len() <= MAX_BLOCKS, "{} blocks", blocks.len());
    let mut total = 0;
    for block in blocks {
        match block["type"].as_str().unwrap() {
            "section" => {
                if let Some(text) = block["text"]["text"].as_str() {
                    assert!(text.chars().count() <= MAX_SECTION_TEXT);
                }
                if let Some(fields) = block["fields"].as_array() {
                    assert!(fields.len() <= MAX_FIELDS);
                    for field in fields {
                        assert!(field["text"].as_str().unwrap().chars().count() <= MAX_FIELD_TEXT);
                    }
                }
                total += text_chars(block);
            }
            "actions" => {
                let button = &block["elements"][0];
                assert!(
                    button["text"]["text"].as_str().unwrap().chars().count() <= MAX_BUTTON_TEXT
                );
                assert!(button["url"].as_str().unwrap().chars().count() <= MAX_BUTTON_URL);
            }
            other => panic!("unexpected block {other}"),
        }
    }
    assert!(total <= MAX_BLOCKS_CHARS, "{total} characters of blocks");
}

#[test]
fn an_ordinary_question_has_its_message_fields_and_button() {
    let q = question(1, "Where should we ship?", 2, "Street");
    let body = slack_body(&record(), Some(&q), Some("https://m3.example.com/answer/t"));
    assert_within_limits(&body);
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 4, "{body}");
    assert!(body["text"].as_str().unwrap().contains("shipping"));
    assert!(
        blocks[1]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("Where should we ship?")
    );
    assert_eq!(blocks[2]["fields"].as_array().unwrap().len(), 2);
    assert_eq!(
        blocks[3]["elements"][0]["url"],
        "https://m3.example.com/answer/t"
    );
}

#[test]
fn long_many_and_non_ascii_questions_stay_within_every_limit() {
    let long = "Überprüfen Sie bitte die Lieferadresse 🚚 — 配送先を確認してください. ".repeat(400);
    for (requests, fields) in [(1, 40), (30, 12), (100, 1), (3, 0)] {
        let q = question(requests, &long, fields, &long);
        let body = slack_body(&record(), Some(&q), Some("https://m3.example.com/answer/t"));
        assert_within_limits(&body);
        let last = body["blocks"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["type"], "actions", "the answer button is always kept");
    }
}

#[test]
fn hostile_text_cannot_mention_people_or_forge_links() {
    let hostile = "<!channel> <@U123> <https://evil.example|click> & more";
    let q = question(1, hostile, 1, hostile);
    let body = slack_body(&record(), Some(&q), None);
    assert_within_limits(&body);
    let text = body.to_string();
    assert!(
        !text.contains("<!channel>")
            && !text.contains("<@U123>")
            && !text.contains("<https://evil")
    );
    assert!(text.contains("&lt;!channel&gt;"));
}

#[test]
fn an_answer_link_too_long_for_a_button_is_left_out() {
    let url = format!(
        "https://m3.example.com/answer/{}",
        "t".repeat(MAX_BUTTON_URL)
    );
    let body = slack_body(&record(), None, Some(&url));
    assert_within_limits(&body);
    assert!(
        body["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["type"] != "actions")
    );
}
