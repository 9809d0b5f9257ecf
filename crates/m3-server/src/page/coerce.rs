//! A plain form post turned into responses: every value arrives as text and
//! unchecked boxes are missing, so each field is coerced by its schema before
//! the store's own validation runs; the validator's errors are then placed
//! next to the field they concern.

use std::collections::BTreeMap;

use m3_types::form::{Field, FieldKind, fields};
use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, Error, PendingElicitationRound,
    ResponseMap,
};
use serde_json::{Map, Number, Value};

/// The fields of a url-encoded post, by name, in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Submitted {
    values: BTreeMap<String, Vec<String>>,
}

impl Submitted {
    /// Parses an `application/x-www-form-urlencoded` body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in form_urlencoded::parse(body) {
            values
                .entry(name.into_owned())
                .or_default()
                .push(value.into_owned());
        }
        Self { values }
    }

    /// Every value of `name`.
    pub(crate) fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first value of `name`.
    pub(crate) fn first(&self, name: &str) -> Option<&str> {
        self.all(name).first().map(String::as_str)
    }
}

/// Errors shown on the page: per field name (`KEY.PROPERTY`) and for the round.
#[derive(Debug, Default, Clone)]
pub(crate) struct PageErrors {
    pub(crate) fields: BTreeMap<String, String>,
    pub(crate) round: Option<String>,
}

/// The responses the post means, coerced by each request's schema.
pub(crate) fn responses(round: &PendingElicitationRound, submitted: &Submitted) -> ResponseMap {
    let mut out = ResponseMap::new();
    for (key, request) in &round.requests {
        let action = submitted
            .first(&format!("{key}.action"))
            .and_then(|a| a.parse::<ElicitationAction>().ok())
            .unwrap_or(ElicitationAction::Accept);
        let response = match (action, request) {
            (ElicitationAction::Accept, ElicitationRequest::Form(form)) => {
                ElicitationResponse::accept(content(key, &form.requested_schema, submitted))
            }
            (ElicitationAction::Accept, _) => ElicitationResponse::accept_url(),
            (ElicitationAction::Decline, _) => ElicitationResponse::decline(),
            (ElicitationAction::Cancel, _) => ElicitationResponse::cancel(),
        };
        out.insert(key.clone(), response);
    }
    out
}

fn content(key: &str, schema: &Map<String, Value>, submitted: &Submitted) -> Map<String, Value> {
    let mut content = Map::new();
    for field in fields(schema) {
        let values = submitted.all(&format!("{key}.{}", field.name));
        if let Some(value) = coerce(&field, values) {
            content.insert(field.name.clone(), value);
        }
    }
    content
}

/// One field's value: `None` leaves it out (empty text, no choice), so the
/// schema's `required` speaks; text that is not of the field's type is kept
/// as text, so the validator explains it.
fn coerce(field: &Field, values: &[String]) -> Option<Value> {
    let first = values.first().map(|v| v.trim()).filter(|v| !v.is_empty());
    match &field.kind {
        FieldKind::Boolean => Some(Value::Bool(values.iter().any(|v| v == "true" || v == "on"))),
        FieldKind::MultiSelect { .. } => {
            let chosen: Vec<Value> = values.iter().map(|v| Value::String(v.clone())).collect();
            (!chosen.is_empty() || field.required).then_some(Value::Array(chosen))
        }
        FieldKind::Number { integer, .. } => first.map(|text| number(text, *integer)),
        FieldKind::Text { format, .. } if format.as_deref() == Some("date-time") => {
            first.map(|text| Value::String(utc(text)))
        }
        FieldKind::Json => first.map(|text| {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        }),
        FieldKind::Text { .. } | FieldKind::Select { .. } => values
            .first()
            .filter(|v| !v.is_empty())
            .map(|v| Value::String(v.clone())),
    }
}

fn number(text: &str, integer: bool) -> Value {
    if let Ok(n) = text.parse::<i64>() {
        return n.into();
    }
    match text.parse::<f64>() {
        // "3.0" for an integer field is the integer 3.
        Ok(f) if integer && f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
        Ok(f) => Number::from_f64(f).map_or_else(|| Value::String(text.to_owned()), Value::Number),
        Err(_) => Value::String(text.to_owned()),
    }
}

/// A `datetime-local` value (`2026-12-01T10:00` or with seconds) as UTC
/// RFC 3339; text with an offset already is kept.
fn utc(text: &str) -> String {
    let has_offset =
        text.ends_with('Z') || text.get(19..).is_some_and(|rest| rest.contains(['+', '-']));
    if has_offset {
        return text.to_owned();
    }
    if text.len() == 16 {
        format!("{text}:00Z")
    } else {
        format!("{text}Z")
    }
}

/// Places a refusal of `respond_elicitation`: schema errors of request `K`
/// next to the field they name, everything else for the whole round.
pub(crate) fn place(error: &Error, round: &PendingElicitationRound) -> PageErrors {
    let mut placed = PageErrors::default();
    let key = error.details().get("request_key").and_then(Value::as_str);
    let schema = key.and_then(|key| match round.requests.get(key) {
        Some(ElicitationRequest::Form(form)) => Some(&form.requested_schema),
        _ => None,
    });
    let items = error.details().get("errors").and_then(Value::as_array);
    if let (Some(key), Some(schema), Some(items)) = (key, schema, items) {
        let names: Vec<String> = fields(schema).into_iter().map(|f| f.name).collect();
        for item in items {
            let path = item.get("path").and_then(Value::as_str).unwrap_or_default();
            let message = item
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match field_of(path, message, &names) {
                Some(name) => {
                    placed
                        .fields
                        .entry(format!("{key}.{name}"))
                        .or_insert_with(|| message.to_owned());
                }
                None => placed.round = Some(message.to_owned()),
            }
        }
    }
    let summary = error.message().to_owned();
    placed.round = Some(match placed.round {
        Some(detail) => format!("{summary}: {detail}"),
        None => summary,
    });
    placed
}

/// The property an error is about: the first segment of its instance path,
/// or, at the top (`required`), the property its message quotes.
fn field_of(path: &str, message: &str, names: &[String]) -> Option<String> {
    if let Some(first) = path.strip_prefix('/').and_then(|p| p.split('/').next()) {
        let name = first.replace("~1", "/").replace("~0", "~");
        return names.contains(&name).then_some(name);
    }
    names
        .iter()
        .find(|name| message.contains(&format!("\"{name}\"")))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(kind: FieldKind, required: bool) -> Field {
        let mut field = fields(
            json!({"type": "object", "properties": {"p": {"type": "string"}}})
                .as_object()
                .unwrap(),
        )
        .remove(0);
        field.kind = kind;
        field.required = required;
        field
    }

    #[test]
    fn text_is_coerced_by_the_schema() {
        let int = field(
            FieldKind::Number {
                integer: true,
                minimum: None,
                maximum: None,
            },
            false,
        );
        assert_eq!(coerce(&int, &["42".into()]), Some(json!(42)));
        assert_eq!(coerce(&int, &["4.0".into()]), Some(json!(4)));
        assert_eq!(coerce(&int, &["4.5".into()]), Some(json!(4.5)));
        assert_eq!(coerce(&int, &["four".into()]), Some(json!("four")));
        assert_eq!(coerce(&int, &["".into()]), None);
        let boolean = field(FieldKind::Boolean, false);
        assert_eq!(coerce(&boolean, &[]), Some(json!(false)));
        assert_eq!(coerce(&boolean, &["true".into()]), Some(json!(true)));
        let multi = field(
            FieldKind::MultiSelect {
                choices: vec![],
                min_items: None,
                max_items: None,
            },
            false,
        );
        assert_eq!(coerce(&multi, &[]), None);
        assert_eq!(
            coerce(&multi, &["a".into(), "b".into()]),
            Some(json!(["a", "b"]))
        );
        let when = field(
            FieldKind::Text {
                format: Some("date-time".into()),
                min_length: None,
                max_length: None,
            },
            false,
        );
        assert_eq!(
            coerce(&when, &["2026-12-01T10:00".into()]),
            Some(json!("2026-12-01T10:00:00Z"))
        );
        assert_eq!(
            coerce(&when, &["2026-12-01T10:00:05".into()]),
            Some(json!("2026-12-01T10:00:05Z"))
        );
    }

    #[test]
    fn errors_find_their_field() {
        let names = vec!["street".to_owned(), "city".to_owned()];
        assert_eq!(field_of("/city", "too short", &names), Some("city".into()));
        assert_eq!(
            field_of("", "\"street\" is a required property", &names),
            Some("street".into())
        );
        assert_eq!(
            field_of("", "Additional properties are not allowed", &names),
            None
        );
    }
}
