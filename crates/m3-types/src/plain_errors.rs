//! Schema violations in plain words: one sentence per validator error, written from the
//! error's keyword and the schema's limits, never from the submitted value (so a secret
//! cannot leak through a message, and a person reads "must be at most 2 choices" instead
//! of the validator's `["cheese","ham","olives"] has more than 2 items`).
//!
//! The page shows the sentence next to its field, `m3 respond` after the path, and the API
//! returns it in `details.errors[].message`, beside the stable `keyword`.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

/// One violation as a person reads it: the field it concerns (a JSON pointer; for a missing
/// required field, the field itself), the JSON Schema keyword, and the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainError {
    pub(crate) path: String,
    pub(crate) keyword: String,
    pub(crate) message: String,
}

/// `error` in plain words.
pub(crate) fn plain_error(error: &ValidationError<'_>) -> PlainError {
    let kind = error.kind();
    let mut path = error.instance_path().to_string();
    if let ValidationErrorKind::Required { property } = kind {
        let name = property.as_str().unwrap_or_default();
        path = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
    }
    PlainError {
        path,
        keyword: kind.keyword().to_owned(),
        message: sentence(kind),
    }
}

fn sentence(kind: &ValidationErrorKind) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Required { .. } => "is required".to_owned(),
        K::Type { kind } => format!("must be {}", type_words(kind)),
        K::Format { format } => format_words(format),
        K::Minimum { limit } => format!("must be at least {}", number(limit)),
        K::Maximum { limit } => format!("must be at most {}", number(limit)),
        K::ExclusiveMinimum { limit } => format!("must be more than {}", number(limit)),
        K::ExclusiveMaximum { limit } => format!("must be less than {}", number(limit)),
        K::MultipleOf { multiple_of, .. } => format!("must be a multiple of {multiple_of}"),
        K::MinLength { limit } => format!("must have at least {}", count(*limit, "character")),
        K::MaxLength { limit } => format!("must have at most {}", count(*limit, "character")),
        K::MinItems { limit } => format!("choose at least {}", count(*limit, "option")),
        K::MaxItems { limit } => format!("choose at most {}", count(*limit, "option")),
        K::UniqueItems => "must not choose the same option twice".to_owned(),
        K::Enum { options } => format!("must be one of {}", listing(options)),
        K::Constant { expected_value } => format!("must be {}", plain_value(expected_value)),
        K::Pattern { pattern } => format!("must match the pattern {pattern}"),
        K::AdditionalProperties { unexpected } => format!(
            "has fields the form does not ask for: {}",
            unexpected.join(", ")
        ),
        K::MinProperties { limit } => format!("must have at least {}", count(*limit, "field")),
        K::MaxProperties { limit } => format!("must have at most {}", count(*limit, "field")),
        K::AnyOf { .. } | K::OneOfNotValid { .. } => {
            "does not match any of the allowed forms".to_owned()
        }
        K::OneOfMultipleValid { .. } => "matches more than one of the allowed forms".to_owned(),
        other => format!("is not valid here (the schema's {} rule)", other.keyword()),
    }
}

fn type_words(kind: &TypeKind) -> String {
    let word = |t: JsonType| match t {
        JsonType::Null => "empty",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "a whole number",
        JsonType::Number => "a number",
        JsonType::String => "text",
        JsonType::Array => "a list",
        JsonType::Object => "an object",
    };
    match kind {
        TypeKind::Single(t) => word(*t).to_owned(),
        TypeKind::Multiple(set) => set.iter().map(word).collect::<Vec<_>>().join(" or "),
    }
}

fn format_words(format: &str) -> String {
    match format {
        "email" => "must be an email address, like name@example.com".to_owned(),
        "uri" => "must be a full URL, like https://example.com/page".to_owned(),
        "date" => "must be a date, like 2026-12-31".to_owned(),
        "date-time" => "must be a date and time, like 2026-12-31T17:30:00Z (UTC)".to_owned(),
        other => format!("must be in the {other} format"),
    }
}

/// A limit as written in the schema (`1`, `0.5`), without a trailing `.0`.
fn number(limit: &Value) -> String {
    match limit.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        _ => limit.to_string(),
    }
}

fn count(limit: u64, noun: &str) -> String {
    if limit == 1 {
        format!("1 {noun}")
    } else {
        format!("{limit} {noun}s")
    }
}

fn plain_value(value: &Value) -> String {
    match value {
        Value::String(text) => format!("\"{text}\""),
        other => other.to_string(),
    }
}

fn listing(options: &Value) -> String {
    match options {
        Value::Array(items) => items.iter().map(plain_value).collect::<Vec<_>>().join(", "),
        other => plain_value(other),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn first(schema: Value, instance: Value) -> PlainError {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let errors: Vec<PlainError> = validator
            .iter_errors(&instance)
            .map(|e| plain_error(&e))
            .collect();
        errors.into_iter().next().unwrap()
    }

    #[test]
    fn each_keyword_reads_as_a_sentence_without_the_value() {
        let cases = [
            (
                json!({"type": "object", "required": ["name"]}),
                json!({}),
                "/name",
                "required",
                "is required",
            ),
            (
                json!({"type": "string", "format": "email"}),
                json!("not-an-email"),
                "",
                "format",
                "must be an email address, like name@example.com",
            ),
            (
                json!({"type": "integer", "minimum": 1, "maximum": 9}),
                json!(12),
                "",
                "maximum",
                "must be at most 9",
            ),
            (
                json!({"type": "number", "minimum": 0.5}),
                json!(0.1),
                "",
                "minimum",
                "must be at least 0.5",
            ),
            (
                json!({"type": "array", "maxItems": 2}),
                json!(["cheese", "ham", "olives"]),
                "",
                "maxItems",
                "choose at most 2 options",
            ),
            (
                json!({"type": "string", "minLength": 3}),
                json!("hunter2x"[..2]),
                "",
                "minLength",
                "must have at least 3 characters",
            ),
            (
                json!({"type": "string", "enum": ["small", "large"]}),
                json!("huge"),
                "",
                "enum",
                "must be one of \"small\", \"large\"",
            ),
            (
                json!({"type": "integer"}),
                json!("seven"),
                "",
                "type",
                "must be a whole number",
            ),
        ];
        for (schema, instance, path, keyword, message) in cases {
            let error = first(schema, instance.clone());
            assert_eq!(error.path, path, "{instance}");
            assert_eq!(error.keyword, keyword, "{instance}");
            assert_eq!(error.message, message, "{instance}");
        }
    }

    #[test]
    fn a_required_field_with_a_slash_is_escaped_in_the_path() {
        let error = first(json!({"type": "object", "required": ["a/b"]}), json!({}));
        assert_eq!(error.path, "/a~1b");
    }
}
