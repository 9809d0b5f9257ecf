//! Secrets a server marks in its requested schema: a property whose schema says
//! `"format": "password"` or `"writeOnly": true` holds a secret whatever its name.
//!
//! The walk follows `properties` (objects) and `items` (arrays, one schema or a tuple of
//! schemas) only: that covers every schema MCP's elicitation allows (a flat object of
//! primitive properties) and plain nesting. A marker reached only through `$ref`, `allOf`,
//! `anyOf`, `oneOf` or conditionals is not seen; such a field is still redacted when its name
//! is secret.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::value::{MAX_DEPTH, REDACTED, leaves, redact, retain_echoable};
use crate::elicitation::{ElicitationRequest, ResponseMap};

/// Whether the (sub)schema `schema` marks its instance secret: `"format": "password"` or
/// `"writeOnly": true`.
pub fn is_secret_schema(schema: &Value) -> bool {
    schema.get("format").and_then(Value::as_str) == Some("password")
        || schema.get("writeOnly").and_then(Value::as_bool) == Some(true)
}

/// `instance` with every value the schema marks secret ([`is_secret_schema`]) replaced by
/// `"[REDACTED]"` (a `null` stays `null`); everything else unchanged. Name rules are not
/// applied: see [`redact_content`] for both.
pub fn redact_marked(schema: &Value, instance: &Value) -> Value {
    walk_marked(schema, instance, 0)
}

/// The diagnostic projection of one form's `content` under its requested `schema`: the
/// schema's secret markers, then the name rules of [`redact`].
pub fn redact_content(schema: &Map<String, Value>, content: &Map<String, Value>) -> Value {
    let schema = Value::Object(schema.clone());
    redact(&redact_marked(&schema, &Value::Object(content.clone())))
}

/// The diagnostic projection of a round's responses (`payload`, the JSON of a
/// [`ResponseMap`]: `{key: {action, content, ...}}`): each form response's `content` loses
/// the values its request's schema marks secret, then the name rules of [`redact`] apply to
/// the whole. This is what a store keeps as the round's redacted projection, and so what
/// events, pages, the API and `m3 rounds` show.
pub fn redact_responses(requests: &BTreeMap<String, ElicitationRequest>, payload: &Value) -> Value {
    redact(&redact_marked_responses(requests, payload))
}

/// Like [`redact_responses`] with the schema markers only (no name rules): for a record
/// whose other parts get the name rules later (a trace, through
/// [`redact_with`](super::redact_with)).
pub fn redact_marked_responses(
    requests: &BTreeMap<String, ElicitationRequest>,
    payload: &Value,
) -> Value {
    let mut marked = payload.clone();
    if let Value::Object(responses) = &mut marked {
        for (key, response) in responses.iter_mut() {
            let Some(ElicitationRequest::Form(form)) = requests.get(key) else {
                continue;
            };
            if let Some(content) = response.get_mut("content") {
                let schema = Value::Object(form.requested_schema.clone());
                *content = redact_marked(&schema, content);
            }
        }
    }
    marked
}

/// The string (and number) values `responses` gives to fields their request's schema marks
/// secret, at least [`MIN_ECHOED_SECRET_CHARS`](super::MIN_ECHOED_SECRET_CHARS) long,
/// longest first: text to replace wherever it is echoed (a server repeating the answer in
/// its tool result), alongside [`secret_values`](super::secret_values).
pub fn marked_secret_values(
    requests: &BTreeMap<String, ElicitationRequest>,
    responses: &ResponseMap,
) -> Vec<String> {
    let mut found = Vec::new();
    for (key, response) in responses {
        let (Some(ElicitationRequest::Form(form)), Some(content)) =
            (requests.get(key), &response.content)
        else {
            continue;
        };
        let schema = Value::Object(form.requested_schema.clone());
        let content = Value::Object(content.clone());
        collect_marked(&schema, &content, &mut found, 0);
    }
    retain_echoable(&mut found);
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    found
}

fn walk_marked(schema: &Value, instance: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::String(REDACTED.to_owned());
    }
    if is_secret_schema(schema) && !instance.is_null() {
        return Value::String(REDACTED.to_owned());
    }
    match instance {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let projected = map
                .iter()
                .map(|(name, value)| {
                    let value = match properties.and_then(|p| p.get(name)) {
                        Some(sub) => walk_marked(sub, value, depth + 1),
                        None => value.clone(),
                    };
                    (name.clone(), value)
                })
                .collect();
            Value::Object(projected)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| match item_schema(schema, i) {
                    Some(sub) => walk_marked(sub, item, depth + 1),
                    None => item.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The schema of array item `index`: `items` (one schema), or the tuple entry of
/// `prefixItems` / an array-valued `items` (older drafts).
fn item_schema(schema: &Value, index: usize) -> Option<&Value> {
    let tuple = |key: &str| schema.get(key).and_then(Value::as_array)?.get(index);
    tuple("prefixItems")
        .or_else(|| tuple("items"))
        .or_else(|| schema.get("items").filter(|items| items.is_object()))
}

fn collect_marked(schema: &Value, instance: &Value, found: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if is_secret_schema(schema) {
        leaves(instance, found, depth);
        return;
    }
    match instance {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, value) in map {
                if let Some(sub) = properties.get(name) {
                    collect_marked(sub, value, found, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if let Some(sub) = item_schema(schema, i) {
                    collect_marked(sub, item, found, depth + 1);
                }
            }
        }
        _ => {}
    }
}
